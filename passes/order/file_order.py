"""``file``: the order the importer gave, ops ``0..n-1`` (file order for ONNX models).

The reference every other peak-memory pass is compared against, and what
``auto`` falls back to when nothing beats it.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.schedule import Schedule


@register("file", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """Identity order; ``ValueError`` if the graph's ops are not stored in a topological order."""
    return make_schedule(graph, np.arange(graph.n_ops, dtype=np.int64), "file", ctx.inplace)
