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


def _cell_dz(wh: np.ndarray, saved: tuple[np.ndarray, ...], dh: np.ndarray,
             dc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward of :func:`_cell` through time: ``(dz, dh_prev, dc_prev)``, with ``dz`` the gradient of the gate
    pre-activations (the weights' gradients are ``x^T dz``, ``h^T dz`` summed over steps, taken all at once)."""
    _, _, c, i, f, g, o, tc = saved
    do = dh * tc
    dc = dc + dh * o * (1.0 - tc * tc)
    dz = np.concatenate([dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), do * o * (1 - o)])
    return dz, wh @ dz, dc * f


def _lstm_back(wx: np.ndarray, wh: np.ndarray, saved: list[tuple[np.ndarray, ...]], dh_out: np.ndarray,
               dh: np.ndarray, dc: np.ndarray) -> tuple[np.ndarray, ...]:
    """Backward of an LSTM run over ``len(saved)`` steps, given the gradient reaching each step's output
    (``dh_out`` (T, H)) and the final state's ``dh, dc``: ``(dx (T, in), gWx, gWh, gb, dh_0, dc_0)``, the last
    two for the state it started from.  Only the
    recurrence runs step by step; the weight and input gradients are one product each."""
    T = len(saved)
    dz = np.empty((T, wh.shape[1]))
    for t in range(T - 1, -1, -1):
        dz[t], dh, dc = _cell_dz(wh, saved[t], dh_out[t] + dh, dc)
    xs = np.array([s[0] for s in saved]).reshape(T, wx.shape[0])
    hs = np.array([s[1] for s in saved]).reshape(T, wh.shape[0])
    return dz @ wx.T, xs.T @ dz, hs.T @ dz, dz.sum(axis=0), dh, dc


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
    ctx = np.zeros((T, H))  # the attention weights are not kept: T x T (backward recomputes them in blocks)
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
        ctx[t] = (a / a.sum()) @ henc
        lt = np.concatenate([h, ctx[t]]) @ p["out.W"] + p["out.b"]
        lt[~allowed[t]] = -np.inf
        logits[t] = lt
        prev = int(choose(t, lt))
        if not 0 <= prev < k or not allowed[t, prev]:
            raise ValueError(f"lstm placer: device {prev} chosen for node {t}, allowed {np.flatnonzero(allowed[t])}")
        actions[t] = prev
    return LstmCache(logits, actions, x, e, enc, henc, dec, hdec, ctx)


#: Attention rows whose (rows, T) gradients are formed at once in :func:`backward` (bounds its memory at large T).
ATTENTION_ROWS = 256


def backward(p: Params, cache: LstmCache, dlogits: np.ndarray) -> Params:
    """Gradient of ``sum(dlogits * logits)`` with respect to every weight, actions held fixed
    (entries of ``dlogits`` at forbidden devices are ignored).

    The output layer and the attention do not feed the recurrence back, so their gradients for all steps are
    matrix products (attention weights recomputed and differentiated in blocks of :data:`ATTENTION_ROWS` rows);
    only the two LSTMs go step by step."""
    g = {n: np.zeros_like(v) for n, v in p.items()}
    T, k = cache.logits.shape
    H = p["enc.Wh"].shape[0]
    dl = np.where(np.isfinite(cache.logits), dlogits, 0.0)
    g["out.W"] = np.concatenate([cache.hdec, cache.ctx], axis=1).T @ dl
    g["out.b"] = dl.sum(axis=0)
    dfeat = dl @ p["out.W"].T
    dctx = dfeat[:, H:]
    q = cache.hdec @ p["att.W"]  # row t: the attention query W_att^T h^dec_t
    dhenc, dq = np.zeros((T, H)), np.zeros((T, H))
    for lo in range(0, T, ATTENTION_ROWS):
        rows = slice(lo, min(T, lo + ATTENTION_ROWS))
        s = q[rows] @ cache.henc.T  # the forward's attention scores, recomputed
        al = np.exp(s - s.max(axis=1, keepdims=True))
        al /= al.sum(axis=1, keepdims=True)
        dalpha = dctx[rows] @ cache.henc.T
        ds = al * (dalpha - (al * dalpha).sum(axis=1, keepdims=True))  # through the softmax
        dhenc += al.T @ dctx[rows] + ds.T @ q[rows]
        dq[rows] = ds @ cache.henc
    g["att.W"] = cache.hdec.T @ dq
    du, g["dec.Wx"], g["dec.Wh"], g["dec.b"], dh, dc = _lstm_back(
        p["dec.Wx"], p["dec.Wh"], cache.dec, dfeat[:, :H] + dq @ p["att.W"].T, np.zeros(H), np.zeros(H))
    dhenc += du[:, k + 1:]
    # the decoder starts from the encoder's final (h, c)
    de, g["enc.Wx"], g["enc.Wh"], g["enc.b"], _, _ = _lstm_back(p["enc.Wx"], p["enc.Wh"], cache.enc, dhenc, dh, dc)
    da = de * (1.0 - cache.e * cache.e)
    g["emb.W"] = cache.x.T @ da
    g["emb.b"] = da.sum(axis=0)
    return g
