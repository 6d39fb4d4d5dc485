"""The must-live lower bound on graphs beyond 10,000 ops: what it proves, and what it costs.

Up to session 46 the must-live bound (``onnx_sched/cost/memory_bound.py``) built the full transitive closure
and skipped graphs over 10,000 ops, which then got each op's own inputs + outputs as their bound: a
20,292-op layered graph showed a "gap to bound" of 5,231 %.  The closure is now built one block of ops at a
time, in bounded memory, up to a work cap (``MAX_BOUND_WORK``).  For each generated graph (``onnx-sched
gen``-style, test seeds, written as ONNX and read back like a user's model) this runs ``auto`` for peak memory
through the API twice, with the fallback bound (``MAX_BOUND_WORK = -1``, what such a graph got before) and with
the must-live bound, and prints the bound, its seconds, the peak found, the gap and whether it is a proof.

    python benchmarks/large_bounds.py --graphs layered:20000 transformer:20000 ws:12000 sbm:4000 er:10000 \\
        --time-limit 10 --out docs/large_bounds.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx
from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.cost import memory_bound, memory_cut_bound
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.synth import TEST_SEED_BASE, generate
from onnx_sched.synth.onnx_writer import graph_to_onnx

MIB = 2**20


def write_graph(family: str, n: int, work: Path) -> Path:
    """``family`` with ``n`` ops (seed ``TEST_SEED_BASE + 200``) as an ONNX file, as ``onnx-sched gen`` writes it."""
    path = work / f"{family}-{n}.onnx"
    onnx.save(graph_to_onnx(generate(family, n, TEST_SEED_BASE + 200), name=f"{family}-{n}"), path)
    return path


def forget_bounds() -> None:
    """Drop the bounds remembered per graph, so the next run computes its own."""
    memory_bound._op_lower_bounds_cached.cache_clear()
    memory_cut_bound._complete.clear()


def run_auto(path: Path, time_limit: float, work_cap: int) -> dict:
    """``auto`` on ``path`` with ``MAX_BOUND_WORK = work_cap``: the bound (and its seconds) and the result."""
    saved = memory_bound.MAX_BOUND_WORK
    memory_bound.MAX_BOUND_WORK = work_cap
    try:
        forget_bounds()
        graph = import_onnx(path).graph
        t0 = time.perf_counter()
        bound = memory_bound.lower_bound(graph)
        bound_s = time.perf_counter() - t0
        forget_bounds()
        report = optimize_model(path, "peak-mem", "auto", time_limit).report
    finally:
        memory_bound.MAX_BOUND_WORK = saved
        forget_bounds()
    peak, lb = report["peak_bytes"]["output"], report["peak_bytes"]["lower_bound"]
    return {"bound_bytes": int(bound), "bound_seconds": bound_s, "peak_bytes": int(peak), "reported_bound": int(lb),
            "gap_percent": 100.0 * (peak - lb) / lb if lb else None, "optimal": bool(report["optimal"]),
            "seconds": report["seconds"], "total_seconds": report["total_seconds"],
            "chosen": report["details"].get("chosen")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["layered:20000", "transformer:20000", "ws:12000", "sbm:4000", "er:10000"],
                    help="FAMILY:OPS, each generated as onnx-sched gen does")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        optimize_model(write_graph("er", 60, Path(tmp)), "peak-mem", "auto", 1.0)  # kernels loaded off the clock
        for spec in args.graphs:
            family, _, size = spec.partition(":")
            path = write_graph(family, int(size), Path(tmp))
            graph = import_onnx(path).graph
            row = {"graph": spec, "ops": graph.n_ops, "edges": int(len(graph.op_succs.indices)),
                   "work": memory_bound.bound_work(graph)}
            row["inputs_outputs"] = run_auto(path, args.time_limit, -1)
            row["must_live"] = run_auto(path, args.time_limit, memory_bound.MAX_BOUND_WORK)
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = Table(title=f"auto, peak memory, --time-limit {args.time_limit:g}: inputs + outputs bound -> must-live")
    for col in ("graph", "ops", "edges", "bound MiB", "bound s", "peak MiB", "gap", "proven", "search s"):
        table.add_column(col, justify="left" if col == "graph" else "right")
    for r in rows:
        a, b = r["inputs_outputs"], r["must_live"]
        table.add_row(r["graph"], f"{r['ops']:,}", f"{r['edges']:,}",
                      f"{a['bound_bytes'] / MIB:,.1f} -> {b['bound_bytes'] / MIB:,.1f}",
                      f"{b['bound_seconds']:.2f}", f"{a['peak_bytes'] / MIB:,.1f} -> {b['peak_bytes'] / MIB:,.1f}",
                      f"{a['gap_percent']:.1f}% -> {b['gap_percent']:.1f}%", f"{a['optimal']} -> {b['optimal']}",
                      f"{a['seconds']:.1f} -> {b['seconds']:.1f}")
    Console(width=150).print(table)
    if args.out:
        args.out.write_text(json.dumps({"time_limit": args.time_limit, "max_bound_work": memory_bound.MAX_BOUND_WORK,
                                        "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
