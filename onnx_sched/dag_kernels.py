"""Numba building blocks for walking a DAG in topological order over CSR arrays.

Every list scheduler (the peak-memory greedy and random-order kernels, the
makespan list scheduler) keeps an in-degree per op and a ready array, and
releases an op's successors once it is scheduled.  These two steps live here,
once, so the schedulers differ only in how they pick the next ready op.
:func:`heap_push` / :func:`heap_pop` are the binary min-heap of the kernels that
pick the ready op of best priority or the earliest event.  :func:`closure_bits` is the transitive closure as bitsets, which the learned
encoders' attention masks and the min-cut memory bounds use (:func:`block_closure_bits` one block of its columns,
for the must-live bound at any size); :func:`popcount` serves every bitset walk.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["block_closure_bits", "closure_bits", "heap_pop", "heap_push", "init_ready", "kahn_kernel", "popcount",
           "release_successors"]

_ONE = np.uint64(1)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@numba.njit(cache=True, inline="always")
def popcount(x):  # noqa: ANN001, ANN201
    """Set bits of a uint64; ``popcount(low - 1)`` is the index of the lowest set bit ``low``."""
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@numba.njit(cache=True)
def heap_push(hf, hv, nh, f, v):  # noqa: ANN001, ANN201
    """Push item ``v`` with key ``f`` on the min-heap ``hf``/``hv`` of ``nh`` items; returns the new size.

    Ties pop the smaller ``v`` first, so every kernel built on it is deterministic.
    """
    i = nh
    hf[i] = f
    hv[i] = v
    while i > 0:
        parent = (i - 1) >> 1
        if hf[parent] > hf[i] or (hf[parent] == hf[i] and hv[parent] > hv[i]):
            hf[parent], hf[i] = hf[i], hf[parent]
            hv[parent], hv[i] = hv[i], hv[parent]
            i = parent
        else:
            break
    return nh + 1


@numba.njit(cache=True)
def heap_pop(hf, hv, nh):  # noqa: ANN001, ANN201
    """Pop the item with the smallest (key, item); returns (item, new size)."""
    v = hv[0]
    nh -= 1
    hf[0] = hf[nh]
    hv[0] = hv[nh]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= nh:
            break
        c = left
        right = left + 1
        if right < nh and (hf[right] < hf[left] or (hf[right] == hf[left] and hv[right] < hv[left])):
            c = right
        if hf[c] < hf[i] or (hf[c] == hf[i] and hv[c] < hv[i]):
            hf[c], hf[i] = hf[i], hf[c]
            hv[c], hv[i] = hv[i], hv[c]
            i = c
        else:
            break
    return v, nh


@numba.njit(cache=True)
def kahn_kernel(key, indeg, succ_ptr, succ_idx):  # noqa: ANN001, ANN201
    """Kahn's algorithm taking the ready op of smallest ``(key, id)``; ``indeg`` (int64, consumed) is each op's
    number of predecessors.  Returns ``(order, count)``: fewer than ``len(key)`` ops when there is a cycle."""
    n = len(key)
    hf = np.empty(n, np.float64)
    hv = np.empty(n, np.int64)
    nh = 0
    for v in range(n):
        if indeg[v] == 0:
            nh = heap_push(hf, hv, nh, key[v], v)
    order = np.empty(n, np.int64)
    k = 0
    while nh:
        u, nh = heap_pop(hf, hv, nh)
        order[k] = u
        k += 1
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                nh = heap_push(hf, hv, nh, key[v], v)
    return order, k


@numba.njit(cache=True)
def init_ready(pred_ptr, indeg, ready):  # noqa: ANN001, ANN201
    """Fill ``indeg`` with in-degrees and ``ready`` with the sources; returns how many are ready."""
    n_ready = 0
    for v in range(len(indeg)):
        indeg[v] = pred_ptr[v + 1] - pred_ptr[v]
        if indeg[v] == 0:
            ready[n_ready] = v
            n_ready += 1
    return n_ready


@numba.njit(cache=True)
def release_successors(v, succ_ptr, succ_idx, indeg, ready, n_ready):  # noqa: ANN001, ANN201
    """Op ``v`` is done: decrement its successors' in-degrees and append those that become
    ready to ``ready[n_ready:]``; returns the new ready count."""
    for k in range(succ_ptr[v], succ_ptr[v + 1]):
        w = succ_idx[k]
        indeg[w] -= 1
        if indeg[w] == 0:
            ready[n_ready] = w
            n_ready += 1
    return n_ready


@numba.njit(cache=True)
def closure_bits(topo, succ_ptr, succ_idx, n_words):  # noqa: ANN001, ANN201
    """Row ``u``: bitset of the ops reachable from ``u`` along ``succ`` (strictly), ``topo`` a topological
    order of that direction."""
    reach = np.zeros((len(topo), n_words), dtype=np.uint64)
    block_closure_bits(topo, succ_ptr, succ_idx, 0, len(topo), reach)
    return reach


@numba.njit(cache=True)
def block_closure_bits(topo, succ_ptr, succ_idx, lo, hi, reach):  # noqa: ANN001, ANN201
    """Row ``u`` of ``reach`` (overwritten): the ops of ``[lo, hi)`` reachable from ``u`` along ``succ``
    (strictly), as bits counted from ``lo`` (a multiple of 64); ``topo`` a topological order of that direction.
    One block of columns of :func:`closure_bits`, for a closure too big to hold whole."""
    one = np.uint64(1)
    words = (hi - lo + 63) >> 6
    for k in range(len(topo) - 1, -1, -1):
        u = topo[k]
        for w in range(words):
            reach[u, w] = 0
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            for w in range(words):
                reach[u, w] |= reach[v, w]
            if lo <= v < hi:
                reach[u, (v - lo) >> 6] |= one << np.uint64((v - lo) & 63)
