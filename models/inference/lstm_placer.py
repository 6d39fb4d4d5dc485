"""The seq2seq LSTM placer of Mirhoseini et al. 2017 (paper 004's "RNN-based" baseline) in numpy.

Why numpy: the baseline is trained per graph at optimize time (REINFORCE, as in the paper
it comes from), and the light install has no torch.  The network is small, so its forward
*and* its exact backward through time are written out here and checked against finite
differences (``tests/test_learned_placers.py``).

The network, for a sequence of ``T`` nodes (ops, or co-location sets, in topological order)
with features ``x`` (T, F) and ``k`` devices:

1. embedding ``e_t = tanh(x_t W_emb + b_emb)`` (H);
2. encoder: an LSTM over ``e_1..e_T``; its states ``h^enc_t`` are the attention memory;
3. decoder: an LSTM started from the encoder's final state; its input at step ``t`` is the
   one-hot of the device chosen at ``t - 1`` (a start symbol at ``t = 1``; the paper feeds a
   trainable device embedding, which a one-hot times the input weights is) concatenated with
   ``h^enc_t`` (this implementation adds it so the decoder knows which op it places);
4. content-based attention (Luong's "general" score): ``s_i = h^dec_t W_att h^enc_i``,
   ``alpha = softmax(s)``, context ``c_t = sum_i alpha_i h^enc_i``;
5. logits ``[h^dec_t, c_t] W_out + b_out`` (k), ``-inf`` where the node cannot run on a device;
   the device of node ``t`` is drawn from their softmax and fed to step ``t + 1``.

The hidden size is small (``hidden``, default 32; Mirhoseini et al. used 256) so the
per-graph episodes fit a few seconds of budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["LSTM_PARAM_NAMES", "LstmCache", "backward", "forward", "init_params"]

LSTM_PARAM_NAMES = ("emb.W", "emb.b", "enc.Wx", "enc.Wh", "enc.b", "dec.Wx", "dec.Wh", "dec.b", "att.W",
                    "out.W", "out.b")
Params = dict[str, np.ndarray]


def init_params(n_features: int, hidden: int, k: int, rng: np.random.Generator) -> Params:
    """Fresh weights, uniform in ``+-1/sqrt(hidden)`` (PyTorch's LSTM default), forget-gate bias 1."""
    if n_features < 1 or hidden < 1 or k < 1:
        raise ValueError(f"lstm placer: n_features, hidden and k must be >= 1, got {n_features}, {hidden}, {k}")
    s = 1.0 / np.sqrt(hidden)
    shapes = {"emb.W": (n_features, hidden), "emb.b": (hidden,), "enc.Wx": (hidden, 4 * hidden),
              "enc.Wh": (hidden, 4 * hidden), "enc.b": (4 * hidden,), "dec.Wx": (k + 1 + hidden, 4 * hidden),
              "dec.Wh": (hidden, 4 * hidden), "dec.b": (4 * hidden,), "att.W": (hidden, hidden),
              "out.W": (2 * hidden, k), "out.b": (k,)}
    p = {n: rng.uniform(-s, s, shapes[n]) for n in LSTM_PARAM_NAMES}
    for n in ("enc.b", "dec.b"):
        p[n][hidden:2 * hidden] += 1.0  # forget gate (gate order i, f, g, o)
    return p


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * a))


def _cell(wx: np.ndarray, wh: np.ndarray, b: np.ndarray, x: np.ndarray, h: np.ndarray,
          c: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """One LSTM step (gate order i, f, g, o); returns ``h, c`` and what the backward needs."""
    H = len(h)
    z = x @ wx + h @ wh + b
    i, f, o = _sigmoid(z[:H]), _sigmoid(z[H:2 * H]), _sigmoid(z[3 * H:])
    g = np.tanh(z[2 * H:3 * H])
    c2 = f * c + i * g
    tc = np.tanh(c2)
    return o * tc, c2, (x, h, c, i, f, g, o, tc)


def _cell_back(wx: np.ndarray, wh: np.ndarray, saved: tuple[np.ndarray, ...], dh: np.ndarray, dc: np.ndarray,
               gwx: np.ndarray, gwh: np.ndarray, gb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward of :func:`_cell`: accumulates weight gradients, returns ``(dx, dh_prev, dc_prev)``."""
    x, h, c, i, f, g, o, tc = saved
    do = dh * tc
    dc = dc + dh * o * (1.0 - tc * tc)
    dz = np.concatenate([dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), do * o * (1 - o)])
    gwx += np.outer(x, dz)
    gwh += np.outer(h, dz)
    gb += dz
    return wx @ dz, wh @ dz, dc * f


@dataclass(frozen=True, eq=False)
class LstmCache:
    """What :func:`forward` produced (``logits`` (T, k), ``actions`` (T,)) and what :func:`backward` needs."""

    logits: np.ndarray
    actions: np.ndarray
    x: np.ndarray
    e: np.ndarray
    enc: list[tuple[np.ndarray, ...]]
    henc: np.ndarray
    dec: list[tuple[np.ndarray, ...]]
    hdec: np.ndarray
    alpha: np.ndarray
    ctx: np.ndarray


#: Steps between two looks at ``forward``'s ``stop`` (a step costs about 1 ms at 8,000 nodes: attention over all).
STOP_EVERY = 64


def forward(p: Params, x: np.ndarray, allowed: np.ndarray, choose: Callable[[int, np.ndarray], int],
            stop: Callable[[], bool] | None = None) -> LstmCache | None:
    """Run encoder and decoder over ``x`` (T, F); ``allowed`` (T, k) bool; ``choose(t, logits_t)``
    picks node ``t``'s device (sampled, greedy, or a stored action to replay).  ``None`` when ``stop()``
    turned true on the way (checked every :data:`STOP_EVERY` steps): half a sequence places nothing."""
    T, k = allowed.shape
    if len(x) != T:
        raise ValueError(f"lstm placer: {len(x)} feature rows for {T} nodes")
    if not allowed.any(axis=1).all():
        raise ValueError("lstm placer: a node can run on no device")
    H = p["enc.Wh"].shape[0]
    e = np.tanh(x @ p["emb.W"] + p["emb.b"])
    h, c = np.zeros(H), np.zeros(H)
    enc, henc = [], np.zeros((T, H))
    for t in range(T):
        if stop is not None and t % STOP_EVERY == 0 and stop():
            return None
        h, c, saved = _cell(p["enc.Wx"], p["enc.Wh"], p["enc.b"], e[t], h, c)
        enc.append(saved)
        henc[t] = h
    dec, hdec = [], np.zeros((T, H))
    alpha, ctx = np.zeros((T, T)), np.zeros((T, H))
    logits, actions = np.zeros((T, k)), np.zeros(T, np.int64)
    prev = k  # the start symbol
    for t in range(T):
        if stop is not None and t % STOP_EVERY == 0 and stop():
            return None
        u = np.zeros(k + 1 + H)
        u[prev] = 1.0
        u[k + 1:] = henc[t]
        h, c, saved = _cell(p["dec.Wx"], p["dec.Wh"], p["dec.b"], u, h, c)
        dec.append(saved)
        hdec[t] = h
        s = henc @ (p["att.W"].T @ h)
        a = np.exp(s - s.max())
        alpha[t] = a / a.sum()
        ctx[t] = alpha[t] @ henc
        lt = np.concatenate([h, ctx[t]]) @ p["out.W"] + p["out.b"]
        lt[~allowed[t]] = -np.inf
        logits[t] = lt
        prev = int(choose(t, lt))
        if not 0 <= prev < k or not allowed[t, prev]:
            raise ValueError(f"lstm placer: device {prev} chosen for node {t}, allowed {np.flatnonzero(allowed[t])}")
        actions[t] = prev
    return LstmCache(logits, actions, x, e, enc, henc, dec, hdec, alpha, ctx)


def backward(p: Params, cache: LstmCache, dlogits: np.ndarray) -> Params:
    """Gradient of ``sum(dlogits * logits)`` with respect to every weight, actions held fixed
    (entries of ``dlogits`` at forbidden devices are ignored)."""
    g = {n: np.zeros_like(v) for n, v in p.items()}
    T, k = cache.logits.shape
    H = p["enc.Wh"].shape[0]
    dl = np.where(np.isfinite(cache.logits), dlogits, 0.0)
    dhenc = np.zeros((T, H))
    dh, dc = np.zeros(H), np.zeros(H)
    for t in range(T - 1, -1, -1):
        feat = np.concatenate([cache.hdec[t], cache.ctx[t]])
        g["out.W"] += np.outer(feat, dl[t])
        g["out.b"] += dl[t]
        dfeat = p["out.W"] @ dl[t]
        dhd = dfeat[:H] + dh
        dctx = dfeat[H:]
        al = cache.alpha[t]
        dalpha = cache.henc @ dctx
        dhenc += np.outer(al, dctx)
        ds = al * (dalpha - al @ dalpha)
        q = p["att.W"].T @ cache.hdec[t]
        dhenc += np.outer(ds, q)
        dq = cache.henc.T @ ds
        g["att.W"] += np.outer(cache.hdec[t], dq)
        dhd = dhd + p["att.W"] @ dq
        du, dh, dc = _cell_back(p["dec.Wx"], p["dec.Wh"], cache.dec[t], dhd, dc, g["dec.Wx"], g["dec.Wh"], g["dec.b"])
        dhenc[t] += du[k + 1:]
    de = np.zeros_like(cache.e)
    for t in range(T - 1, -1, -1):
        dx, dh, dc = _cell_back(p["enc.Wx"], p["enc.Wh"], cache.enc[t], dhenc[t] + dh, dc,
                                g["enc.Wx"], g["enc.Wh"], g["enc.b"])
        de[t] = dx
    da = de * (1.0 - cache.e * cache.e)
    g["emb.W"] += cache.x.T @ da
    g["emb.b"] += da.sum(axis=0)
    return g
