"""``local-search``: hill climbing on the chromosome, at the same evaluation budget as BRKGA
(paper 003's "Local Search" baseline).

Starts from the better of all ops on the host in input order and the
partition + DFS solutions.  Each round draws ``neighbours`` (option, default 50)
single-gene moves -- an op to another device, a new priority for one op or one
transfer -- scores them in one batch and takes the best if it improves; stops at
``evaluations`` (default 5,000) or the time limit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnx_sched.brkga import BrkgaParams, Settle
from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory import partition_dfs
from onnx_sched.passes.device_memory._common import keys_for, problem_of, schedule_of_keys, score_keys, solve
from onnx_sched.schedule import Schedule

__all__ = ["TIDY_EVALUATIONS", "climb", "one_device_evaluations", "peak_or_bytes", "prefer_one_device", "run",
           "start_keys", "tidy_transfers"]

#: Evaluations ``brkga``, ``tuned-brkga`` and ``regal`` spend after their search on moving fewer bytes between
#: devices at the same peak (their option ``tidy``; 0 turns it off).
TIDY_EVALUATIONS = 10_000
#: Seconds per op that :func:`start_keys` takes (measured 5-54 us on graphs of 122-20,001 ops: it decodes each
#: partition step by step); ``tidy``'s BRKGA, which starts from them, runs only when twice that is left.
START_KEYS_SECONDS_PER_OP = 60e-6


def start_keys(problem: dm.DeviceMemoryProblem, seed: int) -> np.ndarray:
    """Chromosomes of the simple solutions: host only in input order, then the partitions."""
    n = problem.graph.n_ops
    rows = [keys_for(problem, np.zeros(n, dtype=np.int64), np.arange(n))]
    for steps in partition_dfs.candidates(problem, seed).values():
        rows.append(keys_for(problem, dm.placement_of(n, steps), dm.op_order(steps)))
    return np.stack(rows)


def _any_gene(problem: dm.DeviceMemoryProblem, best: np.ndarray, count: int,
              rng: np.random.Generator) -> np.ndarray:
    """``count`` copies of ``best``, each with one random gene moved: an op to a random device (its affinity becomes the
    largest), or a new priority for one op or one transfer."""
    n, nd = problem.graph.n_ops, problem.n_devices
    cand = np.repeat(best[None, :], count, axis=0)
    for r, gene in enumerate(rng.integers(0, len(best), size=count)):
        if gene < n * nd:
            op = gene // nd
            cand[r, op * nd: op * nd + nd] = 0.0
            cand[r, op * nd + rng.integers(nd)] = 1.0
        else:
            cand[r, gene] = rng.random()
    return cand


def climb(problem: dm.DeviceMemoryProblem, start: np.ndarray, evaluations: int, neighbours: int,
          rng: np.random.Generator, deadline: Deadline | None = None,
          fewer_transfers: bool = False,
          propose: Callable[[dm.DeviceMemoryProblem, np.ndarray, int, np.random.Generator], np.ndarray] = _any_gene,
          settle: Settle | None = None) -> tuple[np.ndarray, float, int]:
    """Best-of-sample hill climbing from ``start`` (one chromosome): each round scores ``neighbours`` moves of
    ``propose`` (default: one random gene) in one batch and takes the best if it improves; ``settle`` stops it
    early once the best is settled (:class:`~onnx_sched.brkga.Settle`); no round starts that the last one's time
    says would end past ``deadline`` (50 moves on a 14,237-op graph: 0.36 s a round); returns (keys, fitness,
    evaluations)."""
    if neighbours < 1:
        raise ValueError(f"local-search: neighbours must be >= 1, got {neighbours}")
    best = start.copy()
    best_fit = float(score_keys(problem, best, fewer_transfers)[0])
    used, flat, last = 1, 0, 0.0  # the last round's seconds: one that would end past the deadline does not start
    while used + neighbours <= evaluations and not (deadline is not None and deadline.left() <= last):
        if settle is not None and settle.done(best_fit, flat):
            break
        began = work_clock()
        cand = propose(problem, best, neighbours, rng)
        fit = score_keys(problem, cand, fewer_transfers)
        last = work_clock() - began
        used += neighbours
        k = int(np.argmin(fit))
        flat += 1
        if fit[k] < best_fit:
            best, best_fit, flat = cand[k], float(fit[k]), 0
    return best, best_fit, used


#: Share of the neighbour and segment moves (``tidy``, ``auto``'s last phase) that pick a neighbour's device (the
#: rest: any device).
TOWARD_NEIGHBOURS = 0.8
#: Share of the neighbour moves that carry the op's chain along (see :func:`_toward_neighbours`), and the chain's
#: longest reach each way.
CHAIN_SHARE, CHAIN_REACH = 0.5, 16


def _chain(graph: Graph, op: int, place: np.ndarray, rng: np.random.Generator) -> list[int]:
    """``op`` and the ops before and after it in a chain on its device (each link a single producer or consumer),
    up to a random reach of 1..:data:`CHAIN_REACH` each way."""
    group = [op]
    for step in (graph.preds, graph.succs):
        cur = op
        for _ in range(int(rng.integers(1, CHAIN_REACH + 1))):
            nxt = step(cur)
            if len(nxt) != 1 or place[nxt[0]] != place[op]:
                break
            cur = int(nxt[0])
            group.append(cur)
    return group


def _toward_neighbours(problem: dm.DeviceMemoryProblem, best: np.ndarray, count: int,
                       rng: np.random.Generator) -> np.ndarray:
    """``count`` copies of ``best``, each with one op moved, mostly onto the device of one of its producers or
    consumers, and half the time with its chain: only placement decides what crosses devices, a crossing
    disappears when both ends share one, and a chain moved op by op would pay two crossings at every step."""
    g, nd = problem.graph, problem.n_devices
    n = g.n_ops
    place = best[:n * nd].reshape(n, nd).argmax(axis=1)
    cand = np.repeat(best[None, :], count, axis=0)
    for r, op in enumerate(rng.integers(0, n, size=count)):
        near = np.concatenate([g.preds(op), g.succs(op)])
        device = place[near[rng.integers(len(near))]] if len(near) and rng.random() < TOWARD_NEIGHBOURS \
            else rng.integers(nd)
        for moved in (_chain(g, int(op), place, rng) if rng.random() < CHAIN_SHARE else [op]):
            cand[r, moved * nd: moved * nd + nd] = 0.0
            cand[r, moved * nd + device] = 1.0
    return cand


#: Longest run of consecutive ops (in the current schedule) one :func:`_segment` move places together.
SEGMENT_REACH = 128


def _segment(problem: dm.DeviceMemoryProblem, best: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` copies of ``best``, each with a run of consecutive ops of its schedule (2..:data:`SEGMENT_REACH`,
    log-uniform) put on one device, mostly the device of the op just before or after the run: a block with branches
    (an attention block, a cell) crosses devices wherever a chain move leaves part of it behind."""
    n, nd = problem.graph.n_ops, problem.n_devices
    place = best[:n * nd].reshape(n, nd).argmax(axis=1)
    order = dm.decode_op_order(problem, best)
    cand = np.repeat(best[None, :], count, axis=0)
    affinity = cand[:, :n * nd].reshape(count, n, nd)  # a view: writing it writes cand
    lengths = np.exp(rng.uniform(np.log(2), np.log(max(min(SEGMENT_REACH, n), 2)), size=count)).astype(np.int64)
    for r, length in enumerate(lengths.tolist()):
        start = int(rng.integers(0, max(n - length, 0) + 1))
        edge = start - 1 if rng.random() < 0.5 else start + length
        device = place[order[edge]] if 0 <= edge < n and rng.random() < TOWARD_NEIGHBOURS else rng.integers(nd)
        ops = order[start:start + length]
        affinity[r, ops] = 0.0
        affinity[r, ops, device] = 1.0
    return cand


def peak_or_bytes(problem: dm.DeviceMemoryProblem, best: np.ndarray, count: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Moves for climbing on (peak, bytes moved) at once, a third each: :func:`_any_gene` (a priority or any device:
    what lowers a peak), :func:`_toward_neighbours` (an op or its chain onto a neighbour's device) and
    :func:`_segment` (a run of consecutive scheduled ops onto one device): what crosses fewer tensors.  The climb of
    ``tidy`` and of ``auto``'s last phase."""
    third = count // 3
    return np.vstack([_any_gene(problem, best, third, rng), _toward_neighbours(problem, best, third, rng),
                      _segment(problem, best, count - 2 * third, rng)])


def one_device_evaluations(problem: dm.DeviceMemoryProblem) -> int:
    """The evaluations :func:`prefer_one_device` spends: ``keys`` and each device alone."""
    return problem.n_devices + 1


def prefer_one_device(problem: dm.DeviceMemoryProblem, keys: np.ndarray) -> np.ndarray:
    """``keys``, or the same priorities with every op on one device where that scores better on (peak, bytes
    moved): a split whose peak one device reaches in the same order only ships tensors for nothing."""
    n, nd = problem.graph.n_ops, problem.n_devices
    rows = np.repeat(keys[None, :], one_device_evaluations(problem), axis=0)
    for d in range(nd):
        rows[d + 1, :n * nd] = np.tile(np.eye(nd)[d], n)
    fit = score_keys(problem, rows, True)
    return rows[int(np.argmin(fit))]  # the first of equals: ``keys`` itself on a tie


def tidy_transfers(problem: dm.DeviceMemoryProblem, keys: np.ndarray, ctx: PassContext,
                   deadline: Deadline | None = None) -> tuple[np.ndarray, int]:
    """``keys`` climbed on (largest peak, bytes moved): the same peak or lower, fewer bytes between devices.

    Paper 003's methods score the peak alone, so among the many splits with the best peak they return
    whichever came first, often one that ships tensors back and forth for nothing (REGAL on the corpus, 3 devices:
    five times the bytes ``auto`` moves at the same peaks).  Half the budget goes to a BRKGA on (peak, bytes)
    whose first population holds ``keys`` and the simple solutions of :func:`start_keys` (other splits can reach
    the same peak with far fewer crossings; skipped, its half going to the climb, when the time left would
    hardly cover building them), the rest to hill climbing with the moves of :func:`peak_or_bytes`; last,
    :func:`prefer_one_device`.  Returns the keys and the evaluations spent (option ``tidy``, default
    :data:`TIDY_EVALUATIONS`; 0, or no time left: ``keys`` unchanged).
    """
    budget = int(ctx.option("tidy", TIDY_EVALUATIONS))
    if budget <= 0 or (deadline is not None and deadline.expired()):
        return keys, 0
    used = 0
    params = BrkgaParams(evaluations=budget // 2)
    starts = 2 * START_KEYS_SECONDS_PER_OP * problem.graph.n_ops
    if params.evaluations >= params.population and (deadline is None or deadline.left() > starts):
        result = solve(problem, params, seed=ctx.seed, deadline=deadline, fewer_transfers=True,
                       initial=np.vstack([keys, start_keys(problem, ctx.seed)]))
        keys, used = result.best_keys, result.evaluations
    last = one_device_evaluations(problem)
    tidied, _, climbed = climb(problem, keys, budget - used - last, 50, np.random.default_rng(ctx.seed), deadline,
                               fewer_transfers=True, propose=peak_or_bytes)
    return prefer_one_device(problem, tidied), used + climbed + last


@register("local-search", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    starts = start_keys(problem, ctx.seed)
    fit = dm.fitness(problem, dm.evaluate_keys(problem, starts))
    keys, _, used = climb(problem, starts[int(np.argmin(fit))], int(ctx.option("evaluations", 5000)) - len(starts),
                          int(ctx.option("neighbours", 50)), ctx.rng(), Deadline(ctx.time_limit))
    return schedule_of_keys(problem, keys, "local-search", evaluations=used + len(starts))
