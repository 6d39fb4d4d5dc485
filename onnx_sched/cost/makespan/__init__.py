"""Makespan cost model (paper 001 section 2): problem data, list scheduling, validation, evaluation, bounds.

One module per job; this package re-exports their public functions, so
``from onnx_sched.cost import makespan as ms`` then ``ms.evaluate(...)``,
``ms.MakespanProblem`` or ``ms.list_schedule(...)`` is how callers use it.

* :mod:`~onnx_sched.cost.makespan.problem`: :class:`MakespanProblem` (durations
  per op and unit, demands, capacities, transfer links) and how it is built
  (:func:`makespan_problem`, :func:`problem_from_attrs`, :func:`problem_of`);
* :mod:`~onnx_sched.cost.makespan.list_kernels`: list scheduling by a priority,
  time-driven for machine types and serial earliest-finish for devices (numba
  kernels; :func:`run_list`, :func:`list_makespans`, :func:`list_schedule`);
* :mod:`~onnx_sched.cost.makespan.paths`: critical-path kernels, HEFT's upward
  rank and :func:`lower_bound`;
* :mod:`~onnx_sched.cost.makespan.validate`: :func:`validate` and
  :func:`make_schedule` (every pass's result goes through them);
* :mod:`~onnx_sched.cost.makespan.evaluate`: :func:`evaluate` and
  :class:`MakespanResult` (makespan, speedup, bound, transfers).

Priority heuristics (CP, MOPNR, SPT, Gumbel sampling) are the passes' business:
``onnx_sched.passes.makespan._priorities``.  Duration files are read by
:mod:`onnx_sched.profiling.durations`.  Submodules import each other directly,
never this ``__init__``, so the package has no import cycle.
"""

from __future__ import annotations

from onnx_sched.cost.makespan.evaluate import MakespanResult, evaluate
from onnx_sched.cost.makespan.list_kernels import list_makespans, list_schedule, run_list
from onnx_sched.cost.makespan.paths import lower_bound
from onnx_sched.cost.makespan.problem import MakespanProblem, makespan_problem, problem_from_attrs, problem_of
from onnx_sched.cost.makespan.validate import make_schedule, validate

__all__ = [
    "MakespanProblem",
    "MakespanResult",
    "evaluate",
    "list_makespans",
    "list_schedule",
    "lower_bound",
    "make_schedule",
    "makespan_problem",
    "problem_from_attrs",
    "problem_of",
    "run_list",
    "validate",
]
