"""Optimal sequential-latency placements: an s-t minimum cut (two devices, exact) and CP-SAT (any number).

The latency model is :mod:`onnx_sched.cost.latency`; these optimise it and are used by the
``mincut``, ``cpsat-place`` and ``auto`` placement passes (and as the reference in benchmarks
and HSDAG training).  Both score their result with the cost model, so a placement is
always judged by one definition.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from onnx_sched.cost.latency import PlacementProblem, sequential_latency
from onnx_sched.cp_sat import cp_solver
from onnx_sched.flow import min_cut

__all__ = ["cpsat_build_seconds", "cpsat_placement", "mincut_placement"]

#: Seconds to add one variable, constraint or hint to :func:`cpsat_placement`'s model through CP-SAT's Python API
#: (measured 2.7-4.7 us on generated 3,000-20,000-op graphs, three devices: sbm, layered, ws, er, transformer).
BUILD_SECONDS_PER_TERM = 5e-6
#: Seconds per term CP-SAT spends loading the model before its time limit can stop it (measured 0.6-1.3 us on the
#: same graphs: a solve limited to 10 ms took 0.15-0.67 s).
SOLVER_START_SECONDS_PER_TERM = 1.5e-6
#: Capacity units per second of :func:`mincut_placement`'s network.
PICOSECONDS = 1e12


def mincut_placement(problem: PlacementProblem) -> tuple[np.ndarray, float]:
    """Exact sequential-latency optimum for two devices as an s-t minimum cut.

    Source side = device 0, sink side = device 1.  Op ``i``: edge ``s->i`` costs
    its device-1 time, ``i->t`` its device-0 time.  A tensor produced on ``P``
    (an op, or the host terminal for graph inputs) read by consumers ``C`` (plus
    the host terminal for graph outputs) gets two auxiliary nodes: ``P->a`` (cost
    0->1 transfer) with ``a->c`` infinite, and ``c->b`` infinite with ``b->P`` (cost
    1->0 transfer), so each direction is paid at most once per tensor.  Returns
    ``(placement, latency)``.  Capacities are rounded to whole picoseconds for the exact integer max flow
    (:func:`onnx_sched.flow.min_cut`).
    """
    if problem.n_devices != 2:
        raise ValueError(f"mincut placement needs exactly 2 devices, got {problem.n_devices}")
    g = problem.graph
    n = g.n_ops
    if not np.isfinite(problem.op_time).all():
        big = float(np.nansum(np.where(np.isfinite(problem.op_time), problem.op_time, 0))) * 10 + 1.0
        times = np.where(np.isfinite(problem.op_time), problem.op_time, big)
    else:
        times = problem.op_time
    S, T = 0, 1  # then the ops, then two auxiliary nodes per tensor that crosses
    tails: list[int] = []
    heads: list[int] = []
    caps: list[float] = []  # seconds; inf: never cut

    def add(u: int, v: int, cap: float) -> None:
        if cap > 0:
            tails.append(u)
            heads.append(v)
            caps.append(cap)

    for i in range(n):
        add(S, i + 2, float(times[i, 1]))
        add(i + 2, T, float(times[i, 0]))
    host_node = S if problem.host == 0 else T
    tt = problem.transfers
    node = n + 2
    for j in range(len(tt.tensor)):
        u = int(tt.src_op[j])
        P = host_node if u < 0 else u + 2
        cons = [int(c) + 2 for c in tt.cons_idx[tt.cons_ptr[j]:tt.cons_ptr[j + 1]]]
        if tt.to_host[j]:
            cons.append(host_node)
        cons = [c for c in dict.fromkeys(cons) if c != P]
        if not cons:
            continue
        c01 = problem.latency[0, 1] + tt.nbytes[j] * problem.inv_bandwidth[0, 1]
        c10 = problem.latency[1, 0] + tt.nbytes[j] * problem.inv_bandwidth[1, 0]
        if P != T:  # producer may sit on device 0 and pay 0->1
            a, node = node, node + 1
            add(P, a, c01)
            for c in cons:
                if c != S:
                    add(a, c, np.inf)
        if P != S:  # producer may sit on device 1 and pay 1->0
            b, node = node, node + 1
            add(b, P, c10)
            for c in cons:
                if c != T:
                    add(c, b, np.inf)
    seconds = np.asarray(caps)
    finite = np.isfinite(seconds)
    units = np.zeros(len(seconds), np.int64)  # picoseconds: integer capacities for the exact max flow
    units[finite] = np.maximum(np.rint(seconds[finite] * PICOSECONDS), 1)
    units[~finite] = int(units[finite].sum()) + 1
    _, source_side = min_cut(node, S, T, tails, heads, units, largest=True)  # ties: device 0
    placement = np.where(source_side[2 : n + 2], 0, 1).astype(np.int64)
    return placement, sequential_latency(problem, placement)


def model_terms(problem: PlacementProblem) -> int:
    """About how many variables, constraints and hints :func:`cpsat_placement` adds: per op and device a variable
    and a hint, per op a choice, per consumer and device an implication, per tensor and device a variable, and per
    produced tensor and device pair a variable and a clause."""
    k, tt = problem.n_devices, problem.transfers
    produced = int(np.count_nonzero(tt.src_op >= 0))
    return (2 * k + 1) * problem.graph.n_ops + len(tt.cons_idx) * k + len(tt.tensor) * k + 2 * produced * k * (k - 1)


def cpsat_build_seconds(problem: PlacementProblem) -> float:
    """About how long :func:`cpsat_placement` takes before CP-SAT searches at all: building its model
    (:data:`BUILD_SECONDS_PER_TERM` a term) and the solver loading it (:data:`SOLVER_START_SECONDS_PER_TERM`)."""
    return model_terms(problem) * (BUILD_SECONDS_PER_TERM + SOLVER_START_SECONDS_PER_TERM)


def cpsat_placement(problem: PlacementProblem, time_limit: float = 10.0, hint: np.ndarray | None = None,
                    seed: int = 0, workers: int = 2, stats: dict | None = None) -> tuple[np.ndarray, float, bool]:
    """Sequential-latency placement on any number of devices with CP-SAT.

    Booleans ``x[i,d]`` (op on device), ``y[t,d]`` (tensor needed on ``d``: implied by
    any consumer on ``d``, or the host for outputs) and ``z[t,a,d] >= x[src,a] + y[t,d] - 1``
    carrying the transfer cost; costs in integer nanoseconds.  Returns
    ``(placement, latency, proven_optimal)``; ``stats`` (a dict), when given, receives
    ``lower_bound`` (seconds, CP-SAT's best objective bound) and ``status``.  ``time_limit`` covers
    building the model and the solver's start too (about :func:`cpsat_build_seconds`: 3 s for a generated
    20,000-op transformer, 14 s for a 20,000-op layered graph).
    """
    from ortools.sat.python import cp_model

    started = time.perf_counter()

    g = problem.graph
    n, k = g.n_ops, problem.n_devices
    scale = 1e9
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{i}_{d}") for d in range(k)] for i in range(n)]
    terms: list[Any] = []  # the objective: sum of coefficient * Boolean
    coefs: list[int] = []
    runs = np.isfinite(problem.op_time)
    op_cost = np.rint(np.where(runs, problem.op_time, 0.0) * scale).astype(np.int64).tolist()
    for i, row in enumerate(runs.tolist()):
        m.add_exactly_one(x[i][d] for d in range(k) if row[d])
        for d in range(k):
            if not row[d]:
                m.add(x[i][d] == 0)
            elif op_cost[i][d]:
                terms.append(x[i][d])
                coefs.append(op_cost[i][d])
    tt = problem.transfers
    host = problem.host
    move_cost = np.rint((problem.latency[None] + tt.nbytes[:, None, None] * problem.inv_bandwidth[None])
                        * scale).astype(np.int64).tolist()  # (tensor, from, to)
    src_op, to_host, cons_ptr, cons_idx = (a.tolist() for a in (tt.src_op, tt.to_host, tt.cons_ptr, tt.cons_idx))
    for j, u in enumerate(src_op):
        cons = sorted(set(cons_idx[cons_ptr[j]:cons_ptr[j + 1]]))
        for d in range(k):
            needed_fixed = to_host[j] and d == host
            if not cons and not needed_fixed:
                continue
            y = m.new_bool_var(f"y{j}_{d}")
            if needed_fixed:
                m.add(y == 1)
            for c in cons:
                m.add_implication(x[c][d], y)
            for a in range(k):
                cost = move_cost[j][a][d]
                if a == d or cost <= 0:
                    continue
                if u < 0:
                    if a == host:
                        terms.append(y)
                        coefs.append(cost)
                    continue
                z = m.new_bool_var(f"z{j}_{a}_{d}")
                m.add_bool_or([x[u][a].Not(), y.Not(), z])
                terms.append(z)
                coefs.append(cost)
    m.minimize(cp_model.LinearExpr.weighted_sum(terms, coefs))
    if hint is not None:
        for i, h in enumerate(np.asarray(hint, np.int64).tolist()):
            for d in range(k):
                m.add_hint(x[i][d], int(h == d))
    # the solver's start, which its own limit does not stop, counts against the search's time
    solver = cp_solver(time_limit - model_terms(problem) * SOLVER_START_SECONDS_PER_TERM, seed, workers,
                       started=started, model=m)
    status = solver.Solve(m)
    if stats is not None:
        stats["status"] = solver.StatusName(status)
        stats["lower_bound"] = float(solver.BestObjectiveBound()) / scale
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint is None:
            raise ValueError("CP-SAT found no placement within the time limit")
        p = np.asarray(hint, np.int64)
        return p, sequential_latency(problem, p), False
    values = np.asarray(solver.response_proto.solution, np.int64)  # by variable index, read back at once
    p = values[np.array([[v.index for v in row] for row in x], np.int64).reshape(n, k)].argmax(axis=1)
    lat = sequential_latency(problem, p)
    if hint is not None:
        hl = sequential_latency(problem, hint)
        if hl < lat:
            return np.asarray(hint, np.int64), hl, False
    return p, lat, status == cp_model.OPTIMAL
