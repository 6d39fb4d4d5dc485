"""``auto``: the multi-device memory portfolio within the time limit.

All ops on the host in input order (what a result must beat), the partition +
DFS solutions and the best of a REGAL run (the shipped policy for the device count, else its feature prior; at most
``REGAL_SHARE`` of the time), then BRKGA seeded with them (known good solutions in the first
population, paper 003 section 3.2) for most of the time; then, on graphs CP-SAT
can take (``cpsat_max_ops``, default 60), the exact CP-SAT model hinted with
BRKGA's best, which may prove it optimal; else (or when BRKGA's best already meets the lower bound) hill climbing
from BRKGA's best, its moves a third on the
peak (a priority or a device), two thirds on the bytes moved (an op or its chain onto a neighbour's device, or a run
of consecutive scheduled ops onto one device), and every op on one device in the same order where that scores better
on (peak, bytes moved).
Unlike the paper's baselines, auto breaks ties of equal peak by fewer bytes moved between
devices, so a split does not keep transfers it does not need.
Once the peak meets the lower bound (proven optimal), BRKGA and the climb stop as soon as they go
``SETTLE_GENERATIONS`` generations / ``SETTLE_ROUNDS`` rounds without moving fewer bytes, so a
proven split does not keep the user waiting for the rest of the time limit.
Options: ``evaluations`` caps BRKGA (default: no cap, the time limit stops it); ``regal`` (default true) runs the
REGAL seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from onnx_sched.brkga import BrkgaParams
from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory import brkga as brkga_pass
from onnx_sched.passes.device_memory import cpsat
from onnx_sched.passes.device_memory._common import at_lower_bound, problem_of, schedule_of_keys
from onnx_sched.passes.device_memory.local_search import (
    climb,
    one_device_evaluations,
    peak_or_bytes,
    prefer_one_device,
    start_keys,
)
from onnx_sched.schedule import Schedule

#: Share of the time limit BRKGA gets; CP-SAT or hill climbing gets the rest.
BRKGA_SHARE = 0.6
#: Share of the time limit the REGAL run that seeds BRKGA may take at most, and its evaluation budget (paper 003's).
REGAL_SHARE, REGAL_EVALUATIONS = 0.3, 5000
#: At the lower bound: generations of BRKGA and rounds of the climb without fewer bytes moved before each stops.
SETTLE_GENERATIONS, SETTLE_ROUNDS = 1000, 2000


def _regal_seed(problem: dm.DeviceMemoryProblem, seed: int, deadline: Deadline) -> tuple[np.ndarray, int]:
    """The best chromosome of a REGAL run (the shipped policy for the device count, else the feature prior) and the
    evaluations it spent: on large graphs its learned gene distributions reach far lower peaks than uniform BRKGA in
    the same time."""
    from onnx_sched.models.inference.regal import checkpoint_for, load_policy, run_regal

    policy = load_policy(None, problem.n_devices) if checkpoint_for(problem.n_devices).is_file() else None
    found = run_regal(problem, policy, REGAL_EVALUATIONS, seed=seed, deadline=deadline)
    return found.best_keys[None, :], found.evaluations


@register("auto", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    clock = Deadline(ctx.time_limit)
    seeds, seeding = start_keys(problem, ctx.seed), 0
    if ctx.flag("regal", True):
        found, seeding = _regal_seed(problem, ctx.seed, Deadline(max(clock.left(), 0.0) * REGAL_SHARE))
        seeds = np.vstack([seeds, found])
    params = brkga_pass.params_from(ctx, BrkgaParams(evaluations=int(ctx.option("evaluations", 10**9))))
    settle = at_lower_bound(problem, SETTLE_GENERATIONS)
    result = brkga_pass.solve(problem, params, seed=ctx.seed, initial=seeds, fewer_transfers=True,
                              deadline=Deadline(max(clock.left(), 0.0) * BRKGA_SHARE), settle=settle)
    proven = result.best_fitness <= settle.at  # at the lower bound: CP-SAT could not lower the peak, only burn time
    if graph.n_ops <= int(ctx.option("cpsat_max_ops", cpsat.DEFAULT_MAX_OPS)) and not proven:
        _, best = dm.decode_keys(problem, result.best_keys)
        return cpsat.improve(problem, best, "auto", time_limit=clock.left(), seed=ctx.seed,
                             evaluations=seeding + result.evaluations)
    keys, _, climbed = climb(problem, result.best_keys, 10**9, 50, np.random.default_rng(ctx.seed), clock,
                             fewer_transfers=True, propose=peak_or_bytes,
                             settle=dataclasses.replace(settle, patience=SETTLE_ROUNDS))
    keys = prefer_one_device(problem, keys)
    used = seeding + result.evaluations + climbed + one_device_evaluations(problem)
    return schedule_of_keys(problem, keys, "auto", evaluations=used, brkga_generations=result.generations)
