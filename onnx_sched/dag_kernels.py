"""Numba building blocks for walking a DAG in topological order over CSR arrays.

Every list scheduler (the peak-memory greedy and random-order kernels, the
makespan list scheduler) keeps an in-degree per op and a ready array, and
releases an op's successors once it is scheduled.  These two steps live here,
once, so the schedulers differ only in how they pick the next ready op.
"""

from __future__ import annotations

import numba

__all__ = ["init_ready", "release_successors"]


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
