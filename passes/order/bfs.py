"""``bfs``: Kahn's algorithm level by level (breadth-first).

Ops run in order of their level (longest path from a source), ties by op id.
Breadth-first orders keep many branches alive at once, so this is the usual
worst-case-ish baseline of paper 000.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.dag import kahn_order, longest_path_from_source
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.schedule import Schedule


def bfs_order(graph: Graph) -> np.ndarray:
    """Topological order by level, then op id."""
    n = graph.n_ops
    level = longest_path_from_source(graph)
    return kahn_order(graph, priority=level * (n + 1) + np.arange(n))


@register("bfs", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return make_schedule(graph, bfs_order(graph), "bfs", ctx.inplace)
