"""The CP-SAT solver settings every CP-SAT pass uses (OR-Tools): a wall-clock limit, a seed, workers.

CP-SAT's presolve looks for symmetries, and on large models that search runs on for seconds past the time limit
before it notices: 4-9 s over on the placement (240,000 variables) and makespan (100,000) models of a 20,000-op
generated transformer (docs/results.md 31.6).  A model past :data:`SYMMETRY_MAX_VARIABLES` is solved without it.

Example:
    >>> solver = cp_solver(time_limit=2.0, seed=7)   # doctest: +SKIP
    >>> status = solver.Solve(model)                 # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["SYMMETRY_MAX_VARIABLES", "cp_solver"]

#: Most variables of a model whose symmetries presolve looks for (module docstring).  Measured below it: a
#: 6,000-op transformer's makespan model (30,000 variables) and placement model (72,000) stop within 0.3 s of
#: the limit; above it, the 20,000-op one's 100,000 and 240,000 do not.
SYMMETRY_MAX_VARIABLES = 80_000


def cp_solver(time_limit: float, seed: int = 0, workers: int = 1, started: float | None = None,
              model: Any = None) -> Any:
    """A ``CpSolver`` stopping after ``time_limit`` seconds (at least 10 ms), seeded, with ``workers`` threads.

    ``started`` (a :func:`time.perf_counter` reading): the limit counts from then, so a pass whose
    ``time_limit`` covers building its model passes the time it started building.  ``model`` (the ``CpModel`` to
    solve): past :data:`SYMMETRY_MAX_VARIABLES` variables, presolve does not look for symmetries."""
    from ortools.sat.python import cp_model

    spent = 0.0 if started is None else time.perf_counter() - started
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(float(time_limit) - spent, 0.01)
    solver.parameters.num_workers = max(1, int(workers))
    solver.parameters.random_seed = int(seed) % (2**31)
    if model is not None and len(model.proto.variables) > SYMMETRY_MAX_VARIABLES:
        solver.parameters.symmetry_level = 0
    return solver
