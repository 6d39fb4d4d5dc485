"""Predicted vs measured peak memory in ONNX Runtime, input order vs onnx-sched's order.

Pipeline per model (the one `docs/results.md` recommends):
1. save ONNX Runtime's own optimized graph (level BASIC) - the graph ORT executes,
   in ORT's order;
2. reorder it with `optimize --method auto` (tensor-lifetime memory model);
3. run both in fresh processes with graph optimizations off and PRIORITY_BASED order,
   arena off and on, and compare the measured peaks with the predicted activation peak:
   peak RSS and, with memray installed (the `[bench]` extra), the live heap of one run
   with ORT's memory pattern on (ORT's default) and off (`--no-mem-pattern` runs too).

`--image-size S` rewrites a single 4-D image input to 1x3xSxS first (CNNs only), which
makes activation memory large enough to measure against allocator noise.

    python benchmarks/ort_peak.py --models randwire_ws_regular --image-size 512 \
        --out docs/ort_peak.json --markdown docs/ort_peak.md
    python benchmarks/ort_peak.py --heap --time-limit 20 --repeats 2 \
        --out docs/ort_heap_corpus.json --markdown docs/ort_heap_corpus.md
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


def heap_fields(rep, tag: str) -> dict:
    """Heap peaks (arena off) and the predicted-vs-measured saving of one bench report."""
    row = {f"heap_in_{tag}": rep.heap_run("in").heap_peak_bytes, f"heap_out_{tag}": rep.heap_run("out").heap_peak_bytes}
    if rep.savings is not None:
        row[f"measured_saving_{tag}"] = rep.savings.measured_bytes
        row[f"saving_error_{tag}"] = rep.savings.error
    return row


def openvino_fields(ort_graph: Path, sched: Path, repeats: int) -> dict:
    """The same two files in OpenVINO (CPU, f32), heap-tracked: does the order change anything there?"""
    rep = bench_models(ort_graph, sched, runtime="openvino", repeats=repeats, warmup=1, heap=True)
    row = {"ov_outputs_equal": rep.outputs_equal, "ov_max_abs_error": rep.max_abs_error}
    for label in ("in", "out"):
        run = rep.run(label)
        row.update({f"ov_heap_reserved_{label}": run.heap_reserved_bytes, f"ov_heap_peak_{label}": run.heap_peak_bytes,
                    f"ov_latency_{label}_ms": run.latency_median_s * 1e3})
    return row


def measure(path: Path, time_limit: float, repeats: int, image_size: int | None, work: Path, heap: bool,
            openvino: bool = False) -> dict:
    src = resized_copy(path, work / f"{path.stem}.src.onnx", image_size) if image_size else path
    ort_graph = ort_optimized_model(src, work / f"{path.stem}.ort.onnx", level="basic")
    res = optimize_model(ort_graph, objective="peak-mem", method="auto", time_limit=time_limit)
    sched = work / f"{path.stem}.sched.onnx"
    save_model_atomic(res.model, sched, source_path=ort_graph)
    rep = bench_models(ort_graph, sched, repeats=repeats, warmup=1, ort_opt=False, heap=heap)
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
    if heap:
        off = bench_models(ort_graph, sched, repeats=1, warmup=1, ort_opt=False, heap=True, arenas=(False,),
                           mem_pattern=False)
        pred = rep.savings
        row.update(predicted_saving=pred.predicted_bytes, predicted_saving_inplace=pred.predicted_bytes_inplace,
                   predicted_share=pred.predicted_share,
                   predicted_activation_in=rep.predictions["in"].activation_bytes,
                   predicted_activation_out=rep.predictions["out"].activation_bytes,
                   predicted_activation_in_inplace=rep.predictions["in"].activation_bytes_inplace,
                   predicted_activation_out_inplace=rep.predictions["out"].activation_bytes_inplace,
                   inputs_bytes=rep.predictions["in"].inputs_bytes,
                   reserved_in_arena_on=rep.run("in", True).heap_reserved_bytes,
                   reserved_out_arena_on=rep.run("out", True).heap_reserved_bytes,
                   outputs_equal_no_pattern=off.outputs_equal,
                   **heap_fields(rep, "pattern"), **heap_fields(off, "no_pattern"))
    if openvino:
        row.update(openvino_fields(ort_graph, sched, repeats))
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


def heap_markdown(rows: list[dict], command: str) -> str:
    """The predicted-vs-heap table: savings of onnx-sched's order over ORT's, arena off."""
    lines = [f"Command: `{command}`", "",
             "Bytes. Predicted: tensor-lifetime model over each file's order, caller-owned inputs excluded "
             "(plain model; the in-place model's saving in brackets where it differs). Measured: live heap "
             "peak of one `session.run` after warm-up (memray, fresh process, arena off, ORT optimizations off, "
             "PRIORITY_BASED), with ORT's memory pattern on (ORT's default) and off. Error: |measured - "
             "predicted| / predicted saving.", "",
             "| model | ops | predicted peak in -> out | predicted saving | heap in -> out (pattern on) | "
             "measured saving (on) | error | measured saving (pattern off) | error | arena-on reserved in -> out | "
             "outputs equal |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def err(r: dict, tag: str) -> str:
        e = r.get(f"saving_error_{tag}")
        return "-" if e is None or r["predicted_saving"] == 0 else f"{100 * e:.1f}%"

    for r in rows:
        inpl = r["predicted_saving_inplace"]
        pred = f"{r['predicted_saving']:,} ({100 * r['predicted_share']:.1f}%)" + (
            f" [{inpl:,}]" if inpl != r["predicted_saving"] else "")
        lines.append(
            f"| {r['model']} | {r['ops']} | {r['predicted_activation_in']:,} -> {r['predicted_activation_out']:,} | "
            f"{pred} | {r['heap_in_pattern']:,} -> {r['heap_out_pattern']:,} | {r['measured_saving_pattern']:,} | "
            f"{err(r, 'pattern')} | {r['measured_saving_no_pattern']:,} | {err(r, 'no_pattern')} | "
            f"{r['reserved_in_arena_on']:,} -> {r['reserved_out_arena_on']:,} | "
            f"{r['outputs_equal'] and r['outputs_equal_no_pattern']} |")
    return "\n".join(lines) + "\n"


def openvino_markdown(rows: list[dict]) -> str:
    """OpenVINO's heap for ORT's order vs onnx-sched's order."""
    lines = ["", "OpenVINO 2026.4 CPU f32, same two files, heap-tracked (reserved: from compile_model through warm-up "
             "and one more infer; one infer: what it allocates on top). Bytes.", "",
             "| model | reserved in -> out | difference | one infer in -> out | latency in -> out (ms) | outputs equal |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['ov_heap_reserved_in']:,} -> {r['ov_heap_reserved_out']:,} | "
                     f"{r['ov_heap_reserved_in'] - r['ov_heap_reserved_out']:,} | {r['ov_heap_peak_in']:,} -> "
                     f"{r['ov_heap_peak_out']:,} | {r['ov_latency_in_ms']:.2f} -> {r['ov_latency_out_ms']:.2f} | "
                     f"{r['ov_outputs_equal']} |")
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
    ap.add_argument("--heap", action="store_true", help="also measure heap peaks (memray) and tabulate those")
    ap.add_argument("--openvino", action="store_true", help="also run both files in OpenVINO CPU with the heap tracker")
    args = ap.parse_args(argv)
    paths = sorted(args.corpus.glob("*.onnx"))
    if args.models:
        paths = [p for p in paths if p.stem in set(args.models)]
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_ortpeak_") as tmp:
        for path in paths:
            try:
                row = measure(path, args.time_limit, args.repeats, args.image_size, Path(tmp), args.heap, args.openvino)
            except Exception as exc:  # noqa: BLE001 - report and go on with the next model
                console.print(f"{path.stem}: {type(exc).__name__}: {exc}", markup=False)
                continue
            rows.append(row)
            heap = (f", heap saving {row['measured_saving_pattern']:,} B vs predicted {row['predicted_saving']:,} B"
                    if args.heap else "")
            console.print(f"{row['model']}: predicted {row['predicted_in'] / MB:.1f} -> {row['predicted_out'] / MB:.1f} MB, "
                          f"measured {row['measured_in_arena_off'] / MB:.1f} -> {row['measured_out_arena_off'] / MB:.1f} MB"
                          + heap)
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
        text = heap_markdown(rows, command) if args.heap else to_markdown(rows, command)
        args.markdown.write_text(text + (openvino_markdown(rows) if args.openvino else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
