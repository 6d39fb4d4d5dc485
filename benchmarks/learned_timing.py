"""Run time of the learned peak-memory pass: median of repeated calls per graph size (issue 4's speed targets).

The ``learned`` pass is timed end to end as ``optimize`` runs it: graph features,
the ONNX Runtime encoder and numpy/numba decoding.  For each size the first test
graph (seed 10000) is ordered ``--repeats`` times per decoder after ``--warmup``
calls, and the median wall time is reported next to the targets (greedy under
1 s and sample-16 under 2 s at 1000 ops).  Every call builds its inputs afresh;
only the ONNX Runtime session and compiled kernels are reused, as in a long-lived
compiler process.

    python benchmarks/learned_timing.py --sizes 500 1000 2000 --repeats 10 --out docs/learned_timing.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from learned import TEST_SEED0, _run

from onnx_sched.synth.layered import layered_graph

DECODERS = (("greedy", {}), ("sample-16", {"samples": 16}), ("beam-16", {"beam": 16}))
TARGETS_S = {"greedy": 1.0, "sample-16": 2.0}  # at 1000 ops (issue 4)


def time_pass(graph, options: dict, repeats: int, warmup: int) -> list[float]:  # noqa: ANN001
    """Wall times of ``repeats`` calls of the learned pass on ``graph`` after ``warmup`` untimed calls."""
    return [_run("learned", options, graph, i, 600.0)[1] for i in range(warmup + repeats)][warmup:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--model", default=None, help="ONNX checkpoint (default: the shipped one)")
    ap.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = ap.parse_args(argv)
    extra = {"model": args.model} if args.model else {}
    rows = []
    for n in args.sizes:
        g = layered_graph(n, TEST_SEED0)
        for name, opts in DECODERS:
            times = time_pass(g, {**opts, **extra}, args.repeats, args.warmup)
            rows.append({"n_ops": n, "decoder": name, "median_s": statistics.median(times), "min_s": min(times),
                         "max_s": max(times), "times_s": times})
    table = Table(title=f"learned pass, median of {args.repeats} calls (graph seed {TEST_SEED0})")
    for col in ("ops", "decoder", "median s", "min s", "max s", "target at 1000 ops"):
        table.add_column(col, justify="right")
    for r in rows:
        target = TARGETS_S.get(r["decoder"])
        table.add_row(str(r["n_ops"]), r["decoder"], f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['max_s']:.3f}",
                      f"< {target:g} s" if target and r["n_ops"] == 1000 else "")
    Console(width=160).print(table)
    if args.out is not None:
        meta = {"cpu_count": os.cpu_count(), "python": sys.version.split()[0], "repeats": args.repeats, "warmup": args.warmup}
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
