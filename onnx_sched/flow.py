"""Maximum flow and minimum cut (Dinic's algorithm) over flat arrays, in numba.

A network is edges in pairs: edge ``e`` and its reverse ``e ^ 1``; ``head[e]`` is the node
``e`` enters, ``cap[e]`` its (residual) capacity, and ``adj_edge[adj_ptr[u]:adj_ptr[u + 1]]``
the edges leaving ``u``.  :func:`flow_arrays` builds them from (tail, head, capacity)
triples; :func:`min_cut` returns a minimum s-t cut's value and the nodes on its source side
(the smallest or the largest source side of any minimum cut).  Used by the min-cut memory bound
(:mod:`onnx_sched.cost.memory_cut_bound`; probing and the pattern bound re-use its residual networks)
and by the two-device latency optimum (:func:`onnx_sched.passes.placement._optimal.mincut_placement`).

Example:
    >>> value, side = min_cut(4, 0, 3, [0, 0, 1, 2, 1], [1, 2, 3, 3, 2], [3, 2, 2, 3, 1])
    >>> int(value), side.tolist()
    (5, [True, False, False, False])
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

__all__ = ["flow_arrays", "max_flow", "min_cut", "residual_levels"]


def flow_arrays(n_nodes: int, tails: Sequence[int] | np.ndarray, heads: Sequence[int] | np.ndarray,
                caps: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(adj_ptr, adj_edge, head, cap)`` of the network with an edge ``tails[i] -> heads[i]`` of capacity
    ``caps[i]`` (int64) for each ``i``: edge ``2 i``, its reverse (capacity 0) ``2 i + 1``."""
    t, h = np.asarray(tails, np.int64), np.asarray(heads, np.int64)
    tail = np.stack([t, h], axis=1).ravel()
    head = np.stack([h, t], axis=1).ravel()
    cap = np.stack([np.asarray(caps, np.int64), np.zeros(len(t), np.int64)], axis=1).ravel()
    adj_ptr = np.zeros(n_nodes + 1, np.int64)
    np.cumsum(np.bincount(tail, minlength=n_nodes), out=adj_ptr[1:])
    return adj_ptr, np.argsort(tail, kind="stable").astype(np.int64), head, cap


def min_cut(n_nodes: int, s: int, t: int, tails: Sequence[int] | np.ndarray, heads: Sequence[int] | np.ndarray,
            caps: Sequence[int] | np.ndarray, largest: bool = False) -> tuple[int, np.ndarray]:
    """A minimum ``s``-``t`` cut of the network of :func:`flow_arrays`: its value and the nodes on its source side
    (bool per node).  Of all minimum cuts, the one with the smallest source side (what the residual network
    reaches from ``s``), or with ``largest`` the largest (every node that cannot reach ``t``; networkx's
    ``minimum_cut`` returns that one)."""
    adj_ptr, adj_edge, head, cap = flow_arrays(n_nodes, tails, heads, caps)
    value = max_flow(n_nodes, s, t, adj_ptr, adj_edge, head, cap)
    level, queue = np.empty(n_nodes, np.int64), np.empty(n_nodes, np.int64)
    if largest:
        # what reaches t: breadth-first from t, edge e (leaving w for head[e]) usable when its reverse e ^ 1
        # (head[e] -> w) has residual capacity
        residual_levels(t, adj_ptr, adj_edge, head, cap[np.arange(len(cap)) ^ 1], level, queue)
        return int(value), level < 0
    residual_levels(s, adj_ptr, adj_edge, head, cap, level, queue)
    return int(value), level >= 0


@numba.njit(cache=True, inline="always")
def residual_levels(s, adj_ptr, adj_edge, head, cap, level, queue):  # noqa: ANN001, ANN201
    """Breadth-first distances from ``s`` over edges with residual capacity (-1: unreachable)."""
    level[:] = -1
    level[s] = 0
    qh, qt = 0, 1
    queue[0] = s
    while qh < qt:
        u = queue[qh]
        qh += 1
        for k in range(adj_ptr[u], adj_ptr[u + 1]):
            e = adj_edge[k]
            w = head[e]
            if cap[e] > 0 and level[w] < 0:
                level[w] = level[u] + 1
                queue[qt] = w
                qt += 1


@numba.njit(cache=True)
def max_flow(n_nodes, s, t, adj_ptr, adj_edge, head, cap):  # noqa: ANN001, ANN202
    """Dinic's algorithm; ``cap`` becomes the residual capacities.  Returns the flow value."""
    level = np.empty(n_nodes, np.int64)
    it = np.empty(n_nodes, np.int64)
    queue = np.empty(n_nodes, np.int64)
    path = np.empty(n_nodes, np.int64)
    flow = 0
    while True:
        residual_levels(s, adj_ptr, adj_edge, head, cap, level, queue)
        if level[t] < 0:
            return flow
        it[:] = adj_ptr[:-1]
        while True:  # augmenting paths in the level graph, with current-arc pointers
            u, depth = s, 0
            while u != t:
                moved = False
                while it[u] < adj_ptr[u + 1]:
                    e = adj_edge[it[u]]
                    w = head[e]
                    if cap[e] > 0 and level[w] == level[u] + 1:
                        path[depth] = e
                        depth += 1
                        u = w
                        moved = True
                        break
                    it[u] += 1
                if not moved:
                    if depth == 0:
                        break
                    level[u] = -1  # dead end: never enter it again this phase
                    depth -= 1
                    u = head[path[depth] ^ 1]
                    it[u] += 1
            if u != t:
                break
            f = cap[path[0]]
            for i in range(1, depth):
                if cap[path[i]] < f:
                    f = cap[path[i]]
            for i in range(depth):
                cap[path[i]] -= f
                cap[path[i] ^ 1] += f
            flow += f
