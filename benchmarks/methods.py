"""Time every registered peak-memory method on generated and corpus graphs.

For each graph -- layered graphs of paper 000 (``onnx_sched.synth.layered``,
``--sizes``, default 500 / 1000 / 2000 ops) and a few real corpus models
(``--corpus``, imported with :func:`onnx_sched.importers.onnx.import_onnx`) -- the
script runs every ``peak-mem`` pass (or ``--methods``), ``beam`` once per
``--beam-widths`` entry (default 1000 and 10 000), and prints a rich table per
graph: method, peak (MiB), % gap to the best peak on that graph, seconds, and
whether the method proved optimality.  Results go to ``--out`` as JSON.

Every method runs with ``--time-limit`` (default 30 s); beams get
``--beam-time-limit`` (default 300 s) so the width is not shrunk and the timing
is that of the full width (the JSON records whether it was shrunk).  Kernels
are compiled on a tiny graph first so numba compilation is not timed.  Timings
are wall-clock, single process.

    python benchmarks/methods.py --sizes 500 1000 2000 --beam-widths 1000 10000 \
        --out docs/methods.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, available, get_pass

CORPUS = Path("/work/shared/corpus/onnx")
DEFAULT_CORPUS = ("randwire_ws", "nasnet_a_mobile", "distilbert_base", "light_inception_v2")


def layered(n: int, seed: int) -> Graph:
    """Paper-000 layered graph, or a simple random layered DAG if the generator is absent."""
    try:
        from onnx_sched.synth.layered import layered_graph
    except ImportError:
        return _fallback_dag(n, seed)
    return layered_graph(n, seed)


def _fallback_dag(n: int, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    width = max(2, int(np.sqrt(n)))
    edges = []
    for v in range(width, n):
        lo = (v // width - 1) * width
        for u in rng.choice(np.arange(lo, lo + width), size=min(3, width), replace=False):
            edges.append((int(u), v))
    return Graph.from_edges(n, edges, output_bytes=rng.integers(1, 64, n) * 2**20, name=f"random_{n}_{seed}")


def corpus_graph(name: str) -> Graph:
    from onnx_sched.importers.onnx import import_onnx

    return import_onnx(CORPUS / f"{name}.onnx").graph


def run_method(graph: Graph, method: str, args: argparse.Namespace, options: dict[str, Any], time_limit: float) -> dict[str, Any]:
    ctx = PassContext(time_limit=time_limit, seed=args.seed, inplace=args.inplace, options=options)
    t0 = time.perf_counter()
    try:
        s = get_pass(method, "peak-mem")(graph, ctx)
    except Exception as exc:  # a broken method is reported, not fatal
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    secs = time.perf_counter() - t0
    keep = ("beam_width", "max_states", "width_shrunk_for_time", "samples", "status", "note", "chosen", "exact", "stopped")
    return {
        "peak_bytes": int(s.info["peak_bytes"]),
        "seconds": round(secs, 4),
        "optimal": bool(s.optimal),
        "lower_bound": None if s.lower_bound is None else int(s.lower_bound),
        "info": {k: s.info[k] for k in keep if k in s.info},
    }


def bench_graph(label: str, graph: Graph, methods: list[str], args: argparse.Namespace, console: Console) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m == "beam":
            for w in args.beam_widths:
                rows[f"beam@{w}"] = run_method(graph, "beam", args, {"beam_width": w}, args.beam_time_limit)
        else:
            rows[m] = run_method(graph, m, args, {}, args.time_limit)
    peaks = [r["peak_bytes"] for r in rows.values() if "peak_bytes" in r]
    best = min(peaks) if peaks else None
    table = Table(title=f"{label}: {graph.n_ops} ops, lower bound {lower_bound(graph, args.inplace) / 2**20:.2f} MiB")
    for col in ("method", "peak MiB", "% gap to best", "seconds", "optimal", "note"):
        table.add_column(col, justify="left" if col in ("method", "note") else "right")
    for name, r in rows.items():
        if "error" in r:
            table.add_row(name, "-", "-", "-", "-", r["error"][:60])
            continue
        r["gap_pct"] = round(100.0 * (r["peak_bytes"] - best) / best, 3) if best else 0.0
        note = ", ".join(f"{k}={v}" for k, v in r["info"].items() if k in ("chosen", "status", "stopped"))
        if r["info"].get("width_shrunk_for_time"):
            note = ", ".join(filter(None, [note, "width shrunk for time"]))
        table.add_row(name, f"{r['peak_bytes'] / 2**20:.2f}", f"{r['gap_pct']:.2f}", f"{r['seconds']:.3f}", "yes" if r["optimal"] else "", note)
    console.print(table)
    return {"graph": label, "ops": graph.n_ops, "lower_bound": int(lower_bound(graph, args.inplace)), "best_peak": best, "methods": rows}


def warm_up(methods: list[str]) -> None:
    g = layered(40, 0)
    for m in methods:
        try:
            get_pass(m, "peak-mem")(g, PassContext(time_limit=1.0, options={"beam_width": 8, "samples": 2}))
        except Exception:  # reported when the real run fails too
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[500, 1000, 2000])
    ap.add_argument("--seed", type=int, default=0, help="graph seed and pass seed")
    ap.add_argument("--methods", nargs="*", default=None, help="default: every registered peak-mem method")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--beam-widths", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--beam-time-limit", type=float, default=300.0)
    ap.add_argument("--corpus", nargs="*", default=list(DEFAULT_CORPUS), help="corpus model names (MANIFEST.tsv)")
    ap.add_argument("--inplace", action="store_true", help="ORT-style in-place memory model")
    ap.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = ap.parse_args(argv)
    console = Console()
    methods = args.methods or available("peak-mem")
    warm_up(methods)
    results = []
    for n in args.sizes:
        results.append(bench_graph(f"layered n={n} seed={args.seed}", layered(n, args.seed), methods, args, console))
    for name in args.corpus:
        try:
            g = corpus_graph(name)
        except Exception as exc:
            console.print(f"[yellow]skip corpus {name}: {type(exc).__name__}: {exc}[/yellow]")
            continue
        results.append(bench_graph(f"corpus {name}", g, methods, args, console))
    payload = {
        "benchmark": "peak-mem methods",
        "inplace": args.inplace,
        "time_limit": args.time_limit,
        "beam_time_limit": args.beam_time_limit,
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "results": results,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
