"""HEFT: heterogeneous earliest finish time (Topcuoglu, Hariri & Wu 2002).

Ops are ranked by the upward rank (mean duration over the units an op may use
plus mean transfer cost to the heaviest successor chain), taken in decreasing
rank among ops whose predecessors are placed, and each is put on the unit
(device stream or machine-type resource unit) where it finishes first, filling
idle gaps between already placed ops (insertion policy).  Needs unit resource
demands (every op holds one stream / resource unit).
"""

from __future__ import annotations

from onnx_sched.cost import makespan as ms
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._priorities import upward_rank
from onnx_sched.schedule import Schedule


@register("heft", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """HEFT with insertion; ``ValueError`` when some op demands more than one resource unit."""
    problem = ms.problem_of(graph, ctx)
    if (problem.demand != 1).any():
        raise ValueError("heft needs every op to demand one resource unit; use list-cp for larger demands")
    rank = upward_rank(problem)
    start, place, _ = ms.run_list(problem, rank, insertion=True)
    return ms.make_schedule(problem, start, place, "heft")
