"""Can REGAL's features tell where a near-optimal solution puts each op?  Placement agreement, measured.

REGAL's policy reads per-op features that include the feature run's placement shares (the share of its population
that puts the op on each device) and predicts, per op, independent distributions for its genes.  Imitating the
action of a long BRKGA run's solution validates worse than the hand-written prior (docs/results.md 14.4, sessions 21
and 43).  This script measures the premise such imitation needs, on two devices, on the pool ``onnx-sched train
regal`` draws its validation problems from (120 synthetic graphs of 50-150 ops and 6 noisy copies of each of the two
validation corpus models; training validates on a quarter of the synthetic graphs and 2 copies):

* ``features vs scratch``: the share of ops whose most likely device in the feature run is the device a BRKGA run of
  ``--evaluations`` from scratch gives them (seed 1000, as ``--imitation-target best-known``);
* ``features vs seeded``: the same for a run of the same budget started from the feature run's elites (as
  ``--imitation-target seeded``, and as REGAL's own BRKGA starts);
* ``scratch vs scratch``: two scratch runs (seeds 1000 and 1001) against each other: how much two near-optimal
  solutions of one problem share, the most any per-op prediction could hope to match;
* ``aligned``: each agreement with the second solution's devices swapped where that agrees more (the mirror);
* the ratio of each solution's peak to standard BRKGA 5K's (seed 0).

    python benchmarks/regal_feature_agreement.py --out benchmarks/regal_feature_agreement.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from onnx_sched.brkga import BrkgaParams
from onnx_sched.cost import device_memory as dm
from onnx_sched.models.inference.regal_features import PAPER_FEATURE_EVALUATIONS
from onnx_sched.models.training.regal_data import make_instances, split_graphs
from onnx_sched.passes.device_memory.brkga import solve

PAIRS = ("features vs scratch", "features vs seeded", "scratch vs scratch")


def agreement(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Share of ops on the same device in placements ``a`` and ``b`` (two devices), as given and mirror-aligned.

    >>> agreement(np.array([0, 0, 1, 1]), np.array([1, 1, 0, 1]))
    (0.25, 0.75)
    """
    same = float((a == b).mean())
    return same, max(same, 1.0 - same)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=0, help="the first N validation problems (0: all)")
    ap.add_argument("--evaluations", type=int, default=50_000, help="budget of each reference solution's BRKGA run")
    ap.add_argument("--feature-evaluations", type=int, default=PAPER_FEATURE_EVALUATIONS,
                    help="the feature run (default: the paper's 400, as the results were measured)")
    ap.add_argument("--out", type=Path, default=None, help="JSON with every problem's row")
    args = ap.parse_args()

    start = time.time()
    graphs = split_graphs("validation", 120, 6, 50, 150, 0)  # train regal's defaults
    graphs = graphs[:args.problems] if args.problems else graphs
    instances = make_instances(graphs, 5000, lambda _: None, pin=False, seeds=1, n_devices=2,
                               feature_evaluations=args.feature_evaluations)
    elites = BrkgaParams().elites
    rows = []
    for inst in track(instances, description="reference solutions"):
        p = inst.problem
        features = inst.inputs.x[:, 3:5].argmax(axis=1)
        runs = {
            "scratch": solve(p, BrkgaParams(evaluations=args.evaluations), seed=1000),
            "scratch 2": solve(p, BrkgaParams(evaluations=args.evaluations), seed=1001),
            "seeded": solve(p, BrkgaParams(evaluations=args.evaluations), seed=1000,
                            initial=inst.inputs.warm.population[:elites]),
        }
        placement = {k: dm.decode_keys(p, r.best_keys)[0] for k, r in runs.items()}
        row = {"name": inst.name, "ops": p.graph.n_ops,
               **{f"{k} / BRKGA 5K": r.best_fitness / inst.standard for k, r in runs.items()}}
        for pair, (a, b) in zip(PAIRS, ((features, placement["scratch"]), (features, placement["seeded"]),
                                        (placement["scratch"], placement["scratch 2"]))):
            row[pair], row[f"{pair}, aligned"] = agreement(a, b)
        rows.append(row)

    table = Table(title=f"{len(rows)} validation problems, 2 devices, references of {args.evaluations:,} evaluations")
    table.add_column("ops on the same device")
    table.add_column("mean")
    table.add_column("mirror-aligned")
    for pair in PAIRS:
        table.add_row(pair, f"{np.mean([r[pair] for r in rows]):.3f}",
                      f"{np.mean([r[f'{pair}, aligned'] for r in rows]):.3f}")
    console = Console()
    console.print(table)
    for k in ("scratch", "scratch 2", "seeded"):
        console.print(f"{k}: peak / BRKGA 5K's {np.mean([r[f'{k} / BRKGA 5K'] for r in rows]):.3f}")
    console.print(f"{time.time() - start:.0f} s")
    if args.out:
        summary = {pair: float(np.mean([r[pair] for r in rows])) for pair in PAIRS}
        summary.update({f"{pair}, aligned": float(np.mean([r[f"{pair}, aligned"] for r in rows])) for pair in PAIRS})
        args.out.write_text(json.dumps({"evaluations": args.evaluations, "summary": summary, "rows": rows},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
