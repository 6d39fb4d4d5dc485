"""REGAL's ceiling: what paper 003's action space gives when the policy knows a near-optimal solution.

REGAL's policy can only shape BRKGA's per-gene Beta distributions (``k`` levels of mean and
variance per gene group, an elite bias per op; :mod:`onnx_sched.models.inference.regal`).  This
script asks how far 5,000 evaluations get with the best action a policy could hope to predict:
the *oracle action* read off a BRKGA 50K solution of the same problem (another seed,
``seed + 1000``, so it is as good as BRKGA 50K on average without being the run it is compared
with): :func:`~onnx_sched.models.inference.regal.solution_action` puts the mean level of every
affinity, op-priority and transfer-priority gene where the solution's gene is (ops and transfers
share the decoder's priority scale), at the lowest variance level.  If even this action left REGAL
5K below BRKGA 50K, no policy in this action space could pass Figure 5's claim on these problems.

Rows, each against BRKGA 5K of the same seed on the held-out synthetic problems of
``regal_eval.py``: the reference solution itself, the oracle action with ``k = 5`` (the paper's
levels) at the standard elite bias (0.7) and at 0.5, with ``k = 9`` and ``k = 17`` (finer means,
not in the paper) at 0.5, the shipped network, its feature prior, and BRKGA 50K.  The oracle rows read the
paper's 400-evaluation feature run (``--feature-evaluations``, as the results were measured); the network and prior
rows go through the pass, which since session 50 reads the checkpoint's own count (100) and 100 for the prior.

    python benchmarks/regal_ceiling.py --seeds 3 --out benchmarks/regal_ceiling.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from regal_eval import PASS, held_out_sets, score

from onnx_sched.brkga import BrkgaParams
from onnx_sched.cost import device_memory as dm
from onnx_sched.models.inference.regal import solution_action, solve_with_actions
from onnx_sched.models.inference.regal_features import PAPER_FEATURE_EVALUATIONS, prepare
from onnx_sched.models.training.regal_data import training_devices
from onnx_sched.passes.device_memory.brkga import solve

#: Oracle rows: (name, levels k, crossover level; 0 = elite bias 0.5, 2 of 5 = standard 0.7).
ORACLES = (("oracle-k5-rho0.7", 5, 2), ("oracle-k5-rho0.5", 5, 0), ("oracle-k9-rho0.5", 9, 0),
           ("oracle-k17-rho0.5", 17, 0))
#: Rows run through the passes exactly as regal_eval.py runs them.
PASS_ROWS = ("brkga-50k", "regal", "regal-prior")
#: The reference solution comes from BRKGA 50K with this seed offset.
REFERENCE_SEED = 1000


def run_problem(problem: dm.DeviceMemoryProblem, graph, seed: int,
                features: int = PAPER_FEATURE_EVALUATIONS) -> dict[str, float]:
    peaks = {"brkga-5k": score(graph, problem, *PASS["brkga-5k"], seed)[0]}
    for row in PASS_ROWS:
        peaks[row] = score(graph, problem, *PASS[row], seed)[0]
    reference = solve(problem, BrkgaParams(evaluations=50_000), seed=seed + REFERENCE_SEED)
    peaks["reference"] = reference.best_fitness
    inputs = prepare(problem, seed, pin=False, evaluations=features)
    for name, levels, crossover in ORACLES:
        actions = solution_action(problem, reference.best_keys, levels, crossover)
        result = solve_with_actions(problem, inputs, actions, 5000, seed, levels=levels)
        peaks[name] = min(result.best_fitness, inputs.warm.best_fitness)
    return peaks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synthetic", type=int, default=30, help="held-out synthetic problems (as regal_eval.py)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--feature-evaluations", type=int, default=PAPER_FEATURE_EVALUATIONS,
                    help="feature run of the oracle rows (default: the paper's 400, as the results were measured)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    graphs = held_out_sets(args.synthetic, [])["synthetic"]
    rows = ["reference", *(o[0] for o in ORACLES), *PASS_ROWS]
    peaks: dict[str, list[list[float]]] = {r: [] for r in ["brkga-5k", *rows]}
    for g in graphs:
        problem = dm.DeviceMemoryProblem.build(g, training_devices(args.devices))
        runs = [run_problem(problem, g, s, args.feature_evaluations) for s in range(args.seeds)]
        for r in peaks:
            peaks[r].append([run[r] for run in runs])
        base = np.array(peaks["brkga-5k"][-1])
        print(f"{g.name:22s} " + "  ".join(f"{r} {np.mean((base - np.array(peaks[r][-1])) / base) * 100:+6.2f}%"
                                           for r in rows), flush=True)
    base, big = np.array(peaks["brkga-5k"]), np.array(peaks["brkga-50k"])
    summary = {}
    for r in rows:
        p = np.array(peaks[r])
        summary[r] = {"improvement_pct": float(np.mean((base - p) / base) * 100),
                      "improvement_pct_std_over_seeds": float(np.std(np.mean((base - p) / base, axis=0) * 100)),
                      "ties_or_beats_brkga_5k": float(np.mean(p <= base)),
                      "brkga_50k_matches_or_beats": float(np.mean(big <= p))}
    print(f"\n{len(graphs)} held-out synthetic problems, {args.devices} devices, seeds 0-{args.seeds - 1}, 5,000 "
          "evaluations unless named; each against BRKGA 5K of the same seed\n")
    print("| row | % improvement over BRKGA 5K (std over seeds) | ties or beats BRKGA 5K "
          "| BRKGA 50K matches or beats |")
    print("|---|---|---|---|")
    for r in rows:
        s = summary[r]
        print(f"| {r} | {s['improvement_pct']:+.2f} ({s['improvement_pct_std_over_seeds']:.2f}) | "
              f"{s['ties_or_beats_brkga_5k']:.0%} | {s['brkga_50k_matches_or_beats']:.0%} |")
    if args.out:
        args.out.write_text(json.dumps({"command": "python benchmarks/regal_ceiling.py " + " ".join(
            sys.argv[1:] if argv is None else argv), "devices": args.devices, "graphs": [g.name for g in graphs],
            "peaks": peaks, "summary": summary, "seconds": time.perf_counter() - t0}, indent=1))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
