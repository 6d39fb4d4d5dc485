"""``dfs``: depth-first topological order ("depth-first seq." baseline of paper 000).

Kahn's algorithm with a LIFO ready stack: after an op runs, its newly ready
successors run first, so a branch is finished (and its tensors freed) before the
next one starts.  Ties go to the lower op id.
"""

from __future__ import annotations

from onnx_sched.dag import dfs_order
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.schedule import Schedule

__all__ = ["dfs_order", "run"]


@register("dfs", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return make_schedule(graph, dfs_order(graph), "dfs", ctx.inplace)
