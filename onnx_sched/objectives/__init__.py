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


#: The command-line flag of each :class:`ProblemOptions` field (error messages name both).
FLAGS = {"machines": "--machines", "profiles": "--profiles", "devices": "--devices", "latency_mode": "--latency-mode",
         "memory_limits": "--memory-limit"}


def resolve_objective(name: str, options: ProblemOptions) -> Objective:
    """The objective that handles ``name`` with these options: ``peak-mem`` over two or more
    ``devices`` is ``peak-mem-devices`` (:meth:`Objective.for_options`).  An option the objective
    does not read (:attr:`Objective.reads`) is a ``ValueError`` naming the objectives that read it.

    >>> resolve_objective("peak-mem", ProblemOptions(machines="m.json"))
    Traceback (most recent call last):
    ...
    ValueError: machines (--machines) does not apply to objective 'peak-mem'; it is read by makespan
    """
    objective = get_objective(get_objective(name).for_options(options))
    for option in options.given():
        if option not in objective.reads:
            users = [o for o in OBJECTIVES if option in get_objective(o).reads]
            raise ValueError(f"{option} ({FLAGS.get(option, option)}) does not apply to objective {name!r}; it is "
                             f"read by {', '.join(users)}")
    return objective


def build_problem(objective: str, graph: Graph, **options: Any) -> Any:
    """``resolve_objective(objective, opts).build_problem(graph, opts)`` with ``opts = ProblemOptions(**options)``."""
    opts = ProblemOptions(**options)
    return resolve_objective(objective, opts).build_problem(graph, opts)
