"""HEFT placement baseline: the makespan pass ``heft`` on the profile-derived devices.

Builds the :class:`~onnx_sched.cost.makespan.MakespanProblem` of the placement
problem's devices (one stream each, profiled op times, calibrated links) and
runs the registered makespan pass ``heft`` (upward rank, earliest finish time
with insertion); its placement is scored under the problem's latency mode.
"""

from __future__ import annotations

from dataclasses import replace

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, get_pass, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.schedule import Schedule


@register("heft-place", objective="latency")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    heft = get_pass("heft", "makespan")(graph, replace(ctx, problem=problem.makespan_problem()))
    return make_placement_schedule(problem, heft.placement, "heft-place", heft_makespan=heft.info.get("makespan"))
