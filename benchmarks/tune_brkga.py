"""Grid search of BRKGA's hyper-parameters on training graphs: paper 003's "Tuned BRKGA" baseline.

Tunes what the paper tunes -- elite bias, the two Beta parameters of the mutant
distribution, and the population / elite / children counts -- at the same
5,000-evaluation budget, on problems of ``--devices`` devices (default 2; the devices REGAL
trains with, :func:`~onnx_sched.models.training.regal_data.training_devices`) built from training-range
synthetic graphs (seeds below the test base of :mod:`onnx_sched.synth`, so they
never meet the test graphs).  The score of a setting is its mean ratio to
standard BRKGA 5K on the same graph (lower is better); the best setting is
written where the ``tuned-brkga`` pass reads it for that device count.

    python benchmarks/tune_brkga.py --graphs 10 --out models/checkpoints/tuned_brkga.json
    python benchmarks/tune_brkga.py --graphs 10 --devices 3 --out models/checkpoints/tuned_brkga_d3.json

The paper grid-searches 648 settings on 10,000 graphs; this grid has 27 settings
(3 elite biases x 3 Beta shapes x 3 population sizes), for this machine's 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from onnx_sched.brkga import BrkgaParams, GeneDistributions, brkga
from onnx_sched.cost import device_memory as dm
from onnx_sched.models.training.regal_data import training_devices
from onnx_sched.synth import generate

FAMILIES = ("er", "ws", "ba", "sbm", "layered")
ELITE_BIAS = (0.6, 0.7, 0.8)
BETA_SHAPES = ((1.0, 1.0), (0.5, 0.5), (2.0, 2.0))
POPULATIONS = ((50, 5, 35), (100, 10, 80), (200, 20, 150))


def training_problems(count: int, seed: int, min_ops: int, max_ops: int,
                      n_devices: int = 2) -> list[dm.DeviceMemoryProblem]:
    rng = np.random.default_rng(seed)
    problems = []
    for i in range(count):
        graph = generate(FAMILIES[i % len(FAMILIES)], int(rng.integers(min_ops, max_ops + 1)), 1_000 + i)
        problems.append(dm.DeviceMemoryProblem.build(graph, training_devices(n_devices)))
    return problems


def run_setting(problem: dm.DeviceMemoryProblem, bias: float, shape: tuple[float, float],
                sizes: tuple[int, int, int], evaluations: int, seed: int) -> float:
    n = dm.chromosome_size(problem)
    params = BrkgaParams(population=sizes[0], elites=sizes[1], children=sizes[2], elite_bias=bias,
                         evaluations=evaluations)
    dist = GeneDistributions(alpha=np.full(n, shape[0]), beta=np.full(n, shape[1]), rho=np.full(n, bias))
    return brkga(lambda k: dm.fitness(problem, dm.evaluate_keys(problem, k)), n, params, dist, seed=seed).best_fitness


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, default=10)
    ap.add_argument("--min-ops", type=int, default=100)
    ap.add_argument("--max-ops", type=int, default=300)
    ap.add_argument("--evaluations", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--devices", type=int, default=2,
                    help="devices per problem (the pass reads the file for its count)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    problems = training_problems(args.graphs, args.seed, args.min_ops, args.max_ops, args.devices)
    t0 = time.perf_counter()
    standard = [run_setting(p, 0.7, (1.0, 1.0), (100, 10, 80), args.evaluations, args.seed) for p in problems]
    rows = []
    grid = list(itertools.product(ELITE_BIAS, BETA_SHAPES, POPULATIONS))
    for bias, shape, sizes in track(grid, description="grid"):
        ratios = [run_setting(p, bias, shape, sizes, args.evaluations, args.seed) / s for p, s in zip(problems, standard)]
        rows.append({"elite_bias": bias, "alpha": shape[0], "beta": shape[1], "population": sizes[0],
                     "elites": sizes[1], "children": sizes[2], "mean_ratio_to_brkga": float(np.mean(ratios))})
    rows.sort(key=lambda r: r["mean_ratio_to_brkga"])
    table = Table(title=f"BRKGA grid on {len(problems)} training graphs (ratio to BRKGA 5K; lower is better)")
    for col in ("elite bias", "Beta", "population / elites / children", "mean ratio"):
        table.add_column(col, justify="right")
    for r in rows[:10]:
        table.add_row(f"{r['elite_bias']:.1f}", f"({r['alpha']:g}, {r['beta']:g})",
                      f"{r['population']} / {r['elites']} / {r['children']}", f"{r['mean_ratio_to_brkga']:.4f}")
    Console().print(table)
    command = "python benchmarks/tune_brkga.py " + " ".join(argv if argv is not None else sys.argv[1:])
    best = rows[0]
    args.out.write_text(json.dumps({"command": command, "seconds": time.perf_counter() - t0, "devices": args.devices,
                                    "graphs": [p.graph.name for p in problems], "evaluations": args.evaluations,
                                    "best": best, "grid": rows}, indent=2) + "\n")
    print(f"best: {best}; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
