"""Lower bounds on the peak of the memory model of :mod:`onnx_sched.cost.memory`, valid for every order.

When op ``v`` runs, in *any* topological order, every ancestor of ``v`` has run and no
descendant has.  So a tensor produced by an ancestor of ``v`` is still allocated if
``v`` reads it, if a descendant of ``v`` reads it, or if it is a graph output; add
``v``'s own outputs and transient bytes and the graph inputs, and no order can run
``v`` with less live memory (:func:`op_lower_bounds`).  The peak is at least the
largest of these, and at least what stays live at the end (:func:`lower_bound`).

This "must be live" bound is much stronger than counting only an op's inputs and
outputs: on irregular graphs (RandWire, transformer blocks) it often meets the
optimum, which turns a search result into a proof.  It needs the transitive closure,
built as bitsets one block of ops ``v`` at a time (:data:`BLOCK_BYTES` whatever the
graph's size, ``n (n + e) / 64`` word operations in all): on a 20,292-op layered graph
it is 18.8 GiB in 0.45 s, against 0.36 GiB for the inputs + outputs per op it replaces
(``benchmarks/large_bounds.py``).
A graph past :data:`MAX_BOUND_WORK` or :data:`MAX_BOUND_OPS` falls back to those.  The full closure
(``n^2 / 8`` bytes per direction), which the cut bound and the repair keep per graph,
is built up to :data:`MAX_CLOSURE_OPS` ops.

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
from onnx_sched.dag import kahn_order
from onnx_sched.dag_kernels import block_closure_bits, popcount
from onnx_sched.graph import Graph, TensorKind

__all__ = ["MAX_BOUND_OPS", "MAX_BOUND_WORK", "MAX_CLOSURE_OPS", "lower_bound", "op_lower_bounds"]

#: Largest graph whose full closure bitsets are built, for the cut bound and the repair (2 x 112 MB at 30,000 ops).
MAX_CLOSURE_OPS = 30_000
#: Most work (:func:`bound_work`) the must-live bound may take, and most ops; a bigger graph gets inputs + outputs
#: per op.  Here 0.8-1.6 ns a unit: a 20,292-op layered graph (313 Mi) 0.45 s, a 55,570-op random graph with
#: 2.5 million edges (4,307 Mi) 3.2 s (both under load).  The ops cap bounds what the work leaves out, adding up
#: the sizes of every (op, live tensor) pair: a 40,000-op chain whose every op writes a tensor the last one reads
#: took 1.6 s.
MAX_BOUND_WORK, MAX_BOUND_OPS = 1 << 30, 30_000
#: Bytes of the two closures restricted to one block of ops (a block is at least 64 ops).
BLOCK_BYTES = 64 << 20


@numba.njit(cache=True)
def _forced_live(topo, pred_ptr, pred_idx, succ_ptr, succ_idx, producer, cons_ptr, cons_idx, size,  # noqa: ANN001, ANN202
                 keep, block_words):
    """Per op ``v``: bytes of tensors produced by an ancestor of ``v`` and still needed when ``v`` runs.  The ops
    ``v`` go in blocks of ``64 block_words``, with the closures restricted to a block's columns."""
    n = len(topo)
    acc = np.zeros(n, dtype=np.int64)
    desc = np.zeros((n, block_words), dtype=np.uint64)
    anc = np.zeros((n, block_words), dtype=np.uint64)
    forced = np.zeros(block_words, dtype=np.uint64)
    rtopo = topo[::-1].copy()
    one = np.uint64(1)
    for lo in range(0, n, 64 * block_words):
        hi = min(n, lo + 64 * block_words)
        words = (hi - lo + 63) >> 6
        block_closure_bits(topo, succ_ptr, succ_idx, lo, hi, desc)
        block_closure_bits(rtopo, pred_ptr, pred_idx, lo, hi, anc)
        for t in range(len(producer)):
            u = producer[t]
            if u < 0 or size[t] == 0:
                continue
            if keep[t]:  # a graph output stays live after its producer, whoever reads it
                for w in range(words):
                    forced[w] = desc[u, w]
            else:  # live at v iff v is a descendant of u and a reader is v or after v
                for w in range(words):
                    forced[w] = 0
                for e in range(cons_ptr[t], cons_ptr[t + 1]):
                    c = cons_idx[e]
                    for w in range(words):
                        forced[w] |= anc[c, w]
                    if lo <= c < hi:
                        forced[(c - lo) >> 6] |= one << np.uint64((c - lo) & 63)
                for w in range(words):
                    forced[w] &= desc[u, w]
            for w in range(words):
                bits = forced[w]
                while bits:
                    low = bits & (~bits + one)
                    acc[lo + w * 64 + np.int64(popcount(low - one))] += size[t]
                    bits ^= low
    return acc


def op_lower_bounds(g: Graph, inplace: bool = False) -> np.ndarray:
    """Per op, bytes live while it runs in every order (see module docstring); int64 ``(n,)``."""
    return _op_lower_bounds_cached(g, bool(inplace))


@lru_cache(maxsize=64)
def _op_lower_bounds_cached(g: Graph, inplace: bool) -> np.ndarray:
    a = memory_arrays(g, inplace)
    n = g.n_ops
    if 0 < n <= MAX_BOUND_OPS and bound_work(g) <= MAX_BOUND_WORK:
        forced = _forced_live(kahn_order(g), g.op_preds.indptr, g.op_preds.indices, g.op_succs.indptr,
                              g.op_succs.indices, g.tensor_producer.astype(np.int64), g.tensor_consumers.indptr,
                              g.tensor_consumers.indices, a.size, a.keep, block_words(n))
    else:  # too big for the closure: an op's own inputs only (graph inputs are in ``base``)
        forced = _row_sums(a.in_ptr, np.where(a.keep, 0, a.size)[a.in_idx])
    reuse = np.zeros(n, dtype=np.int64)  # output 0 may take over a dying input of the same size
    rows = np.flatnonzero(np.diff(a.inplace_ptr) > 0)
    if len(rows):
        reuse[rows] = np.maximum.reduceat(a.size[a.inplace_idx], a.inplace_ptr[rows])
    need = a.base + forced + _row_sums(a.out_ptr, a.size[a.out_idx]) + a.param - reuse
    need.setflags(write=False)
    return need


def bound_work(g: Graph) -> int:
    """About how many word operations the must-live bound of ``g`` takes: two closure sweeps and the readers'
    rows, each ``n / 64`` words per edge."""
    return g.n_ops * (g.n_ops + len(g.op_succs.indices) + len(g.tensor_consumers.indices)) // 64


def block_words(n: int) -> int:
    """64-bit words per closure row of one block, so that two closures of ``n`` rows take :data:`BLOCK_BYTES`
    (at least one word, at most the whole row)."""
    return max(1, min((n + 63) // 64, BLOCK_BYTES // (16 * max(n, 1))))


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
