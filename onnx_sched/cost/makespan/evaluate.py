"""Scoring a schedule: :func:`evaluate` gives makespan, speedup, lower bound and transfers.

``speedup = total work / makespan`` (paper 001).  A schedule without start times
(a plain order, e.g. from a peak-memory pass) is list scheduled with its order
as the priority first.  Transfers are counted once per (tensor, destination
device), as the problem's link model charges them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_sched.cost.makespan.list_kernels import run_list
from onnx_sched.cost.makespan.paths import lower_bound
from onnx_sched.cost.makespan.problem import MakespanProblem
from onnx_sched.cost.makespan.validate import validate
from onnx_sched.int_sets import unique_ints
from onnx_sched.schedule import Schedule

__all__ = ["MakespanResult", "evaluate"]


@dataclass(frozen=True, eq=False)
class MakespanResult:
    """Score of a schedule: ``speedup = total work / makespan`` (paper 001)."""

    makespan: float
    speedup: float
    lower_bound: float
    start: np.ndarray
    placement: np.ndarray
    transfer_bytes: float = 0.0
    transfers: int = 0


def _transfers(problem: MakespanProblem, placement: np.ndarray) -> tuple[float, int]:
    """Bytes and count of tensor moves, once per (tensor, destination device)."""
    if problem.n_units < 2 or not problem.has_transfers:
        return 0.0, 0
    g = problem.graph
    placement = np.asarray(placement, np.int64)
    consumer = np.repeat(np.arange(g.n_ops, dtype=np.int64), g.op_inputs.lengths())
    tensor = np.asarray(g.op_inputs.indices, np.int64)
    producer = np.asarray(g.tensor_producer, np.int64)[tensor]
    dst = placement[consumer]
    crossing = (producer >= 0) & (placement[np.maximum(producer, 0)] != dst)
    moves = unique_ints(tensor[crossing] * problem.n_units + dst[crossing])
    return float(np.asarray(g.tensor_bytes, np.float64)[moves // problem.n_units].sum()), len(moves)


def evaluate(problem: MakespanProblem, schedule: Schedule) -> MakespanResult:
    """Score ``schedule``: validated makespan, speedup, bound and transfers.

    A schedule without ``start`` times (e.g. a peak-memory order) is list
    scheduled with its order as the priority.  ``ValueError`` if it is invalid.
    """
    n = problem.n_ops
    if schedule.start is None:
        prio = np.empty(n)
        prio[np.asarray(schedule.order, np.int64)] = -np.arange(n, dtype=np.float64)
        start, place, _ = run_list(problem, prio)
    else:
        start = np.asarray(schedule.start, np.float64)
        if schedule.placement is not None:
            place = np.asarray(schedule.placement, np.int64)
        elif problem.fixed_unit is not None:
            place = problem.fixed_unit
        else:
            raise ValueError("schedule has start times but no placement, and ops may run on several devices")
    makespan = validate(problem, start, place)
    work = problem.total_work()
    tbytes, tcount = _transfers(problem, place)
    return MakespanResult(
        makespan=makespan,
        speedup=work / makespan if makespan > 0 else 1.0,
        lower_bound=lower_bound(problem),
        start=start,
        placement=place,
        transfer_bytes=tbytes,
        transfers=tcount,
    )
