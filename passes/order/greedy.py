"""``greedy``: memory-aware list scheduler (XLA's ListMemoryScheduler idea).

Among ready ops run the one that leaves the least memory live after its step
(bytes allocated minus bytes freed), ties broken by more bytes freed, then the
lower step peak ``M_t``, then the lower op id.  The memory model is the one of
:mod:`onnx_sched.cost.memory` (``ctx.inplace`` honoured); the loop is a numba
kernel.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.passes.order._list_kernels import greedy_kernel, list_args
from onnx_sched.schedule import Schedule

__all__ = ["greedy_order", "run"]


def greedy_order(graph: Graph, inplace: bool, prefix: np.ndarray | None = None) -> np.ndarray:
    """The greedy list-scheduling order; with ``prefix`` (a valid start of a topological order) the order that
    runs those ops first and lets the rule complete it."""
    start = np.zeros(0, np.int64) if prefix is None else np.ascontiguousarray(prefix, dtype=np.int64)
    return greedy_kernel(graph.n_ops, start, *list_args(graph, inplace))


@register("greedy", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return make_schedule(graph, greedy_order(graph, ctx.inplace), "greedy", ctx.inplace)
