"""List scheduling with classical priorities (paper 001 section 2.2, appendix D.1).

``list-cp`` (critical path to a sink, transfers included at their mean cost),
``list-mopnr`` (most operations remaining on the longest path, ties by critical
path) and ``list-spt`` (shortest processing time first).  Machine-type problems
use the time-driven list scheduler; device problems the serial one with
earliest-finish device choice (see :mod:`onnx_sched.cost.makespan`).

Option ``device_choice``: ``earliest-finish`` (the default) or ``first-free``,
each op to the device that frees first whatever its inputs' devices -- the
list scheduling paper 002 compares its candidate samplers against (section 5:
"assigns them in that order one by one to a free device").  On a proxy
without transfer costs both finish equally early often; ``earliest-finish``
then keeps the lowest-numbered device, ``first-free`` spreads the ops.
"""

from __future__ import annotations

from onnx_sched.cost import makespan as ms
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._priorities import cp_priority, mopnr_priority, spt_priority
from onnx_sched.schedule import Schedule

PRIORITIES = {"list-cp": cp_priority, "list-mopnr": mopnr_priority, "list-spt": spt_priority}
DEVICE_CHOICES = ("earliest-finish", "first-free")


def first_free(ctx: PassContext) -> bool:
    """Whether the ``device_choice`` option asks for paper 002's first-free device choice."""
    choice = str(ctx.option("device_choice", DEVICE_CHOICES[0]))
    if choice not in DEVICE_CHOICES:
        raise ValueError(f"unknown device_choice {choice!r}; choose from {', '.join(DEVICE_CHOICES)}")
    return choice == "first-free"


def _make(name: str):  # noqa: ANN202
    def run(graph: Graph, ctx: PassContext) -> Schedule:
        problem = ms.problem_of(graph, ctx)
        return ms.list_schedule(problem, PRIORITIES[name](problem), name, first_free=first_free(ctx))

    run.__doc__ = f"List scheduling by the {name[5:].upper()} priority."
    run.__name__ = f"run_{name[5:]}"
    return register(name, objective="makespan")(run)


run_cp = _make("list-cp")
run_mopnr = _make("list-mopnr")
run_spt = _make("list-spt")
