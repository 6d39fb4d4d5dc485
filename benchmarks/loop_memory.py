"""What ONNX Runtime's ``Loop`` holds: predicted vs measured heap on loops built to tell the parts apart.

A ``Loop`` body runs once per iteration as a graph of its own (``onnx_sched.importers.control_flow``): the op needs
the body's peak beyond its inputs and outputs, and its own state (the carried values it owns from the second
iteration on).  At its end ONNX Runtime also copies the last iteration's carried values into the op's outputs and
stacks the pieces of each scan output -- one per iteration, all kept until then -- into the stacked output.  Each
model here is one such loop over a ``[N, N]`` float carried value (``v_next = Relu(v)``), with or without a scan
output (``Sigmoid(v)`` each iteration), 1 to 8 iterations (a constant trip count), and after it nothing, a
``ReduceSum`` of the stacked output, or a ``Relu`` of it.  Per model: the tensor-lifetime prediction of the file order
(caller-owned inputs apart) and the live heap peak of one ``session.run`` (memray, fresh process, arena off, ORT
optimizations off, ``PRIORITY_BASED``, ORT's memory pattern off: each tensor its own allocation, the memory model's
view).

    python benchmarks/loop_memory.py --out docs/loop_memory.json --markdown docs/loop_memory.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from rich.console import Console
from rich.table import Table

from onnx_sched.bench.measure import bench_models

#: (trip count, scan output, op after the loop)
CASES = ((1, False, None), (3, False, None), (1, True, None), (2, True, None), (8, True, None), (8, True, "ReduceSum"),
         (8, True, "Relu"))


def loop_model(n: int, trips: int, stacked: bool, after: str | None) -> onnx.ModelProto:
    """The loop of one case (see the module docstring) over an ``[n, n]`` float input ``x``."""
    f = T.FLOAT
    square = [n, n]
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_next"]), h.make_node("Relu", ["v"], ["v_next"])]
        + ([h.make_node("Sigmoid", ["v"], ["row"])] if stacked else []), "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("v", f, square)],
        [h.make_tensor_value_info("c_next", T.BOOL, []), h.make_tensor_value_info("v_next", f, square)]
        + ([h.make_tensor_value_info("row", f, square)] if stacked else []))
    nodes = [h.make_node("Constant", [], ["trips"], value=nh.from_array(np.array(trips, np.int64))),
             h.make_node("Loop", ["trips", "", "x"], ["y", "rows"] if stacked else ["y"], body=body, name="loop")]
    outputs = [h.make_tensor_value_info("y", f, square)]
    if stacked and after is None:
        outputs.append(h.make_tensor_value_info("rows", f, [trips, *square]))
    elif after == "ReduceSum":
        nodes.append(h.make_node("ReduceSum", ["rows"], ["total"], keepdims=0))
        outputs.append(h.make_tensor_value_info("total", f, []))
    elif after == "Relu":
        nodes += [h.make_node("Relu", ["rows"], ["act"]), h.make_node("ReduceSum", ["act"], ["total"], keepdims=0)]
        outputs.append(h.make_tensor_value_info("total", f, []))
    graph = h.make_graph(nodes, f"loop_{trips}{'_stacked' if stacked else ''}{'_' + after if after else ''}",
                         [h.make_tensor_value_info("x", f, square)], outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256, help="the carried value is n x n floats")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_loops_") as tmp:
        for trips, stacked, after in CASES:
            model = loop_model(args.n, trips, stacked, after)
            path = Path(tmp) / f"{model.graph.name}.onnx"
            onnx.save(model, path)
            run = bench_models(path, repeats=1, warmup=1, ort_opt=False, heap=True, arenas=(False,), mem_pattern=False)
            rows.append({"model": model.graph.name, "trips": trips, "scan_output": stacked, "after": after,
                         "predicted": run.predictions["in"].activation_bytes,
                         "heap": run.heap_run("in").heap_peak_bytes})
    table = Table(title=f"Loop over a {args.n} x {args.n} float value: predicted vs heap peak, bytes")
    for col in ("model", "predicted", "heap", "heap / predicted"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        table.add_row(r["model"], f"{r['predicted']:,}", f"{r['heap']:,}", f"{r['heap'] / r['predicted']:.3f}")
    Console().print(table)
    command = "python benchmarks/loop_memory.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.out:
        args.out.write_text(json.dumps({"command": command, "n": args.n, "rows": rows}, indent=2) + "\n")
    if args.markdown:
        lines = [f"Command: `{command}`", "",
                 "| model | trips | scan output | after | predicted | heap | heap / predicted |",
                 "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['trips']} | {r['scan_output']} | {r['after'] or '-'} | {r['predicted']:,} | "
                  f"{r['heap']:,} | {r['heap'] / r['predicted']:.3f} |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
