"""Chain schedules: a lane per op and an op order, timed by the semi-active rule (paper 002, eq. 1-3).

Paper 002 describes a schedule as one *chain* per device: the order in which
that device runs its ops.  Here a device (unit) of capacity ``c`` offers ``c``
*lanes*, each running one op at a time, so a chain schedule is

* ``lane[v]``: the lane op ``v`` runs on (its unit is ``lanes.unit[lane[v]]``);
* ``order``: a topological order of all ops; a lane's chain is the order
  restricted to its ops.

Its start times are the earliest the precedence edges ``P`` and the chain edges
``D`` allow (eq. 2): an op starts when its lane's previous op has finished and
every input has arrived (``finish + latency + bytes / bandwidth`` across units,
as the problem's link model says; a proxy without links moves data for free).
The makespan is eq. 3.  :func:`chain_times` times many schedules in one numba
call; :func:`chain_schedule` wraps one as a validated
:class:`~onnx_sched.schedule.Schedule`; :func:`chains_of` reads the chains back
out of any timed schedule (list scheduling, CP-SAT, ...), so every makespan
method can hand its result to a target model.

Lanes need unit resource demands (an op holds one lane); machine types with
larger demands have no chain form and raise ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.cost.makespan.problem import MakespanProblem, _cached, _topo
from onnx_sched.cost.makespan.validate import make_schedule
from onnx_sched.schedule import Schedule

__all__ = ["Chains", "Lanes", "chain_schedule", "chain_times", "chains_of", "lanes_of"]


@dataclass(frozen=True, eq=False)
class Lanes:
    """The lanes of a problem: ``unit[l]`` is the unit lane ``l`` belongs to."""

    unit: np.ndarray  # int64 (L,)

    @property
    def n(self) -> int:
        return len(self.unit)


@dataclass(frozen=True, eq=False)
class Chains:
    """``K`` chain schedules: ``lane`` (K, n) lane per op, ``order`` (K, n) topological op order."""

    lane: np.ndarray
    order: np.ndarray

    def __post_init__(self) -> None:
        lane = np.atleast_2d(np.ascontiguousarray(self.lane, dtype=np.int64))
        order = np.atleast_2d(np.ascontiguousarray(self.order, dtype=np.int64))
        if lane.shape != order.shape:
            raise ValueError(f"chains: lane shape {lane.shape} differs from order shape {order.shape}")
        object.__setattr__(self, "lane", lane)
        object.__setattr__(self, "order", order)

    def __len__(self) -> int:
        return len(self.lane)

    def take(self, index: np.ndarray) -> Chains:
        return Chains(self.lane[index], self.order[index])

    @staticmethod
    def concat(parts: list[Chains]) -> Chains:
        return Chains(np.vstack([p.lane for p in parts]), np.vstack([p.order for p in parts]))


def lanes_of(problem: MakespanProblem) -> Lanes:
    """One lane per unit of capacity (``ValueError`` if an op holds more than one)."""
    if problem.n_ops and (problem.demand != 1).any():
        raise ValueError("chain schedules need unit resource demands (every op holds one lane of a unit)")
    return _cached(problem, "_lanes", lambda: Lanes(np.repeat(np.arange(problem.n_units), problem.capacity)))


@numba.njit(cache=True)
def _chain_times(lanes, orders, lane_unit, dur, pred_ptr, pred_idx, ebytes, lat, inv, starts):  # noqa: ANN001, ANN202
    k_count, n = orders.shape
    out = np.empty(k_count)
    lane_free = np.zeros(len(lane_unit))
    finish = np.zeros(n)
    for k in range(k_count):
        lane_free[:] = 0.0
        ms = 0.0
        for i in range(n):
            v = orders[k, i]
            ln = lanes[k, v]
            u = lane_unit[ln]
            t = lane_free[ln]
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                p = pred_idx[e]
                pu = lane_unit[lanes[k, p]]
                arrive = finish[p]
                if pu != u:
                    arrive += lat[pu, u] + ebytes[e] * inv[pu, u]
                if arrive > t:
                    t = arrive
            starts[k, v] = t
            finish[v] = t + dur[v, u]
            lane_free[ln] = finish[v]
            if finish[v] > ms:
                ms = finish[v]
        out[k] = ms
    return out


#: What :func:`_check_kernel`'s codes mean.
_CHECK_ERRORS = {
    1: "lane outside [0, {lanes})",
    2: "chain order is not a permutation of the ops",
    3: "chain order runs an op before one of its predecessors",
    4: "a chain schedule places an op on a unit that cannot run it",
}


@numba.njit(cache=True)
def _check_kernel(lanes, orders, lane_unit, dur, pred_ptr, pred_idx):  # noqa: ANN001, ANN202
    """0 when every chain schedule is valid, else the first problem's code (:data:`_CHECK_ERRORS`)."""
    k_count, n = orders.shape
    pos = np.empty(n, np.int64)
    for k in range(k_count):
        pos[:] = -1
        for i in range(n):
            v = orders[k, i]
            if v < 0 or v >= n or pos[v] >= 0:
                return 2
            pos[v] = i
        for v in range(n):
            ln = lanes[k, v]
            if ln < 0 or ln >= len(lane_unit):
                return 1
            if not np.isfinite(dur[v, lane_unit[ln]]):
                return 4
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                if pos[pred_idx[e]] > pos[v]:
                    return 3
    return 0


def _check(problem: MakespanProblem, chains: Chains, lanes: Lanes) -> None:
    n = problem.n_ops
    if chains.lane.shape[1] != n:
        raise ValueError(f"chains have {chains.lane.shape[1]} ops, the problem {n}")
    if n == 0 or len(chains) == 0:
        return
    preds = problem.graph.op_preds
    code = _check_kernel(chains.lane, chains.order, lanes.unit, problem.durations, preds.indptr.astype(np.int64),
                         preds.indices.astype(np.int64))
    if code:
        raise ValueError(_CHECK_ERRORS[code].format(lanes=lanes.n))


def chain_times(problem: MakespanProblem, chains: Chains, check: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Start times ``(K, n)`` and makespans ``(K,)`` of ``chains`` on ``problem`` (eq. 2-3).

    >>> from onnx_sched.graph import Graph
    >>> from onnx_sched.machines import machine_types
    >>> from onnx_sched.cost.makespan.problem import makespan_problem
    >>> g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[4, 4, 4])
    >>> p = makespan_problem(g, machine_types((2,)), np.array([1.0, 2.0, 3.0]))
    >>> start, ms = chain_times(p, Chains([[0, 0, 1], [0, 0, 0]], [[0, 1, 2], [0, 1, 2]]))
    >>> start.tolist(), ms.tolist()
    ([[0.0, 1.0, 1.0], [0.0, 1.0, 3.0]], [4.0, 6.0])
    """
    lanes = lanes_of(problem)
    if check:
        _check(problem, chains, lanes)
    g = problem.graph
    starts = np.zeros(chains.lane.shape)
    ms = _chain_times(chains.lane, chains.order, lanes.unit, problem.durations, g.op_preds.indptr.astype(np.int64),
                      g.op_preds.indices.astype(np.int64), problem.edge_bytes, problem.latency,
                      problem.inv_bandwidth, starts)
    return starts, ms


def chain_schedule(problem: MakespanProblem, lane: np.ndarray, order: np.ndarray, method: str, **info: object) -> Schedule:
    """One chain schedule, timed and validated, as a :class:`Schedule` (``info`` keeps ``lane``)."""
    chains = Chains(lane, order)
    start, _ = chain_times(problem, chains)
    unit = lanes_of(problem).unit[chains.lane[0]]
    return make_schedule(problem, start[0], unit, method, lane=chains.lane[0], **info)


def chains_of(problem: MakespanProblem, schedule: Schedule) -> Chains:
    """The chains a timed schedule runs: per unit, ops in start order dealt to the lane that frees first.

    A schedule that recorded its lanes (``info["lane"]``) keeps them.  The result
    times no later than the schedule itself on the same problem.
    """
    n = problem.n_ops
    lanes = lanes_of(problem)
    topo_pos = np.empty(n, np.int64)
    topo_pos[_topo(problem)] = np.arange(n)
    if schedule.start is None:
        from onnx_sched.cost.makespan.evaluate import evaluate

        result = evaluate(problem, schedule)
        start, unit = result.start, result.placement
    else:
        start = np.asarray(schedule.start, np.float64)
        unit = (np.asarray(schedule.placement, np.int64) if schedule.placement is not None
                else problem.fixed_unit)
    order = np.lexsort((topo_pos, start))
    if "lane" in schedule.info:
        return Chains(np.asarray(schedule.info["lane"], np.int64), order)
    dur = problem.durations[np.arange(n), unit]
    first = np.concatenate([[0], np.cumsum(problem.capacity)[:-1]])
    free = np.zeros(lanes.n)
    lane = np.empty(n, np.int64)
    for v in order:
        u = int(unit[v])
        cands = np.arange(first[u], first[u] + problem.capacity[u])
        ln = int(cands[np.argmin(free[cands])])
        lane[v] = ln
        free[ln] = start[v] + dur[v]
    return Chains(lane, order)
