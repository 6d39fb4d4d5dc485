"""``auto``: the multi-device memory portfolio within the time limit.

All ops on the host in input order (what a result must beat), the partition +
DFS solutions, then BRKGA seeded with them (known good solutions in the first
population, paper 003 section 3.2) for most of the time, and hill climbing from
BRKGA's best for the rest.  Options: ``evaluations`` caps BRKGA (default: no cap,
the time limit stops it).
"""

from __future__ import annotations

import numpy as np

from onnx_sched.brkga import BrkgaParams
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory import brkga as brkga_pass
from onnx_sched.passes.device_memory._common import problem_of, schedule_of_keys
from onnx_sched.passes.device_memory.local_search import climb, start_keys
from onnx_sched.schedule import Schedule

#: Share of the time limit BRKGA gets; hill climbing polishes in the rest.
BRKGA_SHARE = 0.8


@register("auto", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    clock = Deadline(ctx.time_limit)
    seeds = start_keys(problem, ctx.seed)
    params = brkga_pass.params_from(ctx, BrkgaParams(evaluations=int(ctx.option("evaluations", 10**9))))
    result = brkga_pass.solve(problem, params, seed=ctx.seed, initial=seeds,
                              deadline=Deadline(max(clock.left(), 0.0) * BRKGA_SHARE))
    keys, _, climbed = climb(problem, result.best_keys, 10**9, 50, np.random.default_rng(ctx.seed), clock)
    return schedule_of_keys(problem, keys, "auto", evaluations=result.evaluations + climbed,
                            brkga_generations=result.generations)
