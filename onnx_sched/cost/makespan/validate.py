"""Checking a timed schedule: :func:`validate` (feasibility and makespan) and :func:`make_schedule`.

Every makespan pass returns its result through :func:`make_schedule`, which
validates the start times and placement against the problem (units an op may
use, precedence plus transfer delays, resource capacity over time), orders the
ops by start time and marks the schedule optimal when it meets the lower bound.
A lower bound above the makespan is reported as a bug.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.cost.makespan.paths import lower_bound
from onnx_sched.cost.makespan.problem import MakespanProblem, _topo
from onnx_sched.schedule import Schedule

__all__ = ["make_schedule", "validate"]


def _tolerance(problem: MakespanProblem, horizon: float) -> float:
    return 1e-9 * max(1.0, abs(horizon))


def validate(problem: MakespanProblem, start: np.ndarray, placement: np.ndarray) -> float:
    """Check a timed schedule; return its makespan or raise ``ValueError`` saying what is violated.

    Checks: every op on a unit it may use, starts >= 0, precedence plus transfer
    delays, and at no time more resource use on a unit than its capacity.
    """
    g = problem.graph
    n = g.n_ops
    start = np.asarray(start, np.float64)
    place = np.asarray(placement, np.int64)
    if start.shape != (n,) or place.shape != (n,):
        raise ValueError(f"schedule has {start.shape} start times and {place.shape} placements for {n} ops")
    if n == 0:
        return 0.0
    if place.min() < 0 or place.max() >= problem.n_units:
        raise ValueError(f"placement outside [0, {problem.n_units})")
    dur = problem.durations[np.arange(n), place]
    if not np.isfinite(dur).all():
        v = int(np.flatnonzero(~np.isfinite(dur))[0])
        raise ValueError(f"op {g.op_names[v]!r} placed on {problem.device_names[place[v]]!r}, which cannot run it")
    if not np.isfinite(start).all() or start.min() < 0:
        raise ValueError("start times must be finite and >= 0")
    finish = start + dur
    makespan = float(finish.max())
    tol = _tolerance(problem, makespan)
    preds = g.op_preds
    vs = np.repeat(np.arange(n), preds.lengths())
    us = preds.indices
    pu, pv = place[us], place[vs]
    delay = np.where(pu != pv, problem.latency[pu, pv] + problem.edge_bytes * problem.inv_bandwidth[pu, pv], 0.0)
    ready = finish[us] + delay
    late = np.flatnonzero(start[vs] < ready - tol)
    if len(late):
        k = int(late[0])
        u, v = int(us[k]), int(vs[k])
        raise ValueError(
            f"op {g.op_names[v]!r} starts at {start[v]:.6g} before its input from {g.op_names[u]!r} "
            f"is ready at {ready[k]:.6g}"
        )
    for p in range(problem.n_units):
        sel = np.flatnonzero((place == p) & (dur > 0))
        if not len(sel):
            continue
        times = np.concatenate([start[sel], finish[sel]])
        delta = np.concatenate([problem.demand[sel], -problem.demand[sel]])
        # at equal times apply releases before acquisitions; treat near-equal times as equal
        order = np.lexsort((delta, np.round(times / tol) if tol > 0 else times))
        use = np.cumsum(delta[order])
        if use.max() > problem.capacity[p]:
            at = float(times[order][int(np.argmax(use))])
            raise ValueError(
                f"{problem.machines.unit_word()} {problem.device_names[p]!r} uses {int(use.max())} resource units "
                f"at time {at:.6g}, capacity {int(problem.capacity[p])}"
            )
    return makespan


def make_schedule(
    problem: MakespanProblem,
    start: np.ndarray,
    placement: np.ndarray,
    method: str,
    *,
    optimal: bool = False,
    bound: float | None = None,
    **info: Any,
) -> Schedule:
    """Validate a timed schedule and wrap it: ``order`` = ops by start time (ties in topological order)."""
    makespan = validate(problem, start, placement)
    topo_pos = np.empty(problem.n_ops, np.int64)
    topo_pos[_topo(problem)] = np.arange(problem.n_ops)
    order = np.lexsort((topo_pos, np.asarray(start)))
    lb = lower_bound(problem) if bound is None else max(float(bound), lower_bound(problem))
    tol = _tolerance(problem, makespan)
    if lb > makespan + tol:
        raise ValueError(f"{method}: lower bound {lb:.6g} exceeds makespan {makespan:.6g} (a bug)")
    meta = {"makespan": makespan, "speedup": problem.total_work() / makespan if makespan > 0 else 1.0,
            "method": method, **info}
    return Schedule(
        order=order,
        method=method,
        placement=np.asarray(placement, np.int64),
        start=np.asarray(start, np.float64),
        optimal=bool(optimal or makespan <= lb + tol),
        lower_bound=float(lb),
        info=meta,
    )
