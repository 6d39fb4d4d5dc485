"""``xla_dfs``: XLA's DFSMemoryScheduler.

Post-order depth-first walk from the graph's sinks.  At each op the operands are
visited in order of (more extra users first, bigger total subtree bytes first, op
id), where for every op ``extra_users`` = its users minus one plus its operands'
``extra_users``, and ``total_bytes`` = its output bytes plus its operands'
``total_bytes`` (summed over the DAG as XLA does, so shared subtrees count twice;
kept as floats, which saturate at infinity on deep DAGs: a 20,000-op transformer passes 1e308, and its
saturated ops tie, then go by op id).  Visiting big, widely shared subtrees first
lets their results be consumed and freed early.  Sinks are taken in the same
priority order, as operands of a virtual root.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.dag import kahn_order
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.schedule import Schedule

__all__ = ["run", "xla_dfs_order"]


def xla_dfs_order(graph: Graph) -> np.ndarray:
    """The XLA DFS post-order schedule of ``graph``."""
    n = graph.n_ops
    preds, succs = graph.op_preds, graph.op_succs
    extra = np.zeros(n, dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    out_bytes = graph.op_output_bytes.astype(np.float64)
    with np.errstate(over="ignore"):  # deep DAGs pass the float range: those sums saturate at inf and tie
        for v in kahn_order(graph):
            p = preds.row(v)
            extra[v] = max(len(succs.row(v)) - 1, 0) + extra[p].sum()
            total[v] = out_bytes[v] + total[p].sum()

    def ranked(ops: np.ndarray) -> list[int]:
        # stable sort: more extra users, then more bytes, then lower id
        return [int(o) for o in sorted(ops.tolist(), key=lambda o: (-extra[o], -total[o], o))]

    visited = np.zeros(n, dtype=bool)
    order: list[int] = []
    sinks = np.flatnonzero(succs.lengths() == 0)
    for root in ranked(sinks):
        if visited[root]:
            continue
        visited[root] = True
        stack: list[tuple[int, list[int], int]] = [(root, ranked(preds.row(root)), 0)]
        while stack:
            v, kids, i = stack[-1]
            while i < len(kids) and visited[kids[i]]:
                i += 1
            if i == len(kids):
                stack.pop()
                order.append(v)
                continue
            stack[-1] = (v, kids, i + 1)
            c = kids[i]
            visited[c] = True
            stack.append((c, ranked(preds.row(c)), 0))
    return np.asarray(order, dtype=np.int64)


@register("xla_dfs", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return make_schedule(graph, xla_dfs_order(graph), "xla_dfs", ctx.inplace)
