"""Predicted vs measured peak memory in ONNX Runtime, input order vs onnx-sched's order.

Pipeline per model (the one `docs/results.md` recommends):
1. save ONNX Runtime's own optimized graph (level BASIC) - the graph ORT executes,
   in ORT's order;
2. reorder it with `optimize --method auto` (tensor-lifetime memory model);
3. run both in fresh processes with graph optimizations off and PRIORITY_BASED order,
   arena off and on, and compare the RSS peak with the predicted activation peak.

`--image-size S` rewrites a single 4-D image input to 1x3xSxS first (CNNs only), which
makes activation memory large enough to measure against allocator noise.

    python benchmarks/ort_peak.py --models randwire_ws_regular --image-size 512 \
        --out docs/ort_peak.json --markdown docs/ort_peak.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import onnx
from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.bench.measure import bench_models, ort_optimized_model
from onnx_sched.exporters.onnx import save_model_atomic

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"
MB = 1e6


def resized_copy(src: Path, dst: Path, size: int) -> Path:
    """The model with its one image input set to 1x3xSxS and inferred shapes dropped."""
    m = onnx.load(str(src))
    images = [i for i in m.graph.input if len(i.type.tensor_type.shape.dim) == 4]
    if len(images) != 1:
        raise ValueError(f"{src.name}: --image-size needs exactly one 4-D input, found {len(images)}")
    dims = images[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = size
    del m.graph.value_info[:]
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    onnx.save(m, str(dst))
    return dst


def measure(path: Path, time_limit: float, repeats: int, image_size: int | None, work: Path) -> dict:
    src = resized_copy(path, work / f"{path.stem}.src.onnx", image_size) if image_size else path
    ort_graph = ort_optimized_model(src, work / f"{path.stem}.ort.onnx", level="basic")
    res = optimize_model(ort_graph, objective="peak-mem", method="auto", time_limit=time_limit)
    sched = work / f"{path.stem}.sched.onnx"
    save_model_atomic(res.model, sched, source_path=ort_graph)
    rep = bench_models(ort_graph, sched, repeats=repeats, warmup=1, ort_opt=False)
    pk = res.report["peak_bytes"]
    row = {
        "model": path.stem + (f"@{image_size}" if image_size else ""),
        "ops": res.report["ops"],
        "predicted_in": pk["input"],
        "predicted_out": pk["output"],
        "lower_bound": pk["lower_bound"],
        "optimal": res.report["optimal"],
        "outputs_equal": rep.outputs_equal,
    }
    for arena in (False, True):
        tag = "arena_on" if arena else "arena_off"
        row[f"measured_in_{tag}"] = rep.run("in", arena).peak_rss_delta
        row[f"measured_out_{tag}"] = rep.run("out", arena).peak_rss_delta
        row[f"latency_in_{tag}_ms"] = rep.run("in", arena).latency_median_s * 1e3
        row[f"latency_out_{tag}_ms"] = rep.run("out", arena).latency_median_s * 1e3
    return row


def to_markdown(rows: list[dict], command: str) -> str:
    lines = [f"Command: `{command}`", "",
             "MB = 10^6 bytes. Predicted: activation peak of the tensor-lifetime model. Measured: peak RSS above the "
             "RSS before the first run, fresh process, ORT optimizations off (graph already ORT-optimized), PRIORITY_BASED.", "",
             "| model | ops | predicted in | predicted out | measured in (arena off) | measured out (arena off) | "
             "measured saving vs predicted | arena on in -> out | outputs equal |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pred = (r["predicted_in"] - r["predicted_out"]) / MB
        meas = (r["measured_in_arena_off"] - r["measured_out_arena_off"]) / MB
        lines.append(
            f"| {r['model']} | {r['ops']} | {r['predicted_in'] / MB:.1f} | {r['predicted_out'] / MB:.1f} | "
            f"{r['measured_in_arena_off'] / MB:.1f} | {r['measured_out_arena_off'] / MB:.1f} | {meas:.1f} vs {pred:.1f} | "
            f"{r['measured_in_arena_on'] / MB:.1f} -> {r['measured_out_arena_on'] / MB:.1f} | {r['outputs_equal']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    paths = sorted(args.corpus.glob("*.onnx"))
    if args.models:
        paths = [p for p in paths if p.stem in set(args.models)]
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_ortpeak_") as tmp:
        for path in paths:
            try:
                row = measure(path, args.time_limit, args.repeats, args.image_size, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - report and go on with the next model
                console.print(f"{path.stem}: {type(exc).__name__}: {exc}", markup=False)
                continue
            rows.append(row)
            console.print(f"{row['model']}: predicted {row['predicted_in'] / MB:.1f} -> {row['predicted_out'] / MB:.1f} MB, "
                          f"measured {row['measured_in_arena_off'] / MB:.1f} -> {row['measured_out_arena_off'] / MB:.1f} MB")
            for f in Path(tmp).glob(f"{path.stem}.*"):
                f.unlink()
    table = Table(title="ORT peak memory: predicted vs measured (MB, arena off)")
    for col in ("model", "pred in", "pred out", "meas in", "meas out", "equal"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["model"], f"{r['predicted_in'] / MB:.1f}", f"{r['predicted_out'] / MB:.1f}",
                      f"{r['measured_in_arena_off'] / MB:.1f}", f"{r['measured_out_arena_off'] / MB:.1f}", str(r["outputs_equal"]))
    console.print(table)
    command = "python benchmarks/ort_peak.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out:
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=2))
    if args.markdown:
        args.markdown.write_text(to_markdown(rows, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
