"""CP-SAT makespan model (paper 001 appendix D.2) with a list-scheduling hint and a time limit.

Machine types: one fixed-size interval per op, a cumulative constraint per
machine type (capacity, demands) and precedence ``start_v >= end_u``.  Devices:
one optional interval per (op, device it may use) with exactly one present, a
cumulative (or no-overlap) constraint per device, and transfer delays
``start_v >= end_u + c(u, v, p, q)`` enforced when ``u`` is on ``p`` and ``v``
on ``q``.  The objective is the makespan.

CP-SAT needs integers: times are multiplied by a scale and durations / transfer
costs rounded *up*, so any integer solution is feasible for the real
durations.  When every scaled number is already an integer (e.g. paper 001's
synthetic durations, scale 1) the model is exact: the solver's bound is a valid
lower bound and ``OPTIMAL`` proves optimality.  Otherwise only the analytic
bound of :func:`onnx_sched.cost.makespan.lower_bound` is reported.

The model also carries the analytic bound as a redundant cut (``makespan >= lb``),
so the reported bound is never looser than it.

The list-cp schedule is the solution hint (appendix D.2 found it the better
warm start) and the fallback: the pass never returns something worse, and returns
it unsolved (``info["cpsat_status"]`` says why) when the model alone would take
longer to build than the time limit (:func:`build_seconds`).
Options: ``workers`` (default 2), ``scale`` (default: exact if integral, else
about 1e6 steps over the hint's makespan).
"""

from __future__ import annotations

import math
import time

import numpy as np
from ortools.sat.python import cp_model

from onnx_sched.cost import makespan as ms
from onnx_sched.cp_sat import cp_solver
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._priorities import cp_priority
from onnx_sched.schedule import Schedule


def _integral(a: np.ndarray) -> bool:
    a = a[np.isfinite(a)]
    return bool(np.all(np.abs(a - np.round(a)) <= 1e-9 * np.maximum(1.0, np.abs(a))))


def _ceil(a: np.ndarray) -> np.ndarray:
    """Round up, treating values within a relative 1e-9 of an integer as that integer."""
    return np.ceil(a - 1e-9 * np.maximum(1.0, np.abs(a)))


def _comm(problem: ms.MakespanProblem) -> np.ndarray:
    """``(E, P, P)`` transfer seconds per predecessor edge (aligned with ``op_preds``) and unit pair."""
    return problem.latency[None, :, :] + problem.edge_bytes[:, None, None] * problem.inv_bandwidth[None, :, :]


def _exact_scale(durations: np.ndarray, comm: np.ndarray | None, horizon: float) -> float | None:
    """The smallest of a few scales that makes every duration and transfer cost an integer, if any."""
    for scale in (1.0, 2.0, 4.0, 5.0, 8.0, 10.0, 20.0, 25.0, 50.0, 100.0, 1e3, 1e4, 1e5, 1e6):
        if horizon * scale > 1e9:
            break
        if _integral(durations * scale) and (comm is None or _integral(comm * scale)):
            return scale
    return None


#: Seconds to add one variable or constraint to the model through CP-SAT's Python API (measured: about 3 million
#: terms take 20 s on a generated 8,369-op graph with 345,000 edges on three devices).
BUILD_SECONDS_PER_TERM = 6e-6


def build_seconds(problem: ms.MakespanProblem) -> float:
    """About how long :func:`solve` takes to build its model: per allowed (op, unit) an interval and a literal, per
    edge a precedence, and with transfers one conditional precedence per edge and pair of distinct units."""
    P, edges = problem.n_units, len(problem.edge_bytes)
    terms = 2 * int(problem.allowed.sum()) + edges + (edges * P * (P - 1) if problem.has_transfers else 0)
    return terms * BUILD_SECONDS_PER_TERM


def solve(problem: ms.MakespanProblem, hint: Schedule, time_limit: float, workers: int = 2,
          scale: float | None = None, seed: int = 0) -> tuple[Schedule | None, dict]:
    """Solve with CP-SAT; returns (schedule or None, info with status, bound, scale, exactness).  ``time_limit``
    covers building the model too (thousands of ops take a noticeable part of a second)."""
    started = time.perf_counter()
    g = problem.graph
    n, P = problem.n_ops, problem.n_units
    comm = _comm(problem) if problem.has_transfers else None
    hint_ms = float(hint.info["makespan"])
    if scale is None:
        scale = _exact_scale(problem.durations, comm, hint_ms) or 1e6 / max(hint_ms, 1e-300)
    dint = np.where(problem.allowed, _ceil(np.where(problem.allowed, problem.durations, 0.0) * scale), -1)
    dint = dint.astype(np.int64)
    exact = bool(_integral(problem.durations * scale) and (comm is None or _integral(comm * scale)))
    cint = None if comm is None else _ceil(comm * scale).astype(np.int64)
    horizon = int(math.ceil(hint_ms * scale)) + int(dint.max(initial=0)) + 1
    if cint is not None:
        horizon = int(dint.max(axis=1).sum() + cint.max(initial=0) * max(len(problem.edge_bytes), 1)) + 1
    m = cp_model.CpModel()
    start = [m.NewIntVar(0, horizon, f"s{v}") for v in range(n)]
    end = [m.NewIntVar(0, horizon, f"e{v}") for v in range(n)]
    pres: list[dict[int, cp_model.IntVar]] = []
    per_unit: list[list[tuple[cp_model.IntervalVar, int]]] = [[] for _ in range(P)]
    fixed = problem.fixed_unit
    for v in range(n):
        units = np.flatnonzero(problem.allowed[v])
        dv = {}
        if len(units) == 1:
            p = int(units[0])
            iv = m.NewIntervalVar(start[v], int(dint[v, p]), end[v], f"i{v}")
            per_unit[p].append((iv, int(problem.demand[v])))
            dv[p] = None
        else:
            lits = []
            for p in units.tolist():
                lit = m.NewBoolVar(f"x{v}_{p}")
                iv = m.NewOptionalIntervalVar(start[v], int(dint[v, p]), end[v], lit, f"i{v}_{p}")
                per_unit[p].append((iv, int(problem.demand[v])))
                dv[p] = lit
                lits.append(lit)
            m.AddExactlyOne(lits)
        pres.append(dv)
    for p in range(P):
        items = per_unit[p]
        if not items:
            continue
        if int(problem.capacity[p]) == 1:
            m.AddNoOverlap([iv for iv, _ in items])
        else:
            m.AddCumulative([iv for iv, _ in items], [d for _, d in items], int(problem.capacity[p]))
    preds = g.op_preds
    for v in range(n):
        for k in range(preds.indptr[v], preds.indptr[v + 1]):
            u = int(preds.indices[k])
            m.Add(start[v] >= end[u])
            if cint is None:
                continue
            for p, lu in pres[u].items():
                for q, lv in pres[v].items():
                    c = int(cint[k, p, q])
                    if p == q or c <= 0:
                        continue
                    ct = m.Add(start[v] >= end[u] + c)
                    lits = [x for x in (lu, lv) if x is not None]
                    if lits:
                        ct.OnlyEnforceIf(lits)
    mk = m.NewIntVar(0, horizon, "makespan")
    m.AddMaxEquality(mk, end)
    # Redundant cut: the analytic bound (critical path, work / capacity) holds for the rounded-up integer
    # durations too; CP-SAT's own bound on 1000-op graphs starts below it, so this keeps the reported bound
    # at least as tight as the analytic one.
    lb_int = int(_ceil(np.array([ms.lower_bound(problem) * scale]))[0])
    m.Add(mk >= min(lb_int, horizon))
    m.Minimize(mk)
    hstart = np.asarray(hint.start, np.float64)
    hplace = np.asarray(hint.placement, np.int64)
    hint_end = 0
    for v in range(n):  # a complete hint (starts, ends, choices, makespan): CP-SAT then starts from it at once
        s_v = int(min(horizon, math.ceil(hstart[v] * scale - 1e-9)))
        e_v = int(min(horizon, s_v + dint[v, hplace[v]]))
        hint_end = max(hint_end, e_v)
        m.AddHint(start[v], s_v)
        m.AddHint(end[v], e_v)
        for p, lit in pres[v].items():
            if lit is not None:
                m.AddHint(lit, int(hplace[v] == p))
    m.AddHint(mk, hint_end)
    solver = cp_solver(time_limit, seed, workers, started=started, model=m)
    status = solver.Solve(m)
    info = {"status": solver.StatusName(status), "scale": scale, "exact": exact,
            "cp_objective": None, "cp_bound": None, "wall_s": solver.WallTime()}
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        info["cp_bound"] = solver.BestObjectiveBound() / scale  # valid even when no solution was found
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, info
    info["cp_objective"] = solver.ObjectiveValue() / scale
    st = np.array([solver.Value(start[v]) for v in range(n)], dtype=np.float64) / scale
    if fixed is not None:
        place = fixed.copy()
    else:
        place = np.array([next(p for p, lit in pres[v].items() if lit is None or solver.Value(lit)) for v in range(n)],
                         dtype=np.int64)
    optimal = exact and status == cp_model.OPTIMAL
    bound = info["cp_bound"] if exact else None
    sched = ms.make_schedule(problem, st, place, "cpsat", optimal=optimal, bound=bound,
                             cpsat_status=info["status"], exact_model=exact, cp_bound=bound)
    return sched, info


@register("cpsat", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """CP-SAT within ``ctx.time_limit``, hinted with list-cp; returns the better of the two."""
    problem = ms.problem_of(graph, ctx)
    hint = ms.list_schedule(problem, cp_priority(problem), "list-cp")
    if build_seconds(problem) > ctx.time_limit:
        return ms.make_schedule(problem, hint.start, hint.placement, "cpsat", kept_hint=True,
                                cpsat_status=f"not built: its model would take about {build_seconds(problem):.0f} s "
                                             f"to build, more than the {ctx.time_limit:.1f} s time limit")
    sched, info = solve(problem, hint, ctx.time_limit, int(ctx.option("workers", 2)), ctx.option("scale", None),
                        ctx.seed)
    if sched is None or sched.info["makespan"] > hint.info["makespan"]:
        bound = info["cp_bound"] if (info["exact"] and info["cp_bound"] is not None) else None
        return ms.make_schedule(problem, hint.start, hint.placement, "cpsat", bound=bound,
                                cpsat_status=info["status"], exact_model=info["exact"], kept_hint=True,
                                cp_bound=bound)
    return sched
