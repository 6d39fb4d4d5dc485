"""Chain contraction: how much smaller the corpus graphs get, and what it does to beam search.

For every corpus model: ops before and after :func:`onnx_sched.cost.memory_chains.contract_chains`
(without and with in-place reuse), then beam searches of width 100, 1,000 and 10,000 on the graph as
given (``contract=False``) and contracted (the default), each timed (best of ``--repeats``, process
time) with the peak of the order it returns, so equal widths can be compared for speed and peak.

    python benchmarks/chain_contraction.py --out docs/chain_contraction.json --markdown docs/chain_contraction.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

from onnx_sched.cost.memory_chains import contract_chains
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes.order._common import peak_of
from onnx_sched.passes.order.beam import beam_search

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
MiB = 2**20


def timed_beam(graph, width: int, contract: bool, repeats: int) -> tuple[float, int]:  # noqa: ANN001
    """(best process seconds, peak) of a width-``width`` beam."""
    best, peak = float("inf"), -1
    for _ in range(repeats):
        t0 = time.process_time()
        order, _ = beam_search(graph, width, inplace=False, contract=contract)
        best = min(best, time.process_time() - t0)
        peak = peak_of(graph, order, False)
    return best, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--widths", nargs="*", type=int, default=[100, 1000, 10000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    paths = sorted(args.corpus.glob("*.onnx")) if not args.models else [args.corpus / f"{m}.onnx" for m in args.models]
    load0 = os.getloadavg()[0]
    rows = []
    warm = import_onnx(paths[0]).graph
    for contract in (False, True):  # compile the kernels before timing anything
        beam_search(warm, 4, inplace=False, contract=contract)
    for path in track(paths, description="models"):
        g = import_onnx(path).graph
        row = {"model": path.stem, "ops": g.n_ops, "contracted": contract_chains(g, False).graph.n_ops,
               "contracted_inplace": contract_chains(g, True).graph.n_ops, "beams": {}}
        for w in args.widths:
            s0, p0 = timed_beam(g, w, False, args.repeats)
            s1, p1 = timed_beam(g, w, True, args.repeats)
            row["beams"][str(w)] = {"seconds": s0, "peak": p0, "seconds_contracted": s1, "peak_contracted": p1}
        rows.append(row)
    command = "python benchmarks/chain_contraction.py " + " ".join(argv if argv is not None else sys.argv[1:])
    cols = ["model", "ops", "contracted (in-place)"]
    for w in args.widths:
        cols += [f"w={w} s", f"w={w} peak MiB"]
    table = Table(title="chain contraction: beam search as given -> contracted")
    for c in cols:
        table.add_column(c, justify="left" if c == "model" else "right")
    lines = [f"Command: `{command}` (load average {load0:.2f} -> {os.getloadavg()[0]:.2f}; process seconds, "
             f"best of {args.repeats})", "", "| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for r in rows:
        cells = [r["model"], str(r["ops"]), f"{r['contracted']} ({r['contracted_inplace']})"]
        for w in args.widths:
            b = r["beams"][str(w)]
            cells += [f"{b['seconds']:.2f} -> {b['seconds_contracted']:.2f}",
                      f"{b['peak'] / MiB:.2f} -> {b['peak_contracted'] / MiB:.2f}"]
        table.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
    summary = {str(w): {"faster": sum(r["beams"][str(w)]["seconds_contracted"] < r["beams"][str(w)]["seconds"] for r in rows),
                        "lower_peak": sum(r["beams"][str(w)]["peak_contracted"] < r["beams"][str(w)]["peak"] for r in rows),
                        "higher_peak": sum(r["beams"][str(w)]["peak_contracted"] > r["beams"][str(w)]["peak"] for r in rows),
                        "seconds": sum(r["beams"][str(w)]["seconds"] for r in rows),
                        "seconds_contracted": sum(r["beams"][str(w)]["seconds_contracted"] for r in rows)}
               for w in args.widths}
    lines += ["", "Per width, over all models: " + "; ".join(
        f"w={w}: {s['seconds']:.1f} -> {s['seconds_contracted']:.1f} s in all, faster on {s['faster']}/{len(rows)}, "
        f"peak lower on {s['lower_peak']}, higher on {s['higher_peak']}" for w, s in summary.items())]
    Console().print(table)
    print(lines[-1])
    if args.out:
        args.out.write_text(json.dumps({"command": command, "rows": rows, "summary": summary}, indent=1))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
