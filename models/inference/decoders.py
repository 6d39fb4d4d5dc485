"""Non-autoregressive decoding of node priorities into topological orders (paper 000, 4.2).

Priorities ``y`` define the policy of eq. 8: at every step the next op is drawn
from ``softmax(y)`` restricted to the ready ops.  Three ways to turn that policy
into an order, all numpy + numba (no torch), scored with the one memory model of
:mod:`onnx_sched.cost.memory` (its numba ``step_kernel``):

* :func:`greedy` -- always take the ready op with the highest priority (a heap).
* :func:`sample_orders` -- exact samples of eq. 8 in one pass per sample, via an
  exponential race: every op gets a clock ``E_i / exp(y_i)`` (``E_i ~ Exp(1)``)
  that starts when its last predecessor fires, ``tau_i = max_pred tau_p +
  E_i exp(-y_i)``, and the order is ``argsort(tau)``.  By memorylessness, given
  the ops fired so far each ready op fires next with probability
  ``exp(y_i) / sum_ready exp(y_j)`` -- eq. 8 exactly -- and ``tau`` increases along
  every edge, so the order is topological.  ``mode="gumbel"`` instead perturbs the
  priorities once with Gumbel noise and decodes greedily (paper 001's one-shot
  Gumbel-top-k sampler; a different distribution over orders).
* :func:`beam_search` -- beam search on the total log-probability of the partial
  order with state collapsing: partial orders that scheduled the same *set* of ops
  are merged, keeping the lowest peak so far (same live bytes, same future).

:func:`best_of` returns the lowest-peak order among candidates.

Example:
    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[1, 1, 1, 1])
    >>> dg = decode_graph(g)
    >>> greedy(dg, np.array([0.0, 1.0, 2.0, 0.0])).tolist()
    [0, 2, 1, 3]
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.cost.memory import memory_arrays, peek_kernel, step_kernel
from onnx_sched.dag import kahn_order
from onnx_sched.dag_kernels import kahn_kernel
from onnx_sched.graph import Graph

__all__ = [
    "DecodeGraph",
    "beam_search",
    "best_of",
    "checked_priorities",
    "decode_graph",
    "greedy",
    "log_prob",
    "memory_scale",
    "peaks",
    "ready_steps",
    "sample_orders",
]

_Y_CLIP = 60.0  # |priority| bound inside kernels: exp(60) is still finite in float64


@dataclass(frozen=True, eq=False)
class DecodeGraph:
    """Flat arrays of a graph for the decoding kernels (adjacency, a topological order, memory model)."""

    n: int
    topo: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    mem: tuple  # step_kernel arguments after (op, remaining, live)
    n_consumers: np.ndarray
    base: int
    inplace: bool


def decode_graph(g: Graph, inplace: bool = False) -> DecodeGraph:
    """Collect what the decoders need from ``g`` (memory model chosen by ``inplace``)."""
    a = memory_arrays(g, inplace)
    i64 = lambda x: np.ascontiguousarray(x, dtype=np.int64)  # noqa: E731
    mem = (
        i64(a.in_ptr), i64(a.in_idx), i64(a.out_ptr), i64(a.out_idx), i64(a.size), i64(a.n_consumers),
        np.ascontiguousarray(a.keep, dtype=np.bool_), i64(a.param), i64(a.inplace_ptr), i64(a.inplace_idx),
    )
    return DecodeGraph(
        n=g.n_ops,
        topo=i64(kahn_order(g)),
        pred_ptr=i64(g.op_preds.indptr), pred_idx=i64(g.op_preds.indices),
        succ_ptr=i64(g.op_succs.indptr), succ_idx=i64(g.op_succs.indices),
        mem=mem, n_consumers=mem[5], base=int(a.base), inplace=bool(inplace),
    )


def checked_priorities(dg: DecodeGraph, y: np.ndarray) -> np.ndarray:
    """``y`` as float64, checked against the graph and clipped to the range the kernels handle."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if len(y) != dg.n:
        raise ValueError(f"got {len(y)} priorities for a graph of {dg.n} ops")
    if not np.isfinite(y).all():
        raise ValueError("priorities contain NaN or infinity")
    return np.clip(y, -_Y_CLIP, _Y_CLIP)


def memory_scale(dg: DecodeGraph) -> float:
    """Mean output bytes per op (at least 1): the unit of the memory-aware decoder's memory term."""
    out_idx, size = dg.mem[3], dg.mem[4]
    return max(1.0, float(size[out_idx].sum()) / max(1, dg.n)) if len(out_idx) else 1.0


# ------------------------------------------------------------------ costs
@numba.njit(cache=True)
def _peaks_kernel(orders, base, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx):
    out = np.empty(orders.shape[0], dtype=np.int64)
    for s in range(orders.shape[0]):
        remaining = n_consumers.copy()
        live = base
        peak = base
        for i in range(orders.shape[1]):
            m_t, live = step_kernel(orders[s, i], remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
            if m_t > peak:
                peak = m_t
        out[s] = peak
    return out


def peaks(dg: DecodeGraph, orders: np.ndarray) -> np.ndarray:
    """Peak memory (eq. 1 / 15) of each row of ``orders`` (``(k, n)`` topological orders)."""
    orders = np.ascontiguousarray(np.atleast_2d(orders), dtype=np.int64)
    return _peaks_kernel(orders, dg.base, *dg.mem)


def best_of(dg: DecodeGraph, orders: np.ndarray) -> tuple[np.ndarray, int]:
    """The lowest-peak row of ``orders`` and its peak (first one on ties)."""
    p = peaks(dg, orders)
    i = int(np.argmin(p))
    return np.asarray(orders)[i].copy(), int(p[i])


# ----------------------------------------------------------------- greedy
def _greedy_order(y: np.ndarray, dg: DecodeGraph) -> np.ndarray:
    """The ready op of highest ``y`` first (ties: lower id): Kahn's algorithm on ``-y``."""
    order, k = kahn_kernel(-np.asarray(y, np.float64), np.diff(dg.pred_ptr).astype(np.int64), dg.succ_ptr,
                           dg.succ_idx)
    return order[:k]


def greedy(dg: DecodeGraph, y: np.ndarray) -> np.ndarray:
    """Greedy decoding: repeatedly run the ready op of highest priority (ties: lower id)."""
    return _greedy_order(checked_priorities(dg, y), dg)


# --------------------------------------------------------------- sampling
@numba.njit(cache=True)
def _race_kernel(y, expo, topo, pred_ptr, pred_idx):
    n_samples, n = expo.shape
    orders = np.empty((n_samples, n), np.int64)
    tau = np.empty(n, np.float64)
    rate_inv = np.exp(-y)
    for s in range(n_samples):
        for k in range(n):
            u = topo[k]
            start = 0.0
            for e in range(pred_ptr[u], pred_ptr[u + 1]):
                t = tau[pred_idx[e]]
                if t > start:
                    start = t
            tau[u] = start + expo[s, u] * rate_inv[u]
        orders[s] = np.argsort(tau, kind="mergesort")
    return orders


def sample_orders(dg: DecodeGraph, y: np.ndarray, k: int, rng: np.random.Generator, mode: str = "race") -> np.ndarray:
    """``(k, n)`` topological orders sampled from the priority policy.

    ``mode="race"``: exact samples of eq. 8 (exponential race, see module doc).
    ``mode="gumbel"``: Gumbel-perturbed priorities decoded greedily (paper 001).
    """
    if k < 1:
        raise ValueError(f"need at least one sample, got k={k}")
    y = checked_priorities(dg, y)
    if mode == "race":
        # shift so exp(-y) stays in range; the policy is invariant to a constant shift
        y = y - y.max()
        expo = rng.exponential(size=(k, dg.n))
        # ties in tau are measure-zero except through underflow; argsort is stable then
        return _race_kernel(y, expo, dg.topo, dg.pred_ptr, dg.pred_idx)
    if mode == "gumbel":
        g = rng.gumbel(size=(k, dg.n))
        return np.stack([_greedy_order(y + g[i], dg) for i in range(k)])
    raise ValueError(f"unknown sampling mode {mode!r}; expected 'race' or 'gumbel'")


# --------------------------------------------------------- log-probability
@numba.njit(cache=True)
def _ready_steps_kernel(orders, pred_ptr, pred_idx):
    n_samples, n = orders.shape
    out = np.zeros((n_samples, n), np.int64)
    pos = np.empty(n, np.int64)
    for s in range(n_samples):
        for i in range(n):
            pos[orders[s, i]] = i
        for v in range(n):
            r = 0
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                p = pos[pred_idx[e]] + 1
                if p > r:
                    r = p
            out[s, v] = r
    return out


def ready_steps(dg: DecodeGraph, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ready, pos)``: op ``v`` is in the ready set of step ``t`` iff ``ready[v] <= t <= pos[v]``.

    This is all eq. 8's log-probability needs (the trainer evaluates it in torch).
    """
    orders = np.ascontiguousarray(np.atleast_2d(orders), dtype=np.int64)
    pos = np.empty_like(orders)
    np.put_along_axis(pos, orders, np.arange(orders.shape[1])[None, :].repeat(len(orders), 0), axis=1)
    return _ready_steps_kernel(orders, dg.pred_ptr, dg.pred_idx), pos


def log_prob(dg: DecodeGraph, y: np.ndarray, order: np.ndarray) -> float:
    """``log p(order | y)`` under eq. 8 (reference implementation, O(n^2))."""
    y = checked_priorities(dg, y)
    ready, pos = ready_steps(dg, np.asarray(order)[None])
    t = np.arange(dg.n)[:, None]
    mask = (ready[0][None, :] <= t) & (t <= pos[0][None, :])
    z = np.where(mask, y[None, :], -np.inf)
    m = z.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
    return float((y[np.asarray(order)] - lse).sum())


# ------------------------------------------------------------ beam search
@numba.njit(cache=True)
def _beam_kernel(y, coef, width, zob, base, pred_ptr, succ_ptr, succ_idx, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx):
    n = len(y)
    n_t = len(n_consumers)
    # double-buffered beam states
    indeg = np.empty((2, width, n), np.int64)
    rem = np.empty((2, width, n_t), np.int64)
    orders = np.empty((2, width, n), np.int64)
    live = np.empty((2, width), np.int64)
    peak = np.empty((2, width), np.int64)
    logp = np.empty((2, width), np.float64)
    hsh = np.empty((2, width), np.uint64)
    for v in range(n):
        indeg[0, 0, v] = pred_ptr[v + 1] - pred_ptr[v]
    rem[0, 0] = n_consumers
    live[0, 0] = base
    peak[0, 0] = base
    logp[0, 0] = 0.0
    hsh[0, 0] = np.uint64(0)
    nb = 1
    cur = 0
    cap = width * n
    c_parent = np.empty(cap, np.int64)
    c_op = np.empty(cap, np.int64)
    c_logp = np.empty(cap, np.float64)
    c_peak = np.empty(cap, np.int64)
    c_hash = np.empty(cap, np.uint64)
    keep_c = np.empty(cap, np.int64)
    logit = np.empty(n, np.float64)
    step_peak = np.empty(n, np.int64)
    for t in range(n):
        nc = 0
        for b in range(nb):
            # logits of the ready ops of beam b (memory-aware when coef > 0), then their log-sum-exp
            r = rem[cur, b]
            mx = -1e300
            for v in range(n):
                if indeg[cur, b, v] == 0:
                    m_t, after, _f = peek_kernel(v, r, live[cur, b], in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
                    step_peak[v] = m_t
                    logit[v] = y[v] - coef * (after - live[cur, b])
                    if logit[v] > mx:
                        mx = logit[v]
            acc = 0.0
            for v in range(n):
                if indeg[cur, b, v] == 0:
                    acc += np.exp(logit[v] - mx)
            lse = mx + np.log(acc)
            for v in range(n):
                if indeg[cur, b, v] == 0:
                    c_parent[nc] = b
                    c_op[nc] = v
                    c_logp[nc] = logp[cur, b] + logit[v] - lse
                    c_peak[nc] = max(peak[cur, b], step_peak[v])
                    c_hash[nc] = hsh[cur, b] ^ zob[v]
                    nc += 1
        # state collapsing: one candidate per scheduled set, the lowest peak (then highest logp)
        by_hash = np.argsort(c_hash[:nc])
        nk = 0
        i = 0
        while i < nc:
            j = i
            best = by_hash[i]
            while j < nc and c_hash[by_hash[j]] == c_hash[by_hash[i]]:
                c = by_hash[j]
                if c_peak[c] < c_peak[best] or (c_peak[c] == c_peak[best] and c_logp[c] > c_logp[best]):
                    best = c
                j += 1
            keep_c[nk] = best
            nk += 1
            i = j
        # top-`width` survivors by total log-probability
        score = np.empty(nk, np.float64)
        for i in range(nk):
            score[i] = -c_logp[keep_c[i]]
        rank = np.argsort(score, kind="mergesort")
        nxt = 1 - cur
        nb_new = min(width, nk)
        for i in range(nb_new):
            c = keep_c[rank[i]]
            b = c_parent[c]
            v = c_op[c]
            indeg[nxt, i] = indeg[cur, b]
            rem[nxt, i] = rem[cur, b]
            orders[nxt, i, :t] = orders[cur, b, :t]
            orders[nxt, i, t] = v
            _m, lv = step_kernel(v, rem[nxt, i], live[cur, b], in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
            live[nxt, i] = lv
            peak[nxt, i] = c_peak[c]
            logp[nxt, i] = c_logp[c]
            hsh[nxt, i] = c_hash[c]
            indeg[nxt, i, v] = -1
            for e in range(succ_ptr[v], succ_ptr[v + 1]):
                indeg[nxt, i, succ_idx[e]] -= 1
        nb = nb_new
        cur = nxt
    best = 0
    for b in range(nb):
        if peak[cur, b] < peak[cur, best]:
            best = b
    return orders[cur, :nb].copy(), peak[cur, :nb].copy(), best


def beam_search(dg: DecodeGraph, y: np.ndarray, width: int, seed: int = 0, mem_beta: float = 0.0) -> tuple[np.ndarray, int]:
    """Beam search with state collapsing (paper 000, 4.2); returns the lowest-peak final order and its peak.

    The score is the log-probability of eq. 8, or of the memory-aware policy of
    :mod:`onnx_sched.models.inference.mem_aware` when ``mem_beta > 0``.  ``seed`` only draws
    the Zobrist keys that identify scheduled sets.
    """
    if width < 1:
        raise ValueError(f"beam width must be >= 1, got {width}")
    y = checked_priorities(dg, y)
    coef = float(mem_beta) / memory_scale(dg) if mem_beta > 0 else 0.0
    zob = np.random.default_rng(seed).integers(1, 2**64, size=dg.n, dtype=np.uint64, endpoint=False)
    orders, pk, best = _beam_kernel(y, coef, int(width), zob, dg.base, dg.pred_ptr, dg.succ_ptr, dg.succ_idx, *dg.mem)
    return orders[best], int(pk[best])
