"""Certificates: how often ``auto`` proves its peak optimal, and how far it is from the bound it reports.

Runs ``optimize_model(..., method="auto", time_limit=T)`` (the API the CLI uses) on the
RandWire / NAS models of the corpus and on ``onnx-sched gen``-style irregular graphs
(ER, WS, BA, SBM wiring; 80-800 ops; test seeds), and classifies each result as the
report does: proven optimal, within X% of a proven bound, or no proof.

    python benchmarks/certificates.py --time-limit 60 --out docs/certificates.json --markdown docs/certificates.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.synth import TEST_SEED_BASE, generate
from onnx_sched.synth.onnx_writer import graph_to_onnx

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
NAS_MODELS = ("randwire_ws", "randwire_er", "randwire_ws_regular", "nasnet_a_mobile", "amoebanet_a_mobile")
FAMILIES = ("er", "ws", "ba", "sbm")
SIZES = (80, 200, 400, 800)


def generated_model(family: str, n: int, i: int, work: Path) -> Path:
    """The ``onnx-sched gen``-style graph of ``family`` with ``n`` ops (seed ``TEST_SEED_BASE + 100 + i``), as ONNX."""
    path = work / f"{family}{n}.onnx"
    onnx.save(graph_to_onnx(generate(family, n, TEST_SEED_BASE + 100 + i), name=f"{family}{n}"), path)
    return path


def cases(corpus: Path, families: tuple[str, ...], sizes: tuple[int, ...], work: Path) -> list[tuple[str, Path]]:
    out = [(m, corpus / f"{m}.onnx") for m in NAS_MODELS if (corpus / f"{m}.onnx").is_file()]
    for fam in families:
        for i, n in enumerate(sizes):
            out.append((f"{fam}-{n}", generated_model(fam, n, i, work)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--families", nargs="*", default=list(FAMILIES))
    ap.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in cases(args.corpus, tuple(args.families), tuple(args.sizes), Path(tmp)):
            t0 = time.perf_counter()
            rep = optimize_model(path, "peak-mem", "auto", time_limit=args.time_limit).report
            pk = rep["peak_bytes"]
            row = {"model": name, "ops": rep["ops"], "peak": pk["output"], "bound": pk["lower_bound"],
                   "gap": rep["gap"], "optimal": rep["optimal"], "certificate": rep.get("certificate"),
                   "chosen": rep["details"].get("chosen"), "wall_s": time.perf_counter() - t0,
                   "compile_s": rep["compile_seconds"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    proven = sum(r["optimal"] for r in rows)
    mean_gap = float(np.mean([r["gap"] for r in rows]))
    command = "python benchmarks/certificates.py " + " ".join(argv if argv is not None else sys.argv[1:])
    table = Table(title=f"auto --time-limit {args.time_limit:g}: certificates")
    for col in ("model", "ops", "peak MiB", "bound MiB", "gap", "proven", "chosen", "s"):
        table.add_column(col, justify="left" if col in ("model", "chosen") else "right")
    lines = [f"Command: `{command}`", "", f"Proven optimal: {proven}/{len(rows)}; mean gap to the reported bound: {mean_gap:.1%}.",
             "", "| model | ops | peak (MiB) | bound (MiB) | gap | proven | chosen | s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["model"], str(r["ops"]), f"{r['peak'] / 2**20:.2f}", f"{r['bound'] / 2**20:.2f}", f"{r['gap']:.1%}",
                 "yes" if r["optimal"] else "no", str(r["chosen"]), f"{r['wall_s']:.1f}"]
        table.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
    Console().print(table)
    print(lines[2])
    if args.out:
        args.out.write_text(json.dumps({"command": command, "proven": proven, "mean_gap": mean_gap, "rows": rows}, indent=2))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
