"""Lower bounds on the peak of the memory model of :mod:`onnx_sched.cost.memory`, valid for every order.

When op ``v`` runs, in *any* topological order, every ancestor of ``v`` has run and no
descendant has.  So a tensor produced by an ancestor of ``v`` is still allocated if
``v`` reads it, if a descendant of ``v`` reads it, or if it is a graph output; add
``v``'s own outputs and transient bytes and the graph inputs, and no order can run
``v`` with less live memory (:func:`op_lower_bounds`).  The peak is at least the
largest of these, and at least what stays live at the end (:func:`lower_bound`).

This "must be live" bound is much stronger than counting only an op's inputs and
outputs: on irregular graphs (RandWire, transformer blocks) it often meets the
optimum, which turns a search result into a proof.  It needs the transitive closure
as bitsets (``n^2 / 8`` bytes per direction); beyond :data:`MAX_CLOSURE_OPS` ops it
falls back to inputs + outputs per op.

Example:
    >>> from onnx_sched.graph import Graph
    >>> # 0 -> {1, 2} -> 3: while 1 runs, 0's output is live (2 still reads it)
    >>> g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[8, 1, 1, 1])
    >>> op_lower_bounds(g).tolist()
    [8, 9, 9, 3]
    >>> lower_bound(g)
    9
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from onnx_sched.cost.memory import memory_arrays
from onnx_sched.dag import reachability
from onnx_sched.dag_kernels import popcount
from onnx_sched.graph import Graph, TensorKind

__all__ = ["MAX_CLOSURE_OPS", "lower_bound", "op_lower_bounds"]

#: Largest graph whose closure bitsets are built (2 x 12 MB at 10,000 ops).
MAX_CLOSURE_OPS = 10_000


@numba.njit(cache=True)
def _forced_live(desc, anc, producer, cons_ptr, cons_idx, size, keep):  # noqa: ANN001, ANN202
    """Per op ``v``: bytes of tensors produced by an ancestor of ``v`` and still needed when ``v`` runs."""
    n, n_words = desc.shape
    acc = np.zeros(n, dtype=np.int64)
    forced = np.zeros(n_words, dtype=np.uint64)
    one = np.uint64(1)
    for t in range(len(producer)):
        u = producer[t]
        if u < 0 or size[t] == 0:
            continue
        if keep[t]:  # a graph output stays live after its producer, whoever reads it
            for w in range(n_words):
                forced[w] = desc[u, w]
        else:  # live at v iff v is a descendant of u and a reader is v or after v
            for w in range(n_words):
                forced[w] = 0
            for e in range(cons_ptr[t], cons_ptr[t + 1]):
                c = cons_idx[e]
                for w in range(n_words):
                    forced[w] |= anc[c, w]
                forced[c >> 6] |= one << np.uint64(c & 63)
            for w in range(n_words):
                forced[w] &= desc[u, w]
        for w in range(n_words):
            bits = forced[w]
            while bits:
                low = bits & (~bits + one)
                acc[w * 64 + np.int64(popcount(low - one))] += size[t]
                bits ^= low
    return acc


def op_lower_bounds(g: Graph, inplace: bool = False) -> np.ndarray:
    """Per op, bytes live while it runs in every order (see module docstring); int64 ``(n,)``."""
    return _op_lower_bounds_cached(g, bool(inplace))


@lru_cache(maxsize=64)
def _op_lower_bounds_cached(g: Graph, inplace: bool) -> np.ndarray:
    a = memory_arrays(g, inplace)
    n = g.n_ops
    if 0 < n <= MAX_CLOSURE_OPS:
        cons = g.tensor_consumers
        forced = _forced_live(reachability(g), reachability(g, reverse=True), g.tensor_producer.astype(np.int64),
                              cons.indptr.astype(np.int64), cons.indices.astype(np.int64), a.size, a.keep)
    else:  # too big for the closure: an op's own inputs only (graph inputs are in ``base``)
        forced = _row_sums(a.in_ptr, np.where(a.keep, 0, a.size)[a.in_idx])
    reuse = np.zeros(n, dtype=np.int64)  # output 0 may take over a dying input of the same size
    rows = np.flatnonzero(np.diff(a.inplace_ptr) > 0)
    if len(rows):
        reuse[rows] = np.maximum.reduceat(a.size[a.inplace_idx], a.inplace_ptr[rows])
    need = a.base + forced + _row_sums(a.out_ptr, a.size[a.out_idx]) + a.param - reuse
    need.setflags(write=False)
    return need


def _row_sums(ptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per CSR row, the sum of ``values`` (empty rows: 0)."""
    total = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    return total[ptr[1:]] - total[ptr[:-1]]


def lower_bound(g: Graph, inplace: bool = False) -> int:
    """A peak no order beats: the largest per-op bound, and everything live at the end."""
    a = memory_arrays(g, inplace)
    at_end = a.base + int(a.size[g.tensor_kind == TensorKind.OUTPUT].sum())
    per_op = op_lower_bounds(g, inplace)
    return max(at_end, int(per_op.max()) if len(per_op) else 0)
