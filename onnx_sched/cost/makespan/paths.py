"""Longest paths through a makespan problem: critical-path kernels, HEFT upward rank, lower bound.

``_downward`` (longest path from a source, the op included) and ``_upward``
(longest path to a sink, with mean transfer costs) are numba kernels over the
topological order.  They live in the cost model, not with the priority
heuristics of the passes, because the cost model needs them itself:
:func:`lower_bound` scores every result against the critical path, and
:func:`upward_rank` is the default list-scheduling priority of the concurrent
latency model (:func:`onnx_sched.cost.latency.concurrent_latency`).  The
priority rules built on them (CP, MOPNR, ...) are in
``onnx_sched.passes.makespan._priorities``.
"""

from __future__ import annotations

import numba
import numpy as np

from onnx_sched.cost.makespan.problem import MakespanProblem, _cached, _topo

__all__ = ["lower_bound", "upward_rank"]


@numba.njit(cache=True)
def _upward(topo, w, pred_ptr, pred_idx, ebytes, lat_bar, inv_bar):  # noqa: ANN001, ANN202
    n = len(w)
    rank = np.empty(n)
    best = np.zeros(n)
    for i in range(n - 1, -1, -1):
        v = topo[i]
        rank[v] = w[v] + best[v]
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[k]
            c = lat_bar + ebytes[k] * inv_bar + rank[v]
            if c > best[u]:
                best[u] = c
    return rank


@numba.njit(cache=True)
def _downward(topo, w, pred_ptr, pred_idx):  # noqa: ANN001, ANN202
    """Longest path from a source to each op, the op included."""
    n = len(w)
    out = np.empty(n)
    for i in range(n):
        v = topo[i]
        b = 0.0
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            if out[pred_idx[k]] > b:
                b = out[pred_idx[k]]
        out[v] = w[v] + b
    return out


def upward_rank(problem: MakespanProblem, durations: np.ndarray | None = None, comm: bool = True) -> np.ndarray:
    """HEFT upward rank: ``w(v) + max_succ (c(v, s) + rank(s))`` with mean durations and mean transfer cost.

    With ``comm=False`` (or no links) this is the critical-path length from the op to a sink.
    """
    w = problem.mean_durations() if durations is None else np.asarray(durations, np.float64)
    lat_bar, inv_bar = _mean_comm(problem) if (comm and problem.has_transfers) else (0.0, 0.0)
    preds = problem.graph.op_preds
    return _upward(_topo(problem), np.ascontiguousarray(w, np.float64), preds.indptr, preds.indices,
                   problem.edge_bytes, lat_bar, inv_bar)


def _mean_comm(problem: MakespanProblem) -> tuple[float, float]:
    """Mean latency and seconds-per-byte over ordered pairs of distinct units (HEFT's ``c-bar``)."""
    p = problem.n_units
    if p < 2:
        return 0.0, 0.0
    off = ~np.eye(p, dtype=bool)
    return float(problem.latency[off].mean()), float(problem.inv_bandwidth[off].mean())


def lower_bound(problem: MakespanProblem) -> float:
    """Max of the critical path (fastest units, no transfers) and work / capacity bounds.

    Work bounds: all work over all capacity, and for each unit the work of ops
    that can only run there over its capacity (per machine type, paper 001).
    """
    n = problem.n_ops
    if n == 0:
        return 0.0
    return float(_cached(problem, "_lower_bound", lambda: _lower_bound(problem)))


def _lower_bound(problem: MakespanProblem) -> float:
    mind = problem.min_durations()
    preds = problem.graph.op_preds
    cp = float(_downward(_topo(problem), mind, preds.indptr, preds.indices).max())
    work = mind * problem.demand
    total = float(work.sum()) / float(problem.capacity.sum())
    allowed = problem.allowed
    only = allowed.sum(axis=1) == 1
    per_unit = 0.0
    if only.any():
        unit = np.argmax(allowed, axis=1)
        for p in range(problem.n_units):
            sel = only & (unit == p)
            if sel.any():
                per_unit = max(per_unit, float(work[sel].sum()) / float(problem.capacity[p]))
    return max(cp, total, per_unit)
