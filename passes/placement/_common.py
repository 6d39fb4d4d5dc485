"""Shared helpers of the placement passes (objective ``latency``).

Every placement pass gets a :class:`~onnx_sched.cost.latency.PlacementProblem`
through ``ctx.problem`` and returns ``Schedule(order, placement=device per op)``
with ``info`` holding the predicted latency, the latency mode and whether the
device profiles were simulated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.dag import kahn_order
from onnx_sched.graph import Graph
from onnx_sched.schedule import Schedule

__all__ = ["make_placement_schedule", "problem_of"]


def problem_of(graph: Graph, ctx: Any) -> lat.PlacementProblem:
    """The :class:`PlacementProblem` in ``ctx.problem``, checked against ``graph``."""
    problem = getattr(ctx, "problem", None)
    if problem is None:
        raise ValueError("placement passes need devices and profiles: PassContext(problem=placement_problem(...))")
    if not isinstance(problem, lat.PlacementProblem):
        raise ValueError(f"ctx.problem is a {type(problem).__name__}, expected a PlacementProblem (objective latency)")
    if problem.graph.n_ops != graph.n_ops:
        raise ValueError(f"ctx.problem has {problem.graph.n_ops} ops, the graph {graph.n_ops}")
    return problem


def make_placement_schedule(problem: lat.PlacementProblem, placement: np.ndarray, method: str, *,
                            optimal: bool = False, order: np.ndarray | None = None, **info: Any) -> Schedule:
    """Wrap a placement: order = ``order`` or Kahn order; ``info`` gets latency, mode, simulated."""
    p = np.asarray(placement, np.int64)
    value = lat.evaluate(problem, p)
    meta = {"latency": value, "mode": problem.mode, "simulated": problem.simulated,
            "devices": list(problem.device_names), **info}
    return Schedule(order=kahn_order(problem.graph) if order is None else order, method=method, placement=p,
                    optimal=optimal, info=meta)
