"""``partition-dfs``: graph partitioning, then a depth-first schedule (paper 003's "GP + DFS" baseline).

Two partitions are tried and the better kept: recursive Kernighan-Lin bisection
(networkx) of the op graph with edges weighted by the bytes they carry, so few
bytes cross devices; and the depth-first order cut into contiguous pieces of equal
activation bytes, one per device.  Both are scheduled in depth-first order
(:func:`onnx_sched.dag.dfs_order`), each transfer as soon as its tensor exists.
Kernighan-Lin is skipped above ``max_kl_ops`` ops (option; default 3000).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from onnx_sched.cost import device_memory as dm
from onnx_sched.dag import dfs_order
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory._common import make_schedule, problem_of
from onnx_sched.schedule import Schedule

__all__ = ["contiguous_partition", "kl_partition", "run"]


def kl_partition(problem: dm.DeviceMemoryProblem, seed: int) -> np.ndarray:
    """Device per op by recursive min-cut bisection (Kernighan-Lin), edge weight = bytes carried."""
    g = problem.graph
    und = nx.Graph()
    und.add_nodes_from(range(g.n_ops))
    size = problem.arrays.size
    ptr, idx = problem.consumers
    for t in range(g.n_tensors):
        u = int(g.tensor_producer[t])
        if u < 0:
            continue
        for v in idx[ptr[t]: ptr[t + 1]]:
            w = float(size[t]) + 1.0
            prev = und.get_edge_data(u, int(v), {"weight": 0.0})["weight"]
            und.add_edge(u, int(v), weight=prev + w)
    placement = np.zeros(g.n_ops, dtype=np.int64)
    _bisect(und, list(range(g.n_ops)), list(range(problem.n_devices)), placement, seed)
    return placement


def _bisect(und: nx.Graph, nodes: list[int], devices: list[int], placement: np.ndarray, seed: int) -> None:
    if len(devices) == 1 or len(nodes) < 2:
        placement[nodes] = devices[0]
        return
    half = len(devices) // 2
    a, b = nx.algorithms.community.kernighan_lin_bisection(und.subgraph(nodes), weight="weight", seed=seed)
    _bisect(und, sorted(a), devices[:half], placement, seed)
    _bisect(und, sorted(b), devices[half:], placement, seed)


def contiguous_partition(problem: dm.DeviceMemoryProblem, order: np.ndarray) -> np.ndarray:
    """Device per op: ``order`` cut into one piece per device with equal output bytes."""
    g = problem.graph
    out_bytes = np.zeros(g.n_ops)
    a = problem.arrays
    for j in range(g.n_ops):
        out_bytes[j] = a.size[a.out_idx[a.out_ptr[j]: a.out_ptr[j + 1]]].sum()
    cum = np.cumsum(out_bytes[order]) / max(out_bytes.sum(), 1.0)
    piece = np.minimum((cum * problem.n_devices).astype(np.int64), problem.n_devices - 1)
    placement = np.empty(g.n_ops, dtype=np.int64)
    placement[order] = piece
    return placement


def candidates(problem: dm.DeviceMemoryProblem, seed: int, max_kl_ops: int = 3000) -> dict[str, tuple[dm.Step, ...]]:
    """The steps of each partition, scheduled depth-first."""
    order = dfs_order(problem.graph)
    priority = np.empty(problem.graph.n_ops)
    priority[order] = -np.arange(problem.graph.n_ops, dtype=np.float64)
    placements = {"contiguous": contiguous_partition(problem, order)}
    if problem.graph.n_ops <= max_kl_ops:
        placements["kernighan-lin"] = kl_partition(problem, seed)
    return {name: dm.decode(problem, p, priority) for name, p in placements.items()}


@register("partition-dfs", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    found = candidates(problem, ctx.seed, int(ctx.option("max_kl_ops", 3000)))
    scored = {name: float(dm.fitness(problem, dm.walk(problem, steps).per_device_peak)[0])
              for name, steps in found.items()}
    best = min(scored, key=scored.__getitem__)
    return make_schedule(problem, found[best], "partition-dfs", partition=best)
