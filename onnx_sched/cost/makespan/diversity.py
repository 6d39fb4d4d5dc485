"""Diversity of a set of chain schedules (paper 002, E.2): GED, d_inv and d_sen, average pairwise.

* **GED**: the chain graphs of two schedules (edge ``u -> v`` when ``v`` runs
  right after ``u`` on the same lane) as adjacency matrices; the number of
  entries in which they differ, divided by the total number of edges of both,
  in percent (0 = same chains, 100 = no chain edge in common).  Lanes are not
  labelled, so relabelling identical devices changes nothing.
* **d_inv**: the L2 distance between the two schedules' proxy start times
  (invariant to device labels).
* **d_sen**: the L2 distance between start times concatenated with a one-hot
  device placement (sensitive to device labels).

Callers pass start times in units of the mean op duration
(:func:`time_unit`), so graphs timed in seconds and synthetic graphs with
``U(0, 1)`` durations (paper 002's, mean 0.5) give comparable numbers; on the
latter d_inv is twice the paper's raw-time value.

Each metric is averaged over all pairs of the set.

>>> from onnx_sched.cost.makespan.chains import Chains
>>> c = Chains([[0, 0, 1], [0, 1, 1]], [[0, 1, 2], [0, 1, 2]])
>>> start = np.array([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
>>> d = diversity(c, start, n_lanes=2)
>>> d["ged"], d["d_inv"], round(d["d_sen"], 3)
(100.0, 0.0, 1.414)
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost.makespan.chains import Chains
from onnx_sched.int_sets import unique_ints

__all__ = ["chain_edges", "diversity", "time_unit"]


def time_unit(durations: np.ndarray) -> float:
    """The mean finite op duration: the unit start times are divided by before d_inv and d_sen."""
    finite = np.asarray(durations, np.float64)
    finite = finite[np.isfinite(finite)]
    return float(finite.mean()) if len(finite) and finite.mean() > 0 else 1.0


def chain_edges(chains: Chains) -> list[np.ndarray]:
    """Per schedule, its chain edges as sorted ``u * n + v`` codes."""
    k_count, n = chains.order.shape
    out = []
    for k in range(k_count):
        order, lane = chains.order[k], chains.lane[k]
        lane_seq = lane[order]
        sort = np.argsort(lane_seq, kind="stable")  # ops grouped by lane, each lane in run order
        ops, lanes = order[sort], lane_seq[sort]
        same = lanes[1:] == lanes[:-1]
        out.append(np.sort(ops[:-1][same] * n + ops[1:][same]))
    return out


def diversity(chains: Chains, start: np.ndarray, n_lanes: int) -> dict[str, float]:
    """Average pairwise GED (percent), d_inv and d_sen of the schedules (see module docstring; the placement
    of d_sen is each op's lane, one-hot over ``n_lanes``)."""
    k_count = len(chains)
    if k_count < 2:
        return {"ged": 0.0, "d_inv": 0.0, "d_sen": 0.0}
    edges = chain_edges(chains)
    start = np.asarray(start, np.float64)
    lane = np.asarray(chains.lane)
    if lane.size and not 0 <= lane.min() <= lane.max() < n_lanes:
        raise ValueError(f"diversity: lanes must lie in [0, {n_lanes}), got {lane.min()}..{lane.max()}")
    squares, moved = [], []  # per pair: squared start-time distance; ops on different lanes
    for i in range(k_count):
        squares.append(np.square(start[i + 1:] - start[i]).sum(axis=1))
        moved.append(np.count_nonzero(lane[i + 1:] != lane[i], axis=1))
    squares, moved = np.concatenate(squares), np.concatenate(moved)
    # an op on another lane differs in two entries of its one-hot placement: d_sen^2 = d_inv^2 + 2 * moved
    return {"ged": float(np.mean(_pairwise_ged(edges))), "d_inv": float(np.sqrt(squares).mean()),
            "d_sen": float(np.sqrt(squares + 2.0 * moved).mean())}


def _pairwise_ged(edges: list[np.ndarray]) -> np.ndarray:
    """GED (percent) of every pair ``i < j`` in row-major order: the edges two schedules share, all pairs at once
    as the product of the schedules-by-edges incidence matrix with its transpose."""
    from scipy.sparse import csr_matrix

    sizes = np.array([len(e) for e in edges], np.int64)
    codes, column = unique_ints(np.concatenate(edges), return_inverse=True)
    rows = np.repeat(np.arange(len(edges)), sizes)
    incidence = csr_matrix((np.ones(len(rows), np.int64), (rows, column)), shape=(len(edges), len(codes)))
    common = (incidence @ incidence.T).toarray()
    i, j = np.triu_indices(len(edges), 1)
    total = sizes[i] + sizes[j]
    return np.where(total > 0, 100.0 * (total - 2 * common[i, j]) / np.maximum(total, 1), 0.0)
