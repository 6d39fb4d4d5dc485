"""``dfs``: depth-first topological order ("depth-first seq." baseline of paper 000).

Kahn's algorithm with a LIFO ready stack: after an op runs, its newly ready
successors run first, so a branch is finished (and its tensors freed) before the
next one starts.  Ties go to the lower op id.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.schedule import Schedule

__all__ = ["dfs_order", "run"]


def dfs_order(graph: Graph) -> np.ndarray:
    """Depth-first topological order (ready stack, lowest id popped first)."""
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


@register("dfs", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return make_schedule(graph, dfs_order(graph), "dfs", ctx.inplace)
