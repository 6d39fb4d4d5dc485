"""``brkga``: BRKGA over placement + priorities, paper 003's baseline "BRKGA 5K" (section 3.2, 4.2).

Chromosome = |N| x |D| device affinities + |N| op priorities + |T| x |D| transfer
priorities, decoded by :func:`onnx_sched.cost.device_memory.decode_keys` (highest
affinity, then a priority-tie-broken topological sort of ops and transfers).
Standard BRKGA: uniform gene distributions, pi = 100, pi_e = 10, pi_c = 80,
rho = 0.7, stopping at the evaluation budget (default 5,000) or the time limit.
Options: ``evaluations``, ``population``, ``elites``, ``children``, ``elite_bias``; ``tidy`` (default 10,000):
evaluations spent afterwards on moving fewer bytes between devices at the same peak
(:func:`~onnx_sched.passes.device_memory.local_search.tidy_transfers`; not in the paper, 0 turns it off).
"""

from __future__ import annotations

from onnx_sched.brkga import BrkgaParams
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory._common import problem_of, schedule_of_keys, solve
from onnx_sched.passes.device_memory.local_search import tidy_transfers
from onnx_sched.schedule import Schedule

__all__ = ["params_from", "run", "solve"]


def params_from(ctx: PassContext, base: BrkgaParams = BrkgaParams()) -> BrkgaParams:
    """BRKGA parameters from the pass options, ``base`` (paper 003's values) where not given."""
    return base.with_options(ctx.option)


@register("brkga", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    clock = Deadline(ctx.time_limit)
    result = solve(problem, params_from(ctx), seed=ctx.seed, deadline=clock)
    keys, tidied = tidy_transfers(problem, result.best_keys, ctx, clock)
    return schedule_of_keys(problem, keys, "brkga", evaluations=result.evaluations,
                            generations=result.generations, tidy_evaluations=tidied)
