"""Acceptance run over the corpus: `onnx-sched optimize --method auto --time-limit T` on every
model, then onnx.checker, ONNX Runtime outputs bitwise equal to the input's on seeded random
inputs, and output peak <= input peak (same memory model).

    python benchmarks/corpus_optimize.py --time-limit 60 --out docs/corpus_optimize.json --markdown docs/corpus_optimize.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from onnx_sched.bench.measure import random_inputs

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"


def run(path: Path | str, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def check(path: Path, time_limit: float, work: Path) -> dict:
    out, rep = work / f"{path.stem}.sched.onnx", work / f"{path.stem}.json"
    proc = subprocess.run([sys.executable, "-m", "onnx_sched.cli", "optimize", str(path), "-o", str(out), "--method", "auto",
                           "--time-limit", str(time_limit), "--report", str(rep)], capture_output=True, text=True)
    row = {"model": path.stem, "exit": proc.returncode}
    if proc.returncode != 0:
        row["error"] = proc.stderr.strip()
        return row
    report = json.loads(rep.read_text())
    onnx.checker.check_model(str(out), full_check=True)
    feeds = random_inputs(onnx.load(str(path), load_external_data=False), seed=0)
    a, b = run(path, feeds), run(out, feeds)
    row.update(
        checker=True,
        bitwise_equal=all(x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b)),
        peak_in=report["peak_bytes"]["input"], peak_out=report["peak_bytes"]["output"],
        lower_bound=report["peak_bytes"]["lower_bound"], optimal=report["optimal"],
        method_used=report["method_used"], seconds=report["seconds"],
    )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(args.corpus.glob("*.onnx")):
            row = check(path, args.time_limit, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
    ok = [r for r in rows if r["exit"] == 0 and r.get("bitwise_equal") and r["peak_out"] <= r["peak_in"]]
    command = "python benchmarks/corpus_optimize.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"{len(ok)}/{len(rows)} models: exit 0, checker, bitwise-equal ORT outputs, peak out <= in")
    if args.out:
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=2))
    if args.markdown:
        lines = [f"Command: `{command}`", "", f"{len(ok)}/{len(rows)} models pass every check.", "",
                 "| model | exit | checker | ORT bitwise equal | peak in (MiB) | peak out (MiB) | bound (MiB) | proven | method | s |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r["exit"]:
                lines.append(f"| {r['model']} | {r['exit']} | - | - | - | - | - | - | {r.get('error', '')} | - |")
                continue
            lines.append(f"| {r['model']} | 0 | yes | {'yes' if r['bitwise_equal'] else 'NO'} | {r['peak_in'] / 2**20:.2f} | "
                         f"{r['peak_out'] / 2**20:.2f} | {r['lower_bound'] / 2**20:.2f} | {'yes' if r['optimal'] else 'no'} | "
                         f"{r['method_used']} | {r['seconds']:.1f} |")
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
