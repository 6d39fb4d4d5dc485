"""The cheap peak-memory heuristics run together (seeds for ``exact`` and ``auto``)."""

from __future__ import annotations

import numpy as np

from onnx_sched.dag import is_topological_order
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes.order._common import peak_of
from onnx_sched.passes.order.bfs import bfs_order
from onnx_sched.passes.order.dfs import dfs_order
from onnx_sched.passes.order.greedy import greedy_order
from onnx_sched.passes.order.xla_dfs import xla_dfs_order

__all__ = ["best_of", "cheap_orders"]


def cheap_orders(graph: Graph, inplace: bool, deadline: Deadline | None = None) -> dict[str, np.ndarray]:
    """Orders of the linear-time heuristics (file order only when it is topological).

    With ``deadline``, no further heuristic starts once it has expired (on huge graphs
    with small budgets each one costs a second); at least one order is always returned.
    """
    out: dict[str, np.ndarray] = {}
    ident = np.arange(graph.n_ops, dtype=np.int64)
    if is_topological_order(graph, ident):
        out["file"] = ident
    heuristics = (("greedy", lambda: greedy_order(graph, inplace)), ("dfs", lambda: dfs_order(graph)),
                  ("xla_dfs", lambda: xla_dfs_order(graph)), ("bfs", lambda: bfs_order(graph)))
    for name, make in heuristics:
        if out and deadline is not None and deadline.expired():
            break
        out[name] = make()
    return out


def best_of(graph: Graph, orders: dict[str, np.ndarray], inplace: bool) -> tuple[str, np.ndarray, int]:
    """(name, order, peak) of the order with the lowest peak; first listed wins ties."""
    best: tuple[str, np.ndarray, int] | None = None
    for name, order in orders.items():
        peak = peak_of(graph, order, inplace)
        if best is None or peak < best[2]:
            best = (name, order, peak)
    if best is None:
        raise ValueError("best_of: no orders given")
    return best
