"""Peak memory of every ordering method on the real corpus (`../shared/corpus/onnx`).

For each model: the peak of the file order, of every heuristic, of the exact search
(proven optimum or best order plus bound within --time-limit), the best found and
the best proven lower bound, with seconds per method.

    python benchmarks/corpus_peak_mem.py --time-limit 60 --out docs/corpus_peak_mem.json \
        --markdown docs/corpus_peak_mem.md [--models randwire_ws nasnet_a_mobile]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from onnx_sched.cost.memory import peak_memory
from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes import PassContext, available, get_pass

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"
HEURISTICS = ["file", "bfs", "dfs", "xla_dfs", "greedy", "random", "beam", "learned"]


def run_model(path: Path, methods: list[str], time_limit: float, beam_width: int, inplace: bool) -> dict:
    g = import_onnx(path).graph
    row = {"model": path.stem, "ops": g.n_ops, "methods": {}}
    bound = lower_bound(g, inplace)
    for name in methods:
        # random: best of 100 orders; learned: sample-16 (the decoder); beam at --beam-width
        opts = {"beam_width": beam_width, "samples": 16 if name == "learned" else 100}
        ctx = PassContext(time_limit=time_limit, seed=0, inplace=inplace, options=opts)
        t = time.perf_counter()
        try:
            sched = get_pass(name, "peak-mem")(g, ctx)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports failures, it does not stop
            row["methods"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        seconds = time.perf_counter() - t
        peak = peak_memory(g, sched.order, inplace)
        bound = max(bound, int(sched.lower_bound or 0))
        row["methods"][name] = {"peak_bytes": int(peak), "seconds": seconds, "optimal": bool(sched.optimal)}
    peaks = {k: v["peak_bytes"] for k, v in row["methods"].items() if "peak_bytes" in v}
    row["best_bytes"] = min(peaks.values())
    row["best_method"] = min(peaks, key=peaks.get)
    row["lower_bound_bytes"] = int(bound)
    row["proven_optimal"] = any(v.get("optimal") for v in row["methods"].values()) or row["best_bytes"] == bound
    return row


def to_markdown(rows: list[dict], methods: list[str], command: str) -> str:
    head = ["model", "ops", *methods, "best", "bound", "proven", *[f"s {m}" for m in ("beam", "exact") if m in methods]]
    lines = [f"Command: `{command}`", "", "Peak activation memory in MiB (tensor-lifetime model); seconds per method.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], str(r["ops"])]
        for m in methods:
            v = r["methods"].get(m, {})
            cells.append(f"{v['peak_bytes'] / 2**20:.2f}" if "peak_bytes" in v else "err")
        cells += [f"{r['best_bytes'] / 2**20:.2f}", f"{r['lower_bound_bytes'] / 2**20:.2f}", "yes" if r["proven_optimal"] else "no"]
        for m in ("beam", "exact"):
            if m in methods:
                v = r["methods"].get(m, {})
                cells.append(f"{v['seconds']:.1f}" if "seconds" in v else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", default=None, help="model stems (default: all)")
    ap.add_argument("--methods", nargs="*", default=None)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--beam-width", type=int, default=1000)
    ap.add_argument("--inplace", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    registered = available("peak-mem")
    methods = [m for m in (args.methods or [*HEURISTICS, "exact"]) if m in registered]
    paths = sorted(args.corpus.glob("*.onnx"))
    if args.models:
        paths = [p for p in paths if p.stem in set(args.models)]
    console = Console()
    rows = []
    for path in paths:
        row = run_model(path, methods, args.time_limit, args.beam_width, args.inplace)
        rows.append(row)
        console.print(f"{row['model']}: best {row['best_bytes'] / 2**20:.2f} MiB ({row['best_method']}), "
                      f"bound {row['lower_bound_bytes'] / 2**20:.2f}, proven {row['proven_optimal']}")
    table = Table(title="peak memory (MiB) on the corpus")
    for col in ["model", "ops", *methods, "best", "bound", "proven"]:
        table.add_column(col, justify="right")
    for r in rows:
        vals = [f"{r['methods'][m]['peak_bytes'] / 2**20:.2f}" if "peak_bytes" in r["methods"].get(m, {}) else "err" for m in methods]
        table.add_row(r["model"], str(r["ops"]), *vals, f"{r['best_bytes'] / 2**20:.2f}",
                      f"{r['lower_bound_bytes'] / 2**20:.2f}", "yes" if r["proven_optimal"] else "no")
    console.print(table)
    command = "python benchmarks/corpus_peak_mem.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=2))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(to_markdown(rows, methods, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
