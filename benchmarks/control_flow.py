"""Models whose work lives in an ``If``: predicted vs measured peak, before and after ordering the branches.

Hugging Face Optimum merges a decoder's two graphs (with and without the key/value cache)
into one model: an ``If`` on ``use_cache_branch`` whose branches each hold a whole
decoder, the weights shared from the main graph.  This benchmark builds such models the
same way from corpus models (both branches the model itself, as ONNX Runtime executes
it: its optimized graph at level BASIC), then per model:

1. predicts the input's peak with the control-flow op as one op that needs nothing
   while it runs (onnx-sched before its bodies were imported) and with its branches'
   memory (:mod:`onnx_sched.importers.control_flow`);
2. runs ``optimize`` (peak-mem, ``auto``), which orders the branches
   (:mod:`onnx_sched.objectives.peak_mem_bodies`);
3. runs both files in fresh ONNX Runtime processes (``bench``: optimizations off,
   ``PRIORITY_BASED``, arena off, heap tracked), ORT's memory pattern on (its default)
   and off (every tensor its own allocation, the memory model's view), outputs compared.

    python benchmarks/control_flow.py --out docs/control_flow.json --markdown docs/control_flow.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.bench.measure import bench_models, ort_optimized_model
from onnx_sched.cost.memory import peak_memory
from onnx_sched.exporters.onnx import save_model_atomic
from onnx_sched.importers.onnx import import_onnx

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"
MODELS = ("randwire_er", "randwire_ws_regular", "nasnet_a_mobile", "light_inception_v1", "gpt2_small", "bert_base")
COND = "use_cache_branch"


def branch(graph: onnx.GraphProto, prefix: str) -> onnx.GraphProto:
    """``graph``'s nodes as an ``If`` branch reading the main graph's inputs and weights by name; every tensor
    it makes renamed with ``prefix`` (names are unique across a model's graphs)."""
    made = {o for n in graph.node for o in n.output if o}
    nodes = []
    for n in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(n)
        node.name = prefix + (n.name or n.op_type)
        node.input[:] = [prefix + x if x in made else x for x in n.input]
        node.output[:] = [prefix + x if x else x for x in n.output]
        nodes.append(node)
    outputs = [helper.make_tensor_value_info(prefix + o.name, o.type.tensor_type.elem_type, None)
               for o in graph.output]
    return helper.make_graph(nodes, prefix + "branch", [], outputs)


def merged(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` as Optimum's merged decoders are built: one ``If`` on a bool input, the model in both branches,
    its weights in the main graph."""
    g = model.graph
    node = helper.make_node("If", [COND], [o.name for o in g.output], name="optimum::if",
                            then_branch=branch(g, "with_past_"), else_branch=branch(g, "no_past_"))
    inputs = [*g.input, helper.make_tensor_value_info(COND, TensorProto.BOOL, [])]
    out = helper.make_model(helper.make_graph([node], g.name, inputs, list(g.output), list(g.initializer)),
                            opset_imports=list(model.opset_import))
    out.ir_version = model.ir_version
    out.metadata_props.extend(model.metadata_props)  # ORT's level mark: bench runs it with optimizations off
    return out


def measure(path: Path, time_limit: float, repeats: int, work: Path) -> dict:
    ort_graph = ort_optimized_model(path, work / f"{path.stem}.ort.onnx", level="basic")
    model = merged(onnx.load(str(ort_graph)))
    onnx.checker.check_model(model, full_check=True)
    src = work / f"{path.stem}.merged.onnx"
    onnx.save(model, str(src))
    graph = import_onnx(src).graph
    as_one_op = peak_memory(replace(graph, op_param_bytes=np.zeros(graph.n_ops, np.int64)), np.arange(graph.n_ops))
    start = time.perf_counter()
    res = optimize_model(src, objective="peak-mem", method="auto", time_limit=time_limit)
    seconds = time.perf_counter() - start
    out = work / f"{path.stem}.merged.sched.onnx"
    save_model_atomic(res.model, out, source_path=src)
    on = bench_models(src, out, repeats=repeats, warmup=1, ort_opt=False, heap=True, arenas=(False,))
    off = bench_models(src, out, repeats=1, warmup=1, ort_opt=False, heap=True, arenas=(False,), mem_pattern=False)
    plain = bench_models(ort_graph, repeats=1, warmup=1, ort_opt=False, heap=True, arenas=(False,),
                         mem_pattern=False)  # the model itself, not merged: the memory model's own error
    pk, pred = res.report["peak_bytes"], on.predictions
    return {
        "model": path.stem, "branch_ops": sum(b["ops"] for b in res.report.get("bodies", ())) // 2,
        "inputs_bytes": pred["in"].inputs_bytes,
        "predicted_as_one_op": as_one_op, "predicted_in": pk["input"], "predicted_out": pk["output"],
        "lower_bound": pk["lower_bound"], "certificate": res.report["certificate"], "seconds": round(seconds, 2),
        "bodies": [{k: b[k] for k in ("body", "ops", "reordered", "method_used")} for b in res.report["bodies"]],
        "predicted_activation_in": pred["in"].activation_bytes,
        "predicted_activation_out": pred["out"].activation_bytes,
        "predicted_saving": on.savings.predicted_bytes,
        "heap_in_pattern": on.heap_run("in").heap_peak_bytes, "heap_out_pattern": on.heap_run("out").heap_peak_bytes,
        "heap_in_no_pattern": off.heap_run("in").heap_peak_bytes,
        "heap_out_no_pattern": off.heap_run("out").heap_peak_bytes,
        "outputs_equal": bool(on.outputs_equal and off.outputs_equal),
        "plain_predicted_activation": plain.predictions["in"].activation_bytes,
        "plain_heap_no_pattern": plain.heap_run("in").heap_peak_bytes,
    }


def markdown(rows: list[dict], command: str) -> str:
    lines = [f"Command: `{command}`", "",
             "Bytes.  Predicted: the tensor-lifetime model, caller-owned inputs excluded; \"as one op\": the `If` "
             "needing nothing while it runs (onnx-sched before session 39).  Heap: live heap peak of one `session.run` "
             "after warm-up (memray, fresh process, arena off, ORT optimizations off, PRIORITY_BASED), ORT's memory "
             "pattern on (its default) and off.", "",
             "| model | ops per branch | the model alone: predicted / heap (off) | merged, in: predicted as one op / "
             "with its branches | heap in (pattern off / on) | predicted out | heap out (pattern off / on) | "
             "predicted saving | measured saving (off / on) | outputs equal |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        inputs = r["inputs_bytes"]
        lines.append(
            f"| {r['model']} | {r['branch_ops']} | {r['plain_predicted_activation']:,} / "
            f"{r['plain_heap_no_pattern']:,} | {r['predicted_as_one_op'] - inputs:,} / "
            f"{r['predicted_activation_in']:,} | {r['heap_in_no_pattern']:,} / {r['heap_in_pattern']:,} | "
            f"{r['predicted_activation_out']:,} | {r['heap_out_no_pattern']:,} / {r['heap_out_pattern']:,} | "
            f"{r['predicted_saving']:,} | {r['heap_in_no_pattern'] - r['heap_out_no_pattern']:,} / "
            f"{r['heap_in_pattern'] - r['heap_out_pattern']:,} | {r['outputs_equal']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_control_flow_") as tmp:
        for name in args.models:
            rows.append(measure(args.corpus / f"{name}.onnx", args.time_limit, args.repeats, Path(tmp)))
            console.print(f"{name}: {json.dumps({k: v for k, v in rows[-1].items() if k != 'bodies'})}")
    table = Table(title="merged (If) models: predicted vs heap, bytes")
    for col in ("model", "predicted in (one op / branches)", "heap in (off)", "predicted out", "heap out (off)",
                "equal"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        one_op = r["predicted_as_one_op"] - r["inputs_bytes"]
        table.add_row(r["model"], f"{one_op:,} / {r['predicted_activation_in']:,}",
                      f"{r['heap_in_no_pattern']:,}", f"{r['predicted_activation_out']:,}",
                      f"{r['heap_out_no_pattern']:,}", str(r["outputs_equal"]))
    console.print(table)
    command = "python benchmarks/control_flow.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.out:
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(rows, command))
    return 0 if all(r["outputs_equal"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
