"""What `onnx-sched optimize` costs on a model that carries its weights: wall time and peak memory.

The corpus models have their float weights stripped; a user's model does not.  A 440 MB BERT held
several times over while it is read, checked, shape-inferred, copied and written makes the command
slow and its memory a multiple of the model -- for a tool whose users are short of memory.  This
script gives each named corpus model seeded random weights (`bench.weights.with_random_weights`),
saves it inline (one file, as exporters write models under 2 GB), runs the real command on it in a
fresh process, and reports the command's wall seconds, its own clock (`total_seconds` of the
report: import, search, export; kernel loading apart), its peak RSS (the child's `ru_maxrss`) and
that peak over the model's file size.  Each written model is checked: `onnx.checker` (full, by
path) and the same ONNX Runtime outputs as the input on seeded inputs (both with graph
optimizations off).

    python benchmarks/weights_overhead.py --out docs/weights_overhead.json

``--models`` picks corpus models (default: resnet50, bert_base, gpt2_small), ``--repeats`` runs the
command that many times per model (the table keeps the median seconds and the largest peak).

``--command bench-placement`` measures ``onnx-sched bench-placement MODEL --placement P --runtime R``
instead (3 timed runs each of the split and the whole model; ``R`` from ``--runtime``, default ort), ``P``
written beforehand by ``optimize --objective peak-mem --devices CPU,GPU`` (not measured); its report says
whether the split's outputs equal the whole model's:

    python benchmarks/weights_overhead.py --command bench-placement --out docs/weights_overhead_bench_placement.json
    python benchmarks/weights_overhead.py --command bench-placement --runtime openvino \\
        --out docs/weights_overhead_bench_placement_openvino.json

``--placement-method brkga`` splits each model the same way in every run (``auto``, the default, stops at the
time limit, so the split of two runs may differ).

``--external-data`` saves each model with its weights in a data file beside it (how models over 2 GB must be
saved) instead of inline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from rich.console import Console
from rich.table import Table

from onnx_sched.bench.inputs import random_inputs
from onnx_sched.bench.weights import with_random_weights
from onnx_sched.importers.dispatch import import_model

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"
DEFAULT_MODELS = ("resnet50", "bert_base", "gpt2_small")

#: Runs one command and prints its peak RSS in bytes: the wrapper's only child is the command.
_PEAK_RSS = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=sys.stderr); sys.exit(rc)")


def materialise(name: str, folder: Path, external: bool = False) -> Path:
    """The corpus model ``name`` with seeded random weights, saved inline in ``folder`` (``external``: its
    weights in one data file ``NAME.onnx.data`` beside it)."""
    path = folder / f"{name}.onnx"
    model = with_random_weights(import_model(CORPUS / f"{name}.onnx")).model
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=f"{name}.onnx.data", size_threshold=1024)
    else:
        onnx.save_model(model, path)
    return path


def run_command(model: Path, args: list[str], report: Path) -> dict[str, Any]:
    """``onnx-sched ARGS --report REPORT`` in a fresh process: wall seconds, peak RSS and the report."""
    cmd = [sys.executable, "-c", _PEAK_RSS, sys.executable, "-m", "onnx_sched.cli", *args, "--report", str(report)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{model.name}: exit {done.returncode}: {done.stderr.strip().splitlines()[-2:]}")
    peak = int(done.stderr.strip().splitlines()[-1])
    return {"wall_s": wall, "peak_rss_bytes": peak, "report": json.loads(report.read_text())}


def measure_optimize(model: Path, folder: Path, repeats: int, time_limit: float) -> dict[str, Any]:
    """``optimize MODEL -o OUT`` ``repeats`` times: median seconds, largest peak, the output checked."""
    output, report = folder / f"{model.stem}.out.onnx", folder / f"{model.stem}.report.json"
    args = ["optimize", str(model), "-o", str(output), "--time-limit", str(time_limit)]
    runs = [run_command(model, args, report) for _ in range(repeats)]
    for r in runs:
        r["total_seconds"] = r.pop("report")["total_seconds"]
    try:
        return {"total_seconds": statistics.median(r["total_seconds"] for r in runs), "runs": runs,
                "outputs_equal": same_outputs(model, output)}
    finally:
        output.unlink()


def measure_bench_placement(model: Path, folder: Path, repeats: int, time_limit: float, runtime: str = "ort",
                            method: str = "auto") -> dict[str, Any]:
    """``bench-placement MODEL --placement P --runtime RUNTIME`` ``repeats`` times, ``P`` a two-device peak-memory
    split written first by ``method``; the split's outputs equal the whole model's in every run."""
    placed, report = folder / f"{model.stem}.placed.onnx", folder / f"{model.stem}.report.json"
    split = ["optimize", str(model), "-o", str(placed), "--objective", "peak-mem", "--devices", "CPU,GPU", "--method",
             method, "--time-limit", str(time_limit)]
    subprocess.run([sys.executable, "-m", "onnx_sched.cli", *split], check=True, capture_output=True)
    args = ["bench-placement", str(model), "--placement", str(placed), "--runtime", runtime, "--repeats", "3"]
    try:
        runs = [run_command(model, args, report) for _ in range(repeats)]
    finally:
        placed.unlink()
    for r in runs:
        rep = r.pop("report")
        r.update(sub_models=rep["sub_models"], outputs_equal=rep["outputs_equal"],
                 split_median_s=rep["split"]["median_s"], single_median_s=rep["single_device"]["median_s"])
    return {"sub_models": runs[0]["sub_models"], "runs": runs, "outputs_equal": all(r["outputs_equal"] for r in runs)}


def same_outputs(model: Path, output: Path) -> bool:
    """``onnx.checker`` (full) passes on ``output`` and ONNX Runtime gives it ``model``'s outputs."""
    onnx.checker.check_model(str(output), full_check=True)
    feed = random_inputs(onnx.load(str(model), load_external_data=False), seed=0)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = [ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]).run(None, feed)
           for p in (model, output)]
    return all(np.array_equal(a, b, equal_nan=True) for a, b in zip(*got))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0, help="the command's --time-limit")
    ap.add_argument("--command", choices=("optimize", "bench-placement"), default="optimize",
                    help="the command measured (module docstring)")
    ap.add_argument("--runtime", choices=("ort", "openvino"), default="ort", help="bench-placement's --runtime")
    ap.add_argument("--placement-method", default="auto",
                    help="bench-placement: the method of the split (auto stops at --time-limit, so two runs may split "
                         "differently; brkga, 5,000 seeded evaluations, splits alike)")
    ap.add_argument("--external-data", action="store_true",
                    help="save each model with its weights in a data file beside it (file MiB: model + data)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.command == "optimize":
        measure = measure_optimize
    else:
        def measure(model: Path, folder: Path, repeats: int, time_limit: float) -> dict[str, Any]:
            return measure_bench_placement(model, folder, repeats, time_limit, args.runtime, args.placement_method)
    rows = []
    with tempfile.TemporaryDirectory(prefix="weights_overhead_") as tmp:
        folder = Path(tmp)
        for name in args.models:
            model = materialise(name, folder, args.external_data)
            data = model.with_name(f"{name}.onnx.data")
            try:
                row = measure(model, folder, args.repeats, args.time_limit)
            finally:
                size = model.stat().st_size + (data.stat().st_size if data.exists() else 0)
                model.unlink()
                data.unlink(missing_ok=True)
            runs = row["runs"]
            rows.append({"model": name, "file_bytes": size, "wall_s": statistics.median(r["wall_s"] for r in runs),
                         "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs), **row})
    title = ("optimize on models with their weights (peak-mem, auto)" if args.command == "optimize" else
             f"bench-placement --runtime {args.runtime} on models with their weights (a two-device peak-mem split)")
    table = Table(title=title)
    clock = "command clock s" if args.command == "optimize" else "sub-models"
    for col in ("model", "file MiB", "wall s (median)", clock, "peak RSS MiB", "peak / file", "outputs equal"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        third = f"{r['total_seconds']:.2f}" if args.command == "optimize" else str(r["sub_models"])
        table.add_row(r["model"], f"{r['file_bytes'] / 2**20:.0f}", f"{r['wall_s']:.2f}", third,
                      f"{r['peak_rss_bytes'] / 2**20:.0f}", f"{r['peak_rss_bytes'] / r['file_bytes']:.2f}",
                      "yes" if r["outputs_equal"] else "NO")
    Console().print(table)
    if args.out is not None:
        command = "python benchmarks/weights_overhead.py " + " ".join(sys.argv[1:] if argv is None else argv)
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    return 0 if all(r["outputs_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
