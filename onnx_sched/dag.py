"""Plain functions over a :class:`~onnx_sched.graph.Graph` viewed as a DAG of ops.

Example:
    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[1, 1, 1, 1])
    >>> kahn_order(g).tolist()
    [0, 1, 2, 3]
    >>> is_topological_order(g, [0, 2, 1, 3]), is_topological_order(g, [1, 0, 2, 3])
    (True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from onnx_sched.dag_kernels import closure_bits, kahn_kernel

if TYPE_CHECKING:  # annotations only: graph.py uses these functions, so dag.py must not import it
    from onnx_sched.graph import Graph

__all__ = [
    "CycleError",
    "check_acyclic",
    "check_order",
    "dfs_order",
    "is_topological_order",
    "kahn_order",
    "largest_frontier",
    "longest_path_to_sink",
    "longest_path_from_source",
    "reachability",
]


class CycleError(ValueError):
    """The graph has a dependency cycle."""


def in_degrees(g: Graph) -> np.ndarray:
    return g.op_preds.lengths().astype(np.int64)


def kahn_order(g: Graph, priority: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
    """Kahn's algorithm: among ready ops take the smallest ``priority`` (default: op id).

    Raises :class:`CycleError` naming an op on a cycle when the graph is not a DAG.
    """
    n = g.n_ops
    key = np.arange(n, dtype=np.float64) if priority is None else np.asarray(priority, dtype=np.float64)
    if key.shape != (n,):
        raise ValueError(f"priority must have one value per op ({n}), got shape {key.shape}")
    indeg = in_degrees(g)
    order, k = kahn_kernel(np.ascontiguousarray(key), indeg, np.ascontiguousarray(g.op_succs.indptr, np.int64),
                           np.ascontiguousarray(g.op_succs.indices, np.int64))
    if k != n:
        stuck = int(np.flatnonzero(indeg > 0)[0])
        raise CycleError(f"graph {g.name!r} has a cycle through op {g.op_names[stuck]!r} ({n - k} ops unreachable)")
    return order


def dfs_order(graph: Graph) -> np.ndarray:
    """Depth-first topological order: a LIFO ready stack, so a branch finishes (and its
    tensors die) before the next starts; ties go to the lower op id (paper 000's DFS)."""
    n = graph.n_ops
    indeg = graph.op_preds.lengths().astype(np.int64)
    succ_ptr, succ_idx = graph.op_succs.indptr, graph.op_succs.indices
    stack = [int(v) for v in np.flatnonzero(indeg == 0)[::-1]]
    order = np.empty(n, dtype=np.int64)
    k = 0
    while stack:
        u = stack.pop()
        order[k] = u
        k += 1
        newly = [int(v) for v in succ_idx[succ_ptr[u] : succ_ptr[u + 1]] if _dec(indeg, v)]
        stack.extend(reversed(newly))
    if k != n:
        raise ValueError(f"graph {graph.name!r} has a cycle ({n - k} ops never ready)")
    return order


def _dec(indeg: np.ndarray, v: int) -> bool:
    indeg[v] -= 1
    return bool(indeg[v] == 0)


def check_acyclic(g: Graph) -> None:
    """Raise :class:`CycleError` if ``g`` has a cycle."""
    kahn_order(g)


def is_topological_order(g: Graph, order: Sequence[int] | np.ndarray) -> bool:
    """True when ``order`` lists every op once and every op after its predecessors."""
    order = np.asarray(order, dtype=np.int64)
    if len(order) != g.n_ops or (g.n_ops and (order.min() < 0 or order.max() >= g.n_ops)):
        return False
    pos = np.full(g.n_ops, -1, dtype=np.int64)
    pos[order] = np.arange(g.n_ops)
    if (pos < 0).any():
        return False
    e = g.edges
    return bool((pos[e[:, 0]] < pos[e[:, 1]]).all()) if len(e) else True


def check_order(g: Graph, order: Sequence[int] | np.ndarray) -> np.ndarray:
    """Return ``order`` as an int64 array or raise ``ValueError`` saying what is wrong."""
    arr = np.asarray(order, dtype=np.int64)
    if not is_topological_order(g, arr):
        if len(arr) != g.n_ops or len(np.unique(arr)) != g.n_ops:
            raise ValueError(f"order has {len(arr)} entries ({len(np.unique(arr))} distinct), graph has {g.n_ops} ops")
        pos = np.empty(g.n_ops, dtype=np.int64)
        pos[arr] = np.arange(g.n_ops)
        bad = next((u, v) for u, v in g.edges.tolist() if pos[u] >= pos[v])
        raise ValueError(f"order runs {g.op_names[bad[1]]!r} before its input producer {g.op_names[bad[0]]!r}")
    return arr


def largest_frontier(g: Graph, order: Sequence[int] | np.ndarray) -> int:
    """The most ops ready at once (every predecessor run, itself not yet) at any step of ``order``.

    A search that expands every ready op of a state makes about this many children per state.

    Example:
        >>> from onnx_sched.graph import Graph
        >>> g = Graph.from_edges(4, [(0, 1), (0, 2), (0, 3)], output_bytes=[1, 1, 1, 1])
        >>> largest_frontier(g, [0, 1, 2, 3])  # after op 0, ops 1, 2 and 3 are ready
        3
    """
    n = g.n_ops
    if n == 0:
        return 0
    pos = np.empty(n, dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(n)
    ready_at = np.zeros(n, dtype=np.int64)  # the step after its last predecessor runs
    edges = g.edges
    if len(edges):
        np.maximum.at(ready_at, edges[:, 1], pos[edges[:, 0]] + 1)
    delta = np.zeros(n + 1, dtype=np.int64)  # ready from step ready_at through the step that runs it
    np.add.at(delta, ready_at, 1)
    np.add.at(delta, pos + 1, -1)
    return int(np.cumsum(delta)[:n].max())


def longest_path_to_sink(g: Graph, weight: np.ndarray | None = None) -> np.ndarray:
    """Per op: the heaviest path from the op to a sink, op itself included (unit weights by default)."""
    w = np.ones(g.n_ops) if weight is None else np.asarray(weight, dtype=np.float64)
    out = w.astype(np.float64).copy()
    for u in kahn_order(g)[::-1]:
        s = g.succs(u)
        if len(s):
            out[u] = w[u] + out[s].max()
    return out


def longest_path_from_source(g: Graph, weight: np.ndarray | None = None) -> np.ndarray:
    """Per op: the heaviest path from a source to the op, op itself included."""
    w = np.ones(g.n_ops) if weight is None else np.asarray(weight, dtype=np.float64)
    out = w.astype(np.float64).copy()
    for u in kahn_order(g):
        p = g.preds(u)
        if len(p):
            out[u] = w[u] + out[p].max()
    return out


def reachability(g: Graph, reverse: bool = False) -> np.ndarray:
    """``(n, ceil(n/64))`` uint64 bitsets: bit ``v`` of row ``u`` is set iff there is a path ``u -> v``
    (descendants; with ``reverse``, a path ``v -> u``: ancestors).  Irreflexive.

    Example:
        >>> from onnx_sched.graph import Graph
        >>> g = Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[1, 1, 1])
        >>> [int(row[0]) for row in reachability(g)], [int(row[0]) for row in reachability(g, reverse=True)]
        ([6, 4, 0], [0, 1, 3])
    """
    n_words = max(1, (g.n_ops + 63) // 64)
    topo = kahn_order(g)
    if reverse:
        return closure_bits(topo[::-1].copy(), g.op_preds.indptr, g.op_preds.indices, n_words)
    return closure_bits(topo, g.op_succs.indptr, g.op_succs.indices, n_words)
