"""Numba kernels of the peak-memory list schedulers: ``greedy`` and the random orders.

Both walk a topological order op by op over a per-tensor ``remaining`` consumer count, with
:func:`onnx_sched.cost.memory.step_kernel`'s accounting; they need only the adjacency and the memory model
(:func:`list_args`), not the search tables of :func:`onnx_sched.passes.order._kernels.kernel_graph`.
"""

from __future__ import annotations

import numba
import numpy as np

from onnx_sched.cost.memory import memory_arrays, peek_kernel, step_kernel
from onnx_sched.dag_kernels import init_ready, release_successors
from onnx_sched.graph import Graph

__all__ = ["greedy_kernel", "list_args", "random_orders_kernel"]


def list_args(g: Graph, inplace: bool) -> tuple:
    """``(base, pred_ptr, succ_ptr, succ_idx, *step_kernel arguments)`` of the list-scheduling kernels (greedy,
    random orders): the adjacency and the memory model, without the search tables of
    :func:`onnx_sched.passes.order._kernels.kernel_graph`."""
    a = memory_arrays(g, inplace)
    i64 = lambda x: np.ascontiguousarray(x, dtype=np.int64)  # noqa: E731
    return (np.int64(a.base), i64(g.op_preds.indptr), i64(g.op_succs.indptr), i64(g.op_succs.indices),
            i64(a.in_ptr), i64(a.in_idx), i64(a.out_ptr), i64(a.out_idx), i64(a.size), i64(a.n_consumers),
            np.ascontiguousarray(a.keep, dtype=np.bool_), i64(a.param), i64(a.inplace_ptr), i64(a.inplace_idx))


@numba.njit(cache=True, inline="always")
def _greedy_before(i, j, ha, hb, hc, hv):
    """Heap entry ``i`` pops before ``j``: (memory after, -freed, M_t, op) lexicographically."""
    if ha[i] != ha[j]:
        return ha[i] < ha[j]
    if hb[i] != hb[j]:
        return hb[i] < hb[j]
    if hc[i] != hc[j]:
        return hc[i] < hc[j]
    return hv[i] < hv[j]


@numba.njit(cache=True, inline="always")
def _greedy_swap(i, j, ha, hb, hc, hv, hs):
    ha[i], ha[j] = ha[j], ha[i]
    hb[i], hb[j] = hb[j], hb[i]
    hc[i], hc[j] = hc[j], hc[i]
    hv[i], hv[j] = hv[j], hv[i]
    hs[i], hs[j] = hs[j], hs[i]


@numba.njit(cache=True)
def _greedy_push(v, stamp, remaining, nh, ha, hb, hc, hv, hs, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers,
                 keep, param, ip_ptr, ip_idx):
    """Push ready op ``v`` keyed by its step's effect relative to the live bytes; returns the heap size."""
    m_t, after, freed = peek_kernel(v, remaining, 0, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param,
                                    ip_ptr, ip_idx)
    i = nh
    ha[i], hb[i], hc[i], hv[i], hs[i] = after, -freed, m_t, v, stamp
    while i > 0:
        parent = (i - 1) >> 1
        if not _greedy_before(i, parent, ha, hb, hc, hv):
            break
        _greedy_swap(i, parent, ha, hb, hc, hv, hs)
        i = parent
    return nh + 1


@numba.njit(cache=True)
def greedy_kernel(n, prefix, base, pred_ptr, succ_ptr, succ_idx, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx):
    """List scheduler: run the ready op with the least memory after its step, then most
    freed bytes, then lowest M_t, then lowest id (XLA ListMemoryScheduler style).  The ops of ``prefix`` (a
    valid start of a topological order, possibly empty) run first, in its order; the rule completes it.

    Every term of that key is the live bytes plus what the op's own tensors add or free, which changes only
    when one of its inputs is left with one consumer to run (it).  So ready ops sit in a heap keyed relative to
    the live bytes, and an op is pushed again (its older entries skipped) when that happens: the same order as
    scanning every ready op each step, in O((ops + edges) log ops) instead of O(ops x ready)."""
    n_tensors = len(size)
    cons_ptr = np.zeros(n_tensors + 1, np.int64)  # consumers per tensor, from the ops' distinct inputs
    for k in range(len(in_idx)):
        cons_ptr[in_idx[k] + 1] += 1
    for t in range(n_tensors):
        cons_ptr[t + 1] += cons_ptr[t]
    cons_idx = np.empty(len(in_idx), np.int64)
    fill = cons_ptr[:-1].copy()
    for v in range(n):
        for k in range(in_ptr[v], in_ptr[v + 1]):
            t = in_idx[k]
            cons_idx[fill[t]] = v
            fill[t] += 1
    cap = n + len(in_idx) + 1
    ha = np.empty(cap, np.int64)
    hb = np.empty(cap, np.int64)
    hc = np.empty(cap, np.int64)
    hv = np.empty(cap, np.int64)
    hs = np.empty(cap, np.int64)
    stamp = np.zeros(n, np.int64)  # the op's current entry; older ones are stale
    state = np.zeros(n, np.int8)  # 0 waiting, 1 ready, 2 done
    indeg = np.empty(n, np.int64)
    ready = np.empty(n, np.int64)
    remaining = n_consumers.copy()
    nh = 0
    n_ready = init_ready(pred_ptr, indeg, ready)
    for j in range(n_ready):
        state[ready[j]] = 1
        nh = _greedy_push(ready[j], 0, remaining, nh, ha, hb, hc, hv, hs, in_ptr, in_idx, out_ptr, out_idx, size,
                          n_consumers, keep, param, ip_ptr, ip_idx)
    live = base
    order = np.empty(n, np.int64)
    for step in range(n):
        if step < len(prefix):
            v = prefix[step]
            stamp[v] += 1  # its heap entries go stale
        while step >= len(prefix):  # pop the best current entry
            v = hv[0]
            current = hs[0] == stamp[v]
            nh -= 1
            _greedy_swap(0, nh, ha, hb, hc, hv, hs)
            i = 0
            while True:
                c = 2 * i + 1
                if c >= nh:
                    break
                if c + 1 < nh and _greedy_before(c + 1, c, ha, hb, hc, hv):
                    c += 1
                if not _greedy_before(c, i, ha, hb, hc, hv):
                    break
                _greedy_swap(c, i, ha, hb, hc, hv, hs)
                i = c
            if current:
                break
        order[step] = v
        state[v] = 2
        _, live = step_kernel(v, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
        for k in range(in_ptr[v], in_ptr[v + 1]):  # an input left with one consumer: that consumer's key changed
            t = in_idx[k]
            if remaining[t] == 1:
                for e in range(cons_ptr[t], cons_ptr[t + 1]):
                    w = cons_idx[e]
                    if state[w] == 1:
                        stamp[w] += 1
                        nh = _greedy_push(w, stamp[w], remaining, nh, ha, hb, hc, hv, hs, in_ptr, in_idx, out_ptr,
                                          out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
        first = n_ready
        n_ready = release_successors(v, succ_ptr, succ_idx, indeg, ready, n_ready)
        for j in range(first, n_ready):
            w = ready[j]
            state[w] = 1
            nh = _greedy_push(w, stamp[w], remaining, nh, ha, hb, hc, hv, hs, in_ptr, in_idx, out_ptr, out_idx, size,
                              n_consumers, keep, param, ip_ptr, ip_idx)
    return order


@numba.njit(cache=True)
def random_orders_kernel(n, samples, seed, base, pred_ptr, succ_ptr, succ_idx, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx):
    """``samples`` uniformly-random-ready topological orders; return the one with the lowest peak."""
    np.random.seed(seed)
    best_order = np.empty(n, np.int64)
    best_peak = np.int64(-1)
    order = np.empty(n, np.int64)
    indeg = np.empty(n, np.int64)
    ready = np.empty(n, np.int64)
    for s in range(samples):
        n_ready = init_ready(pred_ptr, indeg, ready)
        remaining = n_consumers.copy()
        live = base
        peak = base
        for step in range(n):
            j = np.random.randint(0, n_ready)
            v = ready[j]
            ready[j] = ready[n_ready - 1]
            n_ready -= 1
            order[step] = v
            m_t, live = step_kernel(v, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, ip_ptr, ip_idx)
            if m_t > peak:
                peak = m_t
            n_ready = release_successors(v, succ_ptr, succ_idx, indeg, ready, n_ready)
        if best_peak < 0 or peak < best_peak:
            best_peak = peak
            best_order[:] = order
    return best_order, best_peak
