"""Exact sequential-latency placement: s-t min-cut (2 devices) or CP-SAT (any number).

For two devices the min-cut (numba Dinic, :func:`onnx_sched.flow.min_cut`) is the proven optimum of
the sequential latency model (:func:`onnx_sched.passes.placement._optimal.mincut_placement`).
With more devices ``mincut`` runs CP-SAT within ``ctx.time_limit``, hinted with
the best single-device placement, and reports whether optimality was proven (when
the model alone would take longer to build than the time limit, the hint is the
result and ``info["cpsat_status"]`` says why).
Under the ``concurrent`` mode the result is the sequential optimum, scored
concurrently (not proven optimal there).
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.passes.placement._optimal import cpsat_build_seconds, cpsat_placement, mincut_placement
from onnx_sched.passes.placement.single import single_device
from onnx_sched.schedule import Schedule


def _best_single(problem) -> np.ndarray:  # noqa: ANN001
    cands = [single_device(problem, d) for d in range(problem.n_devices)]
    return min(cands, key=lambda p: lat.sequential_latency(problem, p))


@register("cpsat-place", objective="latency")
def cpsat(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    hint = _best_single(problem)
    if cpsat_build_seconds(problem) > ctx.time_limit:  # the model alone would not be built in time: the hint
        return make_placement_schedule(problem, hint, "cpsat-place", cpsat_status=(
            f"not built: its model would take about {cpsat_build_seconds(problem):.0f} s to build and load, more "
            f"than the {ctx.time_limit:.1f} s time limit; the best single device"))
    p, value, optimal = cpsat_placement(problem, ctx.time_limit, hint=hint, seed=ctx.seed)
    seq_opt = optimal and problem.mode == "sequential"
    return make_placement_schedule(problem, p, "cpsat-place", optimal=seq_opt, sequential_latency=value,
                                   proven_sequential_optimum=optimal)


@register("mincut", objective="latency")
def mincut(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    if problem.n_devices == 1:
        return make_placement_schedule(problem, np.zeros(graph.n_ops, np.int64), "mincut", optimal=True)
    if problem.n_devices > 2:
        return cpsat(graph, ctx).with_(method="mincut")
    p, value = mincut_placement(problem)
    return make_placement_schedule(problem, p, "mincut", optimal=problem.mode == "sequential",
                                   sequential_latency=value, proven_sequential_optimum=True)
