"""What the multi-device memory passes share: the problem from the context, chromosomes
for known placements, their fitness and BRKGA over it, and the :class:`Schedule` of a decoded solution.

Every pass returns ``Schedule(order=op steps, placement=device per op, steps=all
steps with transfers)``, scored by :mod:`onnx_sched.cost.device_memory`, with the
per-device peaks and the evaluation count in ``info``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from onnx_sched.brkga import BrkgaParams, BrkgaResult, GeneDistributions, Settle, brkga
from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.schedule import Schedule

__all__ = ["keys_for", "make_schedule", "problem_of", "schedule_of_keys", "score_keys", "solve"]


def problem_of(graph: Graph, ctx: Any) -> dm.DeviceMemoryProblem:
    """The :class:`DeviceMemoryProblem` in ``ctx.problem``, checked against ``graph``."""
    problem = getattr(ctx, "problem", None)
    if not isinstance(problem, dm.DeviceMemoryProblem):
        raise ValueError("multi-device memory passes need ctx.problem = DeviceMemoryProblem.build(graph, devices), "
                         f"got {type(problem).__name__}")
    if problem.graph.n_ops != graph.n_ops:
        raise ValueError(f"ctx.problem has {problem.graph.n_ops} ops, the graph {graph.n_ops}")
    return problem


def keys_for(problem: dm.DeviceMemoryProblem, placement: np.ndarray, order: np.ndarray) -> np.ndarray:
    """A chromosome that decodes to ``placement`` with ops in ``order`` wherever it is a valid
    topological order of the placed graph, each transfer as soon as its tensor exists."""
    n, nd = problem.graph.n_ops, problem.n_devices
    keys = np.zeros(dm.chromosome_size(problem))
    keys[np.arange(n) * nd + np.asarray(placement, dtype=np.int64)] = 1.0
    rank = np.empty(n)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(n)
    keys[n * nd: n * nd + n] = 1.0 - rank / max(n, 1) * 0.999  # earlier in order = higher priority, all < 1
    keys[n * nd + n:] = 1.0  # transfers before any op once ready
    return keys


def make_schedule(problem: dm.DeviceMemoryProblem, steps: Sequence[dm.Step], method: str, **info: Any) -> Schedule:
    """Wrap steps: walk them (validating), store per-device peaks in ``info``."""
    result = dm.walk(problem, steps)
    order, placement = dm.op_order(steps), dm.placement_of(problem.graph.n_ops, steps)
    meta = {"per_device_peak": {d: int(v) for d, v in zip(problem.devices, result.per_device_peak)},
            "transfers": sum(s.kind == "transfer" for s in steps), **info}
    return Schedule(order=order, method=method, placement=placement, steps=tuple(steps), info=meta)


def schedule_of_keys(problem: dm.DeviceMemoryProblem, keys: np.ndarray, method: str, **info: Any) -> Schedule:
    """The schedule a chromosome decodes to."""
    _, steps = dm.decode_keys(problem, keys)
    return make_schedule(problem, steps, method, **info)


def score_keys(problem: dm.DeviceMemoryProblem, keys: np.ndarray, fewer_transfers: bool = False) -> np.ndarray:
    """Fitness of each chromosome (lower is better); ``fewer_transfers`` breaks ties of equal peak
    by the bytes moved between devices (paper 003's objective is the peak alone)."""
    if not fewer_transfers:
        return dm.fitness(problem, dm.evaluate_keys(problem, keys))
    return dm.fitness(problem, *dm.evaluate_keys(problem, keys, transferred=True))


def solve(problem: dm.DeviceMemoryProblem, params: BrkgaParams, *, seed: int, deadline: Deadline | None = None,
          distributions: GeneDistributions | None = None, initial: np.ndarray | None = None,
          fewer_transfers: bool = False, settle: Settle | None = None) -> BrkgaResult:
    """Run BRKGA on the multi-device memory fitness (``fewer_transfers``: ties of equal peak go to
    the schedule moving fewer bytes; ``settle``: see :func:`onnx_sched.brkga.brkga`)."""
    return brkga(lambda keys: score_keys(problem, keys, fewer_transfers), dm.chromosome_size(problem),
                 params, distributions, seed=seed, initial=initial, deadline=deadline, settle=settle)


def at_lower_bound(problem: dm.DeviceMemoryProblem, patience: int) -> Settle:
    """Settled once the peak meets :func:`~onnx_sched.cost.device_memory.lower_bound` (proven optimal: only the
    bytes moved, which break ties below half a byte of fitness, can still improve) and ``patience`` rounds
    brought nothing better."""
    return Settle(at=dm.lower_bound(problem) + 0.5, patience=patience)
