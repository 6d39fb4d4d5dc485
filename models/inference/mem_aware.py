"""Memory-aware variant of the eq. 8 decoder: learned priorities plus the live-memory change of each step.

Eq. 8 (paper 000) draws the next op from ``softmax(y)`` over the ready ops with
priorities ``y`` fixed for the whole decoding.  Static priorities cannot react to
the state of the schedule, yet the quantity that matters -- how much live memory
running an op adds or frees *now* -- is known exactly and cheaply at every step.
This decoder adds it to the logits:

    logit_t(i) = y_i - beta * (I_after(i) - I_t) / s,   i ready at step t,

where ``I_after(i) - I_t`` is the allocated-minus-freed bytes of running ``i`` now
(the memory model of :mod:`onnx_sched.cost.memory`, in-place reuse included) and
``s`` is the mean output bytes per op of the graph, so ``beta`` is scale free.
``beta = 0`` is eq. 8; ``beta -> inf`` is the memory-greedy list scheduler with
the learned priorities breaking its (frequent) ties.  The network is still called
once per graph; only the decoding loop, O(n * |ready|), looks at the state.

* :func:`mem_aware_orders` -- greedy (``k=0``) or ``k`` exact samples (fresh
  Gumbel noise at every step, so each step is drawn from its softmax);
* :func:`mem_aware_offsets` -- for given orders, the per-step offsets
  ``-beta * delta / s`` and ready masks the trainer needs for ``log p(order)``.

Example:
    >>> from onnx_sched.graph import Graph
    >>> from onnx_sched.models.inference.decoders import decode_graph
    >>> g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[1, 1, 8, 1])
    >>> dg = decode_graph(g)
    >>> mem_aware_orders(dg, np.array([0.0, 0.0, 1.0, 0.0]), beta=0.0)[0].tolist()  # plain eq. 8 greedy
    [0, 2, 1, 3]
    >>> mem_aware_orders(dg, np.array([0.0, 0.0, 1.0, 0.0]), beta=10.0)[0].tolist()  # the small op first
    [0, 1, 2, 3]
"""

from __future__ import annotations

import numba
import numpy as np

from onnx_sched.cost.memory import peek_kernel, step_kernel
from onnx_sched.dag_kernels import init_ready, release_successors
from onnx_sched.models.inference.decoders import DecodeGraph, checked_priorities, memory_scale

__all__ = ["mem_aware_offsets", "mem_aware_orders"]


@numba.njit(cache=True)
def _orders_kernel(y, coef, k, seed, base, pred_ptr, succ_ptr, succ_idx, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx):
    """``k`` sampled orders, or the greedy order when ``k == 0`` (then one row)."""
    n = len(y)
    rows = max(k, 1)
    np.random.seed(seed)
    orders = np.empty((rows, n), np.int64)
    indeg = np.empty(n, np.int64)
    ready = np.empty(n, np.int64)
    for s in range(rows):
        n_ready = init_ready(pred_ptr, indeg, ready)
        remaining = n_consumers.copy()
        live = base
        for t in range(n):
            best = -1
            b_score = -np.inf
            for j in range(n_ready):
                v = ready[j]
                _m, after, _f = peek_kernel(v, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
                score = y[v] - coef * (after - live)
                if k > 0:
                    score += np.random.gumbel(0.0, 1.0)
                if score > b_score or (score == b_score and v < ready[best]):
                    best, b_score = j, score
            v = ready[best]
            ready[best] = ready[n_ready - 1]
            n_ready -= 1
            orders[s, t] = v
            _m, live = step_kernel(v, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
            n_ready = release_successors(v, succ_ptr, succ_idx, indeg, ready, n_ready)
    return orders


def mem_aware_orders(dg: DecodeGraph, y: np.ndarray, beta: float, k: int = 0, seed: int = 0) -> np.ndarray:
    """``(max(k, 1), n)`` orders of the memory-aware policy: the greedy one for ``k=0``, else ``k`` samples."""
    if k < 0:
        raise ValueError(f"need k >= 0 samples, got {k}")
    if not beta >= 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    coef = float(beta) / memory_scale(dg)
    return _orders_kernel(checked_priorities(dg, y), coef, int(k), int(seed), dg.base, dg.pred_ptr, dg.succ_ptr, dg.succ_idx, *dg.mem)


@numba.njit(cache=True)
def _offsets_kernel(orders, coef, base, pred_ptr, succ_ptr, succ_idx, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx):
    k, n = orders.shape
    off = np.zeros((k, n, n), np.float32)
    mask = np.zeros((k, n, n), np.bool_)
    indeg = np.empty(n, np.int64)
    ready = np.empty(n, np.int64)
    for s in range(k):
        n_ready = init_ready(pred_ptr, indeg, ready)
        remaining = n_consumers.copy()
        live = base
        for t in range(n):
            for j in range(n_ready):
                v = ready[j]
                _m, after, _f = peek_kernel(v, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
                off[s, t, v] = -coef * (after - live)
                mask[s, t, v] = True
            v = orders[s, t]
            for j in range(n_ready):
                if ready[j] == v:
                    ready[j] = ready[n_ready - 1]
                    n_ready -= 1
                    break
            _m, live = step_kernel(v, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
            n_ready = release_successors(v, succ_ptr, succ_idx, indeg, ready, n_ready)
    return off, mask


def mem_aware_offsets(dg: DecodeGraph, orders: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """``(offset, ready)``, both ``(k, n, n)`` [sample, step, op]: the memory term of every ready op at
    every step of each order, and which ops were ready.  ``log p(order) = sum_t (y + offset)[t, order[t]] -
    logsumexp over ready of (y + offset)[t]``."""
    orders = np.ascontiguousarray(np.atleast_2d(orders), dtype=np.int64)
    coef = float(beta) / memory_scale(dg)
    return _offsets_kernel(orders, coef, dg.base, dg.pred_ptr, dg.succ_ptr, dg.succ_idx, *dg.mem)
