"""``local-search``: hill climbing on the chromosome, at the same evaluation budget as BRKGA
(paper 003's "Local Search" baseline).

Starts from the better of all ops on the host in input order and the
partition + DFS solutions.  Each round draws ``neighbours`` (option, default 50)
single-gene moves -- an op to another device, a new priority for one op or one
transfer -- scores them in one batch and takes the best if it improves; stops at
``evaluations`` (default 5,000) or the time limit.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory import partition_dfs
from onnx_sched.passes.device_memory._common import keys_for, problem_of, schedule_of_keys, score_keys
from onnx_sched.schedule import Schedule

__all__ = ["TIDY_EVALUATIONS", "climb", "run", "start_keys", "tidy_transfers"]

#: Evaluations ``brkga``, ``tuned-brkga`` and ``regal`` spend after their search on moving fewer bytes between
#: devices at the same peak (their option ``tidy``; 0 turns it off).
TIDY_EVALUATIONS = 10_000


def start_keys(problem: dm.DeviceMemoryProblem, seed: int) -> np.ndarray:
    """Chromosomes of the simple solutions: host only in input order, then the partitions."""
    n = problem.graph.n_ops
    rows = [keys_for(problem, np.zeros(n, dtype=np.int64), np.arange(n))]
    for steps in partition_dfs.candidates(problem, seed).values():
        rows.append(keys_for(problem, dm.placement_of(n, steps), dm.op_order(steps)))
    return np.stack(rows)


def climb(problem: dm.DeviceMemoryProblem, start: np.ndarray, evaluations: int, neighbours: int,
          rng: np.random.Generator, deadline: Deadline | None = None,
          fewer_transfers: bool = False) -> tuple[np.ndarray, float, int]:
    """Best-of-sample hill climbing from ``start`` (one chromosome); returns (keys, fitness, evaluations)."""
    n, nd = problem.graph.n_ops, problem.n_devices
    best = start.copy()
    best_fit = float(score_keys(problem, best, fewer_transfers)[0])
    used = 1
    size = len(best)
    while used + neighbours <= evaluations and not (deadline is not None and deadline.expired()):
        cand = np.repeat(best[None, :], neighbours, axis=0)
        genes = rng.integers(0, size, size=neighbours)
        for r, gene in enumerate(genes):
            if gene < n * nd:  # move the op to a random device: its affinity becomes the largest
                op = gene // nd
                cand[r, op * nd: op * nd + nd] = 0.0
                cand[r, op * nd + rng.integers(nd)] = 1.0
            else:
                cand[r, gene] = rng.random()
        fit = score_keys(problem, cand, fewer_transfers)
        used += neighbours
        k = int(np.argmin(fit))
        if fit[k] < best_fit:
            best, best_fit = cand[k], float(fit[k])
    return best, best_fit, used


def tidy_transfers(problem: dm.DeviceMemoryProblem, keys: np.ndarray, ctx: PassContext,
                   deadline: Deadline | None = None) -> tuple[np.ndarray, int]:
    """``keys`` climbed on (largest peak, bytes moved): the same peak or lower, fewer bytes between devices.

    Paper 003's methods score the peak alone, so among the many splits with the best peak they return
    whichever came first, often one that ships tensors back and forth for nothing (REGAL on the corpus, 3 devices:
    five times the bytes ``auto`` moves at the same peaks).  Returns the keys and the evaluations spent
    (option ``tidy``, default :data:`TIDY_EVALUATIONS`; 0: ``keys`` unchanged).
    """
    budget = int(ctx.option("tidy", TIDY_EVALUATIONS))
    if budget <= 0:
        return keys, 0
    tidied, _, used = climb(problem, keys, budget, 50, np.random.default_rng(ctx.seed), deadline, fewer_transfers=True)
    return tidied, used


@register("local-search", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    starts = start_keys(problem, ctx.seed)
    fit = dm.fitness(problem, dm.evaluate_keys(problem, starts))
    keys, _, used = climb(problem, starts[int(np.argmin(fit))], int(ctx.option("evaluations", 5000)) - len(starts),
                          int(ctx.option("neighbours", 50)), ctx.rng(), Deadline(ctx.time_limit))
    return schedule_of_keys(problem, keys, "local-search", evaluations=used + len(starts))
