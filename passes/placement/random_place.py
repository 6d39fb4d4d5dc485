"""Random placement baseline: every op on a uniformly random device it can run on (seeded)."""

from __future__ import annotations

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.schedule import Schedule


@register("random-place", objective="latency")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    rng = ctx.rng()
    allowed = np.isfinite(problem.op_time)
    p = np.array([rng.choice(np.flatnonzero(row)) for row in allowed], np.int64)
    return make_placement_schedule(problem, p, "random-place", seed=ctx.seed)
