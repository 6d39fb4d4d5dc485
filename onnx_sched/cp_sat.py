"""The CP-SAT solver settings every CP-SAT pass uses (OR-Tools): a wall-clock limit, a seed, workers.

Example:
    >>> solver = cp_solver(time_limit=2.0, seed=7)   # doctest: +SKIP
    >>> status = solver.Solve(model)                 # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["cp_solver"]


def cp_solver(time_limit: float, seed: int = 0, workers: int = 1, started: float | None = None) -> Any:
    """A ``CpSolver`` stopping after ``time_limit`` seconds (at least 10 ms), seeded, with ``workers`` threads.

    ``started`` (a :func:`time.perf_counter` reading): the limit counts from then, so a pass whose
    ``time_limit`` covers building its model passes the time it started building."""
    from ortools.sat.python import cp_model

    spent = 0.0 if started is None else time.perf_counter() - started
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(float(time_limit) - spent, 0.01)
    solver.parameters.num_workers = max(1, int(workers))
    solver.parameters.random_seed = int(seed) % (2**31)
    return solver
