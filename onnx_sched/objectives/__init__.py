"""Objectives: what a schedule is scored by, one module each.

An objective (:class:`~onnx_sched.objectives.objective.Objective`) builds its problem
from a Graph and the user's options, scores a Schedule, names the baseline a result
must never be worse than, and writes the report rows, the model metadata and the plot.
``api.optimize_model``, ``api.schedule_graph`` and the CLI only talk to this interface.

Adding an objective = one module here defining ``OBJECTIVE`` + one line in
:data:`REGISTRY` + its passes in ``passes/<folder>/`` registered under its name.

Example:
    >>> from onnx_sched.objectives import OBJECTIVES, get_objective
    >>> OBJECTIVES
    ('peak-mem', 'makespan', 'latency', 'peak-mem-devices')
    >>> get_objective("makespan").name
    'makespan'
"""

from __future__ import annotations

import importlib
from typing import Any

from onnx_sched.graph import Graph
from onnx_sched.objectives.objective import Objective, ProblemOptions

__all__ = ["OBJECTIVES", "REGISTRY", "Objective", "ProblemOptions", "build_problem", "get_objective",
           "resolve_objective"]

#: Objective name -> module that defines its ``OBJECTIVE``.  The order is the order users see.
REGISTRY: dict[str, str] = {
    "peak-mem": "onnx_sched.objectives.peak_mem",
    "makespan": "onnx_sched.objectives.makespan",
    "latency": "onnx_sched.objectives.latency",
    "peak-mem-devices": "onnx_sched.objectives.peak_mem_devices",
}
OBJECTIVES: tuple[str, ...] = tuple(REGISTRY)


def get_objective(name: str) -> Objective:
    """The objective registered as ``name``; ``ValueError`` lists the choices."""
    try:
        module = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; choose from {', '.join(OBJECTIVES)}") from None
    return importlib.import_module(module).OBJECTIVE


def resolve_objective(name: str, options: ProblemOptions) -> Objective:
    """The objective that handles ``name`` with these options: ``peak-mem`` over two or more
    ``devices`` is ``peak-mem-devices`` (:meth:`Objective.for_options`)."""
    return get_objective(get_objective(name).for_options(options))


def build_problem(objective: str, graph: Graph, **options: Any) -> Any:
    """``resolve_objective(objective, opts).build_problem(graph, opts)`` with ``opts = ProblemOptions(**options)``."""
    opts = ProblemOptions(**options)
    return resolve_objective(objective, opts).build_problem(graph, opts)
