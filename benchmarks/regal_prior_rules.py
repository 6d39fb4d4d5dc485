"""Hand-written REGAL actions on the validation problems: how the feature prior was chosen.

REGAL's policy maps each op to levels of Beta distributions and an elite bias
(:mod:`onnx_sched.models.inference.regal`).  Before training, a few actions read
straight off the features were compared; the best became
:func:`~onnx_sched.models.inference.regal.feature_prior`, the target the policy
imitates before REINFORCE.  This script reruns that comparison on the *validation*
problems of ``onnx-sched train regal`` (30 synthetic graphs of 50-150 ops with
validation seeds, 2 noisy copies each of convnext_tiny and light_zfnet512), never on
the test problems, with seeds ``0 .. N-1``: each rule runs as REGAL does (feature run,
then BRKGA with the rule's distributions, 5,000 evaluations in all) against BRKGA 5K of
the same seed.  Rules:

* ``standard``: standard BRKGA's levels (REGAL's pipeline with an untrained action);
* ``prior``: :func:`feature_prior` (priority mean = expected position, elite bias 0.5);
* ``prior-rho-0.7``: the same priorities, standard elite bias;
* ``prior-reversed``: priority mean = 1 - expected position, elite bias 0.5;
* ``placement``: affinity means = the feature run's expected placement, elite bias 0.5;
* ``prior-xfer-asap`` / ``prior-xfer-late``: ``prior`` with every transfer gene of the op's outputs at the top /
  bottom mean level and the lowest variance (ops and transfers share the decoder's priority scale, so these run a
  transfer as soon as it can / only when nothing else is ready);
* ``prior-xfer-producer`` / ``prior-xfer-consumer``: the transfer genes at the priority level of the producing op /
  of its latest consumer (highest level among the consumers), lowest variance;
* ``elite`` / ``elite-var1``: :func:`solution_action` of the feature run's best chromosome (its modes encode that
  solution), at the lowest variance level / at least level 1.
* ``memory-order`` / ``memory-order-reversed`` (session 30): ``prior`` with each op's priority mean at its place in
  a single-device peak-memory order of the graph (the ``greedy`` pass of ``peak-mem``), first op at the top level /
  at the bottom, variance level 1: does the order that minimises one device's peak lead the split's search?

    python benchmarks/regal_prior_rules.py --seeds 3 --out benchmarks/regal_prior_rules.json

``--feature-evaluations`` sets the feature run (default the paper's 400, with which the rules above were compared;
session 50 chose one population, 100, on these problems) and ``--rules`` a comma list of the rules to run:

    python benchmarks/regal_prior_rules.py --seeds 8 --rules prior --feature-evaluations 100 --out /tmp/prior100.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from onnx_sched.brkga import BrkgaParams
from onnx_sched.cost import device_memory as dm
from onnx_sched.models.inference.regal import (
    LEVELS,
    STANDARD_LEVELS,
    feature_prior,
    solution_action,
    solve_with_actions,
    standard_action,
)
from onnx_sched.models.inference.regal_features import (
    PAPER_FEATURE_EVALUATIONS,
    RegalInputs,
    position_column,
    prepare,
)
from onnx_sched.models.training.regal_data import DEVICES, split_graphs
from onnx_sched.passes.device_memory.brkga import solve

ND = len(DEVICES)
PRIORITY_HEAD = 2 * ND


def _standard_rho(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a[:, -1] = STANDARD_LEVELS["crossover"]
    return a


def _reversed(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a[:, PRIORITY_HEAD] = LEVELS - 1 - a[:, PRIORITY_HEAD]
    return a


def _placement(inputs: RegalInputs) -> np.ndarray:
    a = feature_prior(inputs, ND)
    a[:, PRIORITY_HEAD] = STANDARD_LEVELS["mean"]
    share = inputs.x[:, position_column(ND) - ND:position_column(ND)]
    a[:, 0:2 * ND:2] = np.clip(np.rint(share * (LEVELS - 1)), 0, LEVELS - 1)
    return a


def _transfers(inputs: RegalInputs, level: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``prior`` with every op's transfer genes (groups ``D+1 .. 2D``) at mean ``level(prior action)``, variance 0."""
    a = feature_prior(inputs, ND)
    means = level(a)
    for d in range(ND):
        a[:, 2 * (ND + 1 + d)] = means
        a[:, 2 * (ND + 1 + d) + 1] = 0
    return a


def _latest_consumer(inputs: RegalInputs, a: np.ndarray) -> np.ndarray:
    own = a[:, PRIORITY_HEAD].copy()
    np.maximum.at(own, inputs.src, a[inputs.dst, PRIORITY_HEAD])
    return own


def _memory_order(problem: dm.DeviceMemoryProblem, inputs: RegalInputs, reverse: bool) -> np.ndarray:
    from onnx_sched.passes import PassContext, get_pass

    g = problem.graph
    order = np.asarray(get_pass("greedy", "peak-mem")(g, PassContext(time_limit=1.0)).order)
    place = np.empty(g.n_ops)
    place[order] = np.arange(g.n_ops) / max(g.n_ops - 1, 1)
    a = feature_prior(inputs, ND)
    a[:, PRIORITY_HEAD] = np.clip(np.rint((place if reverse else 1 - place) * (LEVELS - 1)), 0, LEVELS - 1)
    a[:, PRIORITY_HEAD + 1] = 1
    return a


def _elite(problem: dm.DeviceMemoryProblem, inputs: RegalInputs, variance: int) -> np.ndarray:
    a = solution_action(problem, inputs.warm.best_keys)
    a[:, 1:-1:2] = np.maximum(a[:, 1:-1:2], variance)
    return a


RULES: dict[str, Callable[[dm.DeviceMemoryProblem, RegalInputs], np.ndarray]] = {
    "standard": lambda p, i: standard_action(i.x.shape[0], ND),
    "prior": lambda p, i: feature_prior(i, ND),
    "prior-rho-0.7": lambda p, i: _standard_rho(feature_prior(i, ND)),
    "prior-reversed": lambda p, i: _reversed(feature_prior(i, ND)),
    "placement": lambda p, i: _placement(i),
    "prior-xfer-asap": lambda p, i: _transfers(i, lambda a: np.full(len(a), LEVELS - 1)),
    "prior-xfer-late": lambda p, i: _transfers(i, lambda a: np.zeros(len(a), dtype=np.int64)),
    "prior-xfer-producer": lambda p, i: _transfers(i, lambda a: a[:, PRIORITY_HEAD]),
    "prior-xfer-consumer": lambda p, i: _transfers(i, lambda a: _latest_consumer(i, a)),
    "elite": lambda p, i: _elite(p, i, 0),
    "elite-var1": lambda p, i: _elite(p, i, 1),
    "memory-order": lambda p, i: _memory_order(p, i, reverse=False),
    "memory-order-reversed": lambda p, i: _memory_order(p, i, reverse=True),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--feature-evaluations", type=int, default=PAPER_FEATURE_EVALUATIONS,
                    help="the feature run (default: the paper's 400, with which the prior was chosen; session 50: 100)")
    ap.add_argument("--rules", default=",".join(RULES), help="comma list of rules (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if unknown := set(args.rules.split(",")) - set(RULES) - {""}:
        ap.error(f"unknown rules {sorted(unknown)}; known: {', '.join(RULES)}")
    rules = {name: RULES[name] for name in args.rules.split(",") if name}
    graphs = split_graphs("validation", 30, 2, 50, 150, 0)  # as onnx-sched train regal's defaults build them
    peaks: dict[str, list[list[float]]] = {name: [] for name in ("brkga-5k", *rules)}
    t0 = time.perf_counter()
    for g in graphs:
        problem = dm.DeviceMemoryProblem.build(g, DEVICES)
        row: dict[str, list[float]] = {name: [] for name in peaks}
        for seed in range(args.seeds):
            row["brkga-5k"].append(solve(problem, BrkgaParams(evaluations=5000), seed=seed).best_fitness)
            inputs = prepare(problem, seed, pin=False, evaluations=args.feature_evaluations)
            for name, rule in rules.items():
                result = solve_with_actions(problem, inputs, rule(problem, inputs), 5000, seed)
                row[name].append(min(result.best_fitness, inputs.warm.best_fitness))
        for name, values in row.items():
            peaks[name].append(values)
        means = " ".join(f"{n} {np.mean(v) / 2**20:7.2f}" for n, v in row.items())
        print(f"{g.name:24s} {means} MiB", flush=True)
    base = np.array(peaks["brkga-5k"])
    summary = {}
    print(f"\nvalidation problems: {len(graphs)}, seeds 0-{args.seeds - 1}; vs BRKGA 5K of the same seed")
    for name in rules:
        p = np.array(peaks[name])
        summary[name] = {"improvement_pct": float(np.mean((base - p) / base) * 100),
                         "ties_or_beats": float(np.mean(p <= base))}
        print(f"  {name:15s} {summary[name]['improvement_pct']:+6.2f} %   "
              f"ties or beats {summary[name]['ties_or_beats']:.0%}")
    if args.out:
        args.out.write_text(json.dumps({"command": "python benchmarks/regal_prior_rules.py " + " ".join(
            sys.argv[1:] if argv is None else argv), "graphs": [g.name for g in graphs], "peaks": peaks,
            "summary": summary, "seconds": time.perf_counter() - t0}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
