"""List scheduling: numba kernels for machine types and for devices, and their Python drivers.

Machine types (Graham 1969, paper 001 section 2.2): the time-driven
("parallel") scheme.  At each decision time the ready ops are started in
priority order while their machine type has free resources; then time moves to
the earliest finish among running ops.  ``_list_types`` is the numba kernel
(about a millisecond for a 1000-op graph).

Devices: the serial scheme with earliest-finish-time device choice; ops are
taken in priority order among those whose predecessors are placed, each on the
device (stream) where it finishes first, optionally filling idle gaps
(insertion, as HEFT) and adding an optimistic cost table term (PEFT).  With
``first_free`` each op goes instead to the device (stream) that frees first,
whatever its inputs' devices: the list scheduling paper 002 compares against
("assigns them in that order one by one to a free device").
``_list_devices`` is its numba kernel.  Both kernels keep their events in the
binary heap of :func:`~onnx_sched.dag_kernels.heap_push` / ``heap_pop`` (ties broken by op id).

Priorities follow paper 001: higher value = scheduled earlier; ``_rank_keys``
turns them into the integer keys the kernels sort by.  :func:`run_list`,
:func:`list_makespans` (many priorities in one numba call) and
:func:`list_schedule` (a validated :class:`Schedule`) are the entry points.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from onnx_sched.cost.makespan.problem import MakespanProblem, _cached
from onnx_sched.cost.makespan.validate import make_schedule
from onnx_sched.dag_kernels import heap_pop, heap_push, release_successors
from onnx_sched.schedule import Schedule

__all__ = ["list_makespans", "list_schedule", "run_list"]


def _rank_keys(priority: np.ndarray) -> np.ndarray:
    """Position of each op when sorted by decreasing priority, ties by op id (smaller key = first)."""
    pr = np.asarray(priority, dtype=np.float64)
    order = np.lexsort((np.arange(len(pr)), -pr))
    key = np.empty(len(pr), np.int64)
    key[order] = np.arange(len(pr))
    return key


@numba.njit(cache=True)
def _list_types(key, dur, unit, demand, cap, indeg0, succ_ptr, succ_idx, start):  # noqa: ANN001, ANN202
    """Time-driven list scheduling with one unit per op; fills ``start``; returns the makespan (-1 if stuck)."""
    n = len(key)
    indeg = indeg0.copy()
    free = cap.copy()
    ready = np.empty(n, np.int64)
    nr = 0
    for v in range(n):
        if indeg[v] == 0:
            ready[nr] = v
            nr += 1
    hf = np.empty(n, np.float64)
    hv = np.empty(n, np.int64)
    nh = 0
    t = 0.0
    done = 0
    makespan = 0.0
    keys = np.empty(n, np.int64)
    while done < n:
        if nr > 0:
            for j in range(nr):
                keys[j] = key[ready[j]]
            idx = np.argsort(keys[:nr])
            tmp = ready[:nr].copy()
            m = 0
            for j in idx:
                v = tmp[j]
                u = unit[v]
                if demand[v] <= free[u]:
                    free[u] -= demand[v]
                    start[v] = t
                    f = t + dur[v]
                    if f > makespan:
                        makespan = f
                    nh = heap_push(hf, hv, nh, f, v)
                else:
                    ready[m] = v
                    m += 1
            nr = m
        if nh == 0:
            return -1.0
        t = hf[0]
        while nh > 0 and hf[0] <= t:
            v, nh = heap_pop(hf, hv, nh)
            free[unit[v]] += demand[v]
            done += 1
            nr = release_successors(v, succ_ptr, succ_idx, indeg, ready, nr)
    return makespan


@numba.njit(cache=True)
def _list_types_batch(keys, dur, unit, demand, cap, indeg0, succ_ptr, succ_idx):  # noqa: ANN001, ANN202
    out = np.empty(keys.shape[0])
    start = np.empty(keys.shape[1])
    for i in range(keys.shape[0]):
        out[i] = _list_types(keys[i], dur, unit, demand, cap, indeg0, succ_ptr, succ_idx, start)
    return out


@numba.njit(cache=True)
def _list_devices(key, dur, cap, indeg0, succ_ptr, succ_idx, pred_ptr, pred_idx, ebytes, lat, inv,
                  insertion, oct_, first_free, start, place):  # noqa: ANN001, ANN202
    """Serial list scheduling with earliest-finish device choice; returns the makespan (-1 if stuck).

    Ops are taken in ``key`` order among those whose predecessors are placed.
    Each goes to the (device, stream) minimising ``finish + oct_[v, p]``; with
    ``insertion`` it may fill an idle gap between already placed ops.  With
    ``first_free`` (no insertion) the (device, stream) whose last op ends first
    wins instead, ties by index.
    """
    n, P = dur.shape
    offs = np.zeros(P + 1, np.int64)
    for p in range(P):
        offs[p + 1] = offs[p] + cap[p]
    S = offs[P]
    ivs = np.empty((S, n + 1))
    ive = np.empty((S, n + 1))
    cnt = np.zeros(S, np.int64)
    finish = np.zeros(n)
    indeg = indeg0.copy()
    hf = np.empty(n, np.float64)
    hv = np.empty(n, np.int64)
    nh = 0
    for v in range(n):
        if indeg[v] == 0:
            nh = heap_push(hf, hv, nh, float(key[v]), v)
    makespan = 0.0
    placed = 0
    while nh > 0:
        v, nh = heap_pop(hf, hv, nh)
        best_score = np.inf
        best_f = np.inf
        best_s = -1
        best_t = 0.0
        best_p = -1
        for p in range(P):
            d = dur[v, p]
            if d == np.inf:
                continue
            ready_t = 0.0
            for k in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[k]
                pu = place[u]
                a = finish[u]
                if pu != p:
                    a += lat[pu, p] + ebytes[k] * inv[pu, p]
                if a > ready_t:
                    ready_t = a
            for s in range(offs[p], offs[p + 1]):
                c = cnt[s]
                if insertion:
                    cand = ready_t
                    for i in range(c):
                        if ivs[s, i] >= cand + d:
                            break
                        if ive[s, i] > cand:
                            cand = ive[s, i]
                else:
                    cand = ready_t
                    if c > 0 and ive[s, c - 1] > cand:
                        cand = ive[s, c - 1]
                f = cand + d
                if first_free:
                    score = ive[s, c - 1] if c > 0 else 0.0
                else:
                    score = f + oct_[v, p]
                if score < best_score or (score == best_score and f < best_f):
                    best_score = score
                    best_f = f
                    best_s = s
                    best_t = cand
                    best_p = p
        if best_s < 0:
            return -1.0
        s = best_s
        c = cnt[s]
        i = c
        while i > 0 and ivs[s, i - 1] > best_t:
            ivs[s, i] = ivs[s, i - 1]
            ive[s, i] = ive[s, i - 1]
            i -= 1
        ivs[s, i] = best_t
        ive[s, i] = best_f
        cnt[s] = c + 1
        start[v] = best_t
        finish[v] = best_f
        place[v] = best_p
        if best_f > makespan:
            makespan = best_f
        placed += 1
        for k in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[k]
            indeg[w] -= 1
            if indeg[w] == 0:
                nh = heap_push(hf, hv, nh, float(key[w]), w)
    if placed < n:
        return -1.0
    return makespan


@numba.njit(cache=True)
def _list_devices_batch(keys, dur, cap, indeg0, succ_ptr, succ_idx, pred_ptr, pred_idx, ebytes, lat, inv,
                        insertion, oct_, first_free):  # noqa: ANN001, ANN202
    n = keys.shape[1]
    out = np.empty(keys.shape[0])
    start = np.empty(n)
    place = np.zeros(n, np.int64)
    for i in range(keys.shape[0]):
        out[i] = _list_devices(keys[i], dur, cap, indeg0, succ_ptr, succ_idx, pred_ptr, pred_idx, ebytes, lat, inv,
                               insertion, oct_, first_free, start, place)
    return out


def _arrays(problem: MakespanProblem) -> dict[str, np.ndarray]:
    return _cached(problem, "_arrays", lambda: _build_arrays(problem))


def _build_arrays(problem: MakespanProblem) -> dict[str, np.ndarray]:
    g = problem.graph
    arrays = {
        "indeg": g.op_preds.lengths().astype(np.int64),
        "succ_ptr": g.op_succs.indptr.astype(np.int64),
        "succ_idx": g.op_succs.indices.astype(np.int64),
        "pred_ptr": g.op_preds.indptr.astype(np.int64),
        "pred_idx": g.op_preds.indices.astype(np.int64),
    }
    unit = problem.fixed_unit
    if unit is not None:
        arrays["unit"] = unit
        arrays["dur1"] = np.ascontiguousarray(problem.durations[np.arange(problem.n_ops), unit])
    return arrays


def _uses_time_driven(problem: MakespanProblem) -> bool:
    """Machine types without transfers: paper 001's time-driven list scheduling applies."""
    return problem.fixed_unit is not None and not problem.has_transfers


def run_list(
    problem: MakespanProblem,
    priority: np.ndarray,
    *,
    insertion: bool = False,
    oct_table: np.ndarray | None = None,
    serial: bool | None = None,
    first_free: bool = False,
) -> tuple[np.ndarray, np.ndarray, float]:
    """List-schedule ``problem`` by ``priority`` (higher first); returns ``(start, placement, makespan)``.

    Machine-type problems use the time-driven scheme of paper 001; problems with
    a device choice (or when ``serial`` / ``insertion`` / ``oct_table`` /
    ``first_free`` is given) use the serial scheme: earliest-finish device
    choice, or with ``first_free`` the device that frees first (paper 002's
    list scheduling baseline).
    """
    n = problem.n_ops
    a = _arrays(problem)
    key = _rank_keys(priority)
    start = np.zeros(n)
    use_serial = serial if serial is not None else not _uses_time_driven(problem)
    if first_free and (insertion or oct_table is not None):
        raise ValueError("first_free device choice takes neither insertion nor an optimistic cost table")
    if insertion or oct_table is not None or first_free:
        use_serial = True
    if not use_serial:
        unit = a["unit"]
        ms = _list_types(key, a["dur1"], unit, problem.demand, problem.capacity, a["indeg"], a["succ_ptr"],
                         a["succ_idx"], start)
        place = unit.copy()
    else:
        if (problem.demand != 1).any():
            raise ValueError("serial / insertion list scheduling needs unit resource demands; use time-driven list-*")
        place = np.zeros(n, np.int64)
        oct_ = np.zeros((n, problem.n_units)) if oct_table is None else np.ascontiguousarray(oct_table, np.float64)
        ms = _list_devices(key, problem.durations, problem.capacity, a["indeg"], a["succ_ptr"], a["succ_idx"],
                           a["pred_ptr"], a["pred_idx"], problem.edge_bytes, problem.latency, problem.inv_bandwidth,
                           bool(insertion), oct_, bool(first_free), start, place)
    if ms < 0:
        raise ValueError("list scheduling got stuck: an op can never start (resource demand above capacity?)")
    return start, place, float(ms)


def list_makespans(problem: MakespanProblem, priorities: np.ndarray) -> np.ndarray:
    """Makespan of list scheduling for each row of ``priorities`` (``(k, n)``), in one numba call."""
    pr = np.atleast_2d(np.asarray(priorities, np.float64))
    keys = np.empty(pr.shape, np.int64)
    for i in range(len(pr)):
        keys[i] = _rank_keys(pr[i])
    a = _arrays(problem)
    if _uses_time_driven(problem):
        out = _list_types_batch(keys, a["dur1"], a["unit"], problem.demand, problem.capacity, a["indeg"],
                                a["succ_ptr"], a["succ_idx"])
    else:
        oct_ = np.zeros((problem.n_ops, problem.n_units))
        out = _list_devices_batch(keys, problem.durations, problem.capacity, a["indeg"], a["succ_ptr"], a["succ_idx"],
                                  a["pred_ptr"], a["pred_idx"], problem.edge_bytes, problem.latency,
                                  problem.inv_bandwidth, False, oct_, False)
    if (out < 0).any():
        raise ValueError("list scheduling got stuck: an op can never start")
    return out


def list_schedule(problem: MakespanProblem, priority: np.ndarray, method: str = "list", *, first_free: bool = False,
                  **info: Any) -> Schedule:
    """A validated :class:`Schedule` from list scheduling by ``priority`` (higher first); ``first_free``: see
    :func:`run_list`."""
    start, place, _ = run_list(problem, priority, first_free=first_free)
    return make_schedule(problem, start, place, method, **info)
