"""The scheduling environment of paper 002 (2.3, E.1): partial chain schedules built one (op, lane) at a time.

A state is a partial schedule: the ops placed so far, each on a lane in the
order it was added (the per-lane chains) with its proxy start time (eq. 2).  An
action adds one *ready* op (every predecessor already placed) to a lane that
can run it, so every trajectory ends in a valid schedule.  The parents of a
state are the states with one op removed; an op can be removed when it is the
last of its lane and none of its successors is placed, so the uniform backward
policy (the choice stated in docs/results.md) is ``1 / #removable``.

:class:`ScheduleEnv` runs ``B`` trajectories of one problem at once with numba
kernels and produces the policy's inputs (paper 002 E.1):

* per op and graph (``static``, ``(n, 3)``): the op's mean duration, and the
  longest path from it to a sink and from a source to it (its "bottom" and "top
  level"), the graph features the encoder sees (paper 002 uses the duration
  alone; the two path lengths are an addition, cheap and standard in list
  scheduling);
* per op and state (``node``, ``(B, n, 4)``): proxy start time (``-1`` before
  placement), ready (a valid action), removable (a valid backward action), placed;
* per (op, lane) (``pair``, ``(B, n, L, 4)``): placed on this lane, the op's
  duration on the lane's unit, the earliest start the op would get there now, and
  when the lane frees; times are divided by the problem's ``scale`` (a makespan
  lower bound), durations by the mean duration;
* ``mask`` ``(B, n, L)``: valid actions.

``actions`` other than ``all`` narrow the valid actions (not in paper 002; the
samplers' ``actions=`` option): a ready op may go only to a lane of one of its
predecessors or to one more lane -- with ``local`` the lane that frees first,
with ``list`` the lane that would finish it first (list scheduling's
earliest-finish rule, so the list schedule itself can be sampled); ties go to
the lowest index.  ``finish`` leaves only the op to choose: it goes to the lane
that would finish it first, among equals the one holding most of its input
bytes (then the lowest index) -- list scheduling's device rule with a data-local
tie-break, so the policy samples the dispatch order.  On a transfer-free proxy
these are often proxy-equal to the other lanes, but they cross devices less
(docs/results.md 16.3c, 16.3f); every sample is still a valid schedule.  With a
narrowing a state is a sequence of actions, not a set of chains: removing an
arbitrary removable op could leave a partial schedule the narrowed actions
never reach, so each state has one parent (the state before its last action)
and ``step`` returns ``log P_B = 0`` -- a tree-structured GFlowNet that samples
action sequences in proportion to the reward.  Policies trained with one action
set no longer sample in proportion to the reward when sampled with another.

The env is shared by training (torch) and inference (ONNX Runtime), so the
policy sees the same features in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, lanes_of
from onnx_sched.cost.makespan.paths import _downward, lower_bound, upward_rank
from onnx_sched.cost.makespan.problem import _cached, _topo

__all__ = ["ACTIONS", "N_NODE", "N_PAIR", "N_STATIC", "EnvArrays", "ScheduleEnv", "check_actions", "env_arrays"]

#: The action sets of :class:`ScheduleEnv` (module docstring): ``all`` (paper 002), ``local``, ``list`` and ``finish``.
ACTIONS = ("all", "local", "list", "finish")


def check_actions(actions: str) -> str:
    """``actions`` if it names an action set of :data:`ACTIONS`, else ``ValueError``."""
    if actions not in ACTIONS:
        raise ValueError(f"actions must be one of {', '.join(ACTIONS)}, got {actions!r}")
    return actions

N_STATIC = 3
N_NODE = 4
N_PAIR = 4


@dataclass(frozen=True, eq=False)
class EnvArrays:
    """What the kernels need of a problem, computed once per problem."""

    n: int
    lane_unit: np.ndarray
    dur: np.ndarray  # (n, P), inf where not allowed
    allowed: np.ndarray  # (n, L) bool
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    ebytes: np.ndarray
    lat: np.ndarray
    inv: np.ndarray
    indeg: np.ndarray
    scale: float  # time unit of the features: a makespan lower bound
    mean_dur: float
    total_work: float
    static: np.ndarray  # (n, N_STATIC) float32


def env_arrays(problem: ms.MakespanProblem) -> EnvArrays:
    """The kernels' arrays of ``problem``, built once per (immutable) problem."""
    return _cached(problem, "_gflownet_env", lambda: _build_arrays(problem))


def _build_arrays(problem: ms.MakespanProblem) -> EnvArrays:
    g = problem.graph
    lanes = lanes_of(problem)
    finite = np.where(problem.allowed, problem.durations, np.nan)
    mean_dur = max(float(np.nanmean(finite)) if g.n_ops else 1.0, 1e-12)
    scale = max(float(lower_bound(problem)), 1e-12)
    w = problem.mean_durations()
    static = np.zeros((g.n_ops, N_STATIC), np.float32)
    if g.n_ops:
        static[:, 0] = w / mean_dur
        static[:, 1] = upward_rank(problem, w, comm=False) / scale
        static[:, 2] = _downward(_topo(problem), w, g.op_preds.indptr, g.op_preds.indices) / scale
    return EnvArrays(
        n=g.n_ops, lane_unit=lanes.unit, dur=problem.durations, allowed=problem.allowed[:, lanes.unit],
        pred_ptr=g.op_preds.indptr.astype(np.int64), pred_idx=g.op_preds.indices.astype(np.int64),
        succ_ptr=g.op_succs.indptr.astype(np.int64), succ_idx=g.op_succs.indices.astype(np.int64),
        ebytes=problem.edge_bytes, lat=problem.latency, inv=problem.inv_bandwidth,
        indeg=g.op_preds.lengths().astype(np.int64),
        scale=scale, mean_dur=mean_dur, total_work=problem.total_work(), static=static,
    )


@numba.njit(cache=True, inline="always")
def _arrival(b, v, u, t, lane, finish, lane_unit, pred_ptr, pred_idx, ebytes, lat, inv):  # noqa: ANN001, ANN202
    """When op ``v`` can start on unit ``u`` of trajectory ``b``: not before ``t`` nor before any input arrives."""
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        p = pred_idx[e]
        pu = lane_unit[lane[b, p]]
        arrive = finish[b, p]
        if pu != u:
            arrive += lat[pu, u] + ebytes[e] * inv[pu, u]
        if arrive > t:
            t = arrive
    return t


@numba.njit(cache=True)
def _step(ops, lns, placed, indeg, lane, start, finish, lane_free, lane_last, n_placed_succ,
          lane_unit, dur, pred_ptr, pred_idx, succ_ptr, succ_idx, ebytes, lat, inv):  # noqa: ANN001, ANN202
    """Apply one action per trajectory; return each new state's number of parents."""
    b_count = len(ops)
    parents = np.empty(b_count, np.int64)
    for b in range(b_count):
        v, ln = ops[b], lns[b]
        u = lane_unit[ln]
        t = _arrival(b, v, u, lane_free[b, ln], lane, finish, lane_unit, pred_ptr, pred_idx, ebytes, lat, inv)
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            n_placed_succ[b, pred_idx[e]] += 1
        placed[b, v] = True
        lane[b, v] = ln
        start[b, v] = t
        finish[b, v] = t + dur[v, u]
        lane_free[b, ln] = t + dur[v, u]
        lane_last[b, ln] = v
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            indeg[b, succ_idx[e]] -= 1
        count = 0
        for k in range(lane_last.shape[1]):
            w = lane_last[b, k]
            if w >= 0 and n_placed_succ[b, w] == 0:
                count += 1
        parents[b] = count
    return parents


@numba.njit(cache=True)
def _features(placed, indeg, lane, start, finish, lane_free, lane_last, n_placed_succ, allowed, lane_unit, dur,
              pred_ptr, pred_idx, ebytes, lat, inv, scale, mean_dur, node, pair, mask):  # noqa: ANN001, ANN202
    b_count, n = placed.shape
    n_lanes = len(lane_unit)
    for b in range(b_count):
        for v in range(n):
            is_placed = placed[b, v]
            ready = (not is_placed) and indeg[b, v] == 0
            node[b, v, 0] = start[b, v] / scale if is_placed else -1.0
            node[b, v, 1] = 1.0 if ready else 0.0
            removable = is_placed and lane_last[b, lane[b, v]] == v and n_placed_succ[b, v] == 0
            node[b, v, 2] = 1.0 if removable else 0.0
            node[b, v, 3] = 1.0 if is_placed else 0.0
            for ln in range(n_lanes):
                u = lane_unit[ln]
                ok = allowed[v, ln]
                pair[b, v, ln, 0] = 1.0 if is_placed and lane[b, v] == ln else 0.0
                pair[b, v, ln, 1] = dur[v, u] / mean_dur if ok else 0.0
                pair[b, v, ln, 3] = lane_free[b, ln] / scale
                est = 0.0
                if ready and ok:
                    est = _arrival(b, v, u, lane_free[b, ln], lane, finish, lane_unit, pred_ptr, pred_idx, ebytes,
                                   lat, inv)
                pair[b, v, ln, 2] = est / scale
                mask[b, v, ln] = ready and ok


@numba.njit(cache=True)
def _narrow(mask, by_finish, only_first, lane, lane_free, finish, lane_unit, dur, pred_ptr, pred_idx, ebytes, lat,
            inv):  # noqa: ANN001, ANN202
    """In place: keep, per ready op, its placed predecessors' lanes and one more valid lane -- the one that frees
    first, or with ``by_finish`` the one that would finish the op first -- ties to the lowest index.  With
    ``only_first`` keep one lane alone: of those that would finish the op first, the one holding most of its input
    bytes."""
    b_count, n, n_lanes = mask.shape
    keep = np.zeros(n_lanes, np.bool_)
    key_of = np.empty(n_lanes)
    for b in range(b_count):
        for v in range(n):
            first, best = -1, np.inf
            for ln in range(n_lanes):
                if not mask[b, v, ln]:
                    continue
                key = lane_free[b, ln]
                if by_finish:
                    u = lane_unit[ln]
                    key = _arrival(b, v, u, key, lane, finish, lane_unit, pred_ptr, pred_idx, ebytes, lat, inv) \
                        + dur[v, u]
                key_of[ln] = key
                if first < 0 or key < best:
                    first, best = ln, key
            if first < 0:
                continue
            keep[:] = False
            if only_first:
                # the earliest-finishing lanes; among equals the one holding most of the op's input bytes
                top, top_bytes = first, -1.0
                for ln in range(n_lanes):
                    if not mask[b, v, ln] or key_of[ln] > best:
                        continue
                    held = 0.0
                    for k in range(pred_ptr[v], pred_ptr[v + 1]):
                        if lane[b, pred_idx[k]] == ln:
                            held += ebytes[k] + 1e-9
                    if held > top_bytes:
                        top, top_bytes = ln, held
                keep[top] = True
            else:
                keep[first] = True
                for k in range(pred_ptr[v], pred_ptr[v + 1]):
                    keep[lane[b, pred_idx[k]]] = True
            for ln in range(n_lanes):
                mask[b, v, ln] = mask[b, v, ln] and keep[ln]


class ScheduleEnv:
    """``batch`` partial schedules of one problem (see module docstring)."""

    def __init__(self, problem: ms.MakespanProblem, batch: int, arrays: EnvArrays | None = None,
                 actions: str = "all") -> None:
        a = arrays or env_arrays(problem)
        self.a, self.batch, self.actions = a, batch, check_actions(actions)
        n, n_lanes = a.n, len(a.lane_unit)
        self.placed = np.zeros((batch, n), np.bool_)
        self.indeg = np.tile(a.indeg, (batch, 1))
        self.lane = np.full((batch, n), -1, np.int64)
        self.start = np.zeros((batch, n))
        self.finish = np.zeros((batch, n))
        self.lane_free = np.zeros((batch, n_lanes))
        self.lane_last = np.full((batch, n_lanes), -1, np.int64)
        self.n_placed_succ = np.zeros((batch, n), np.int64)
        self.order = np.zeros((batch, n), np.int64)
        self.t = 0

    @property
    def n_lanes(self) -> int:
        return len(self.a.lane_unit)

    @property
    def done(self) -> bool:
        return self.t >= self.a.n

    def observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(node (B, n, 4), pair (B, n, L, 4), mask (B, n, L))`` of the current states, float32 / bool."""
        a, b, n, n_lanes = self.a, self.batch, self.a.n, self.n_lanes
        node = np.zeros((b, n, N_NODE), np.float32)
        pair = np.zeros((b, n, n_lanes, N_PAIR), np.float32)
        mask = np.zeros((b, n, n_lanes), np.bool_)
        _features(self.placed, self.indeg, self.lane, self.start, self.finish, self.lane_free, self.lane_last,
                  self.n_placed_succ, a.allowed, a.lane_unit, a.dur, a.pred_ptr, a.pred_idx, a.ebytes, a.lat,
                  a.inv, a.scale, a.mean_dur, node, pair, mask)
        if self.actions != "all":
            _narrow(mask, self.actions in ("list", "finish"), self.actions == "finish", self.lane, self.lane_free,
                    self.finish, a.lane_unit, a.dur,
                    a.pred_ptr, a.pred_idx, a.ebytes, a.lat, a.inv)
        return node, pair, mask

    def step(self, action: np.ndarray) -> np.ndarray:
        """Apply flat actions ``op * L + lane`` (one per trajectory); return ``log P_B`` of the step (uniform
        over the removable ops; 0 with narrowed actions)."""
        action = np.asarray(action, np.int64)
        ops, lns = action // self.n_lanes, action % self.n_lanes
        a = self.a
        parents = _step(ops, lns, self.placed, self.indeg, self.lane, self.start, self.finish, self.lane_free,
                        self.lane_last, self.n_placed_succ, a.lane_unit, a.dur, a.pred_ptr, a.pred_idx, a.succ_ptr,
                        a.succ_idx, a.ebytes, a.lat, a.inv)
        self.order[:, self.t] = ops
        self.t += 1
        if self.actions != "all":
            return np.zeros(len(ops))  # one parent per state (module docstring)
        return -np.log(parents.astype(np.float64))

    def makespans(self) -> np.ndarray:
        return self.finish.max(axis=1) if self.a.n else np.zeros(self.batch)

    def speedups(self) -> np.ndarray:
        """Proxy speedup ``U(x)`` of each finished schedule (paper 002, 2.3)."""
        m = self.makespans()
        return np.where(m > 0, self.a.total_work / np.maximum(m, 1e-300), 1.0)

    def chains(self) -> Chains:
        return Chains(self.lane.copy(), self.order.copy())
