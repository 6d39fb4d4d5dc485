"""What ONNX Runtime's ``Loop`` (``--op If``, ``--op Scan``) holds: predicted vs measured heap on models built to tell
the parts apart.

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

``--op If``: the same for an ``If`` (both branches alike) whose branch output is made in different ways -- by its
last op, by its first op before a two-tensor peak, after that peak, by a ``Reshape``, an ``Identity`` of an outer
value, a ``Constant``, with no declared shape, or also read inside the branch.  ONNX Runtime allocates an ``If``'s
outputs before it runs the branch (even one with no declared shape: its session infers it), so they are live during
the branch's peak; the memory model holds an op's outputs while it needs its body's memory, the same thing.

    python benchmarks/loop_memory.py --op If --out docs/if_memory.json --markdown docs/if_memory.md

``--op Scan``: a ``Scan`` over 1-8 ``[n, n]`` slices with an ``[n, n]`` state, with or without a scan output, and
once along axis 1; then opset 8's ``Scan`` over batches of 1-2 such sequences.  ONNX Runtime double-buffers each
state (none for one slice, one for two, two from three on; opset 8: for each sequence of the batch), reads axis-0
slices in place, and transposes what it scans or stacks along another axis through a copy.

    python benchmarks/loop_memory.py --op Scan --out docs/scan_memory.json --markdown docs/scan_memory.md
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


#: How an If's branch output is made (see the module docstring)
IF_CASES = ("last op", "first op, then the peak", "after the peak", "after the peak, no declared shape", "Reshape",
            "Identity of an outer value", "Constant", "no declared shape", "also read in the branch")


def if_model(n: int, case: str) -> onnx.ModelProto:
    """An ``If`` on a bool input over an ``[n, n]`` float input ``x``, both branches the given case; output ``y`` and
    (where the case has a second) ``w``."""
    f = T.FLOAT
    square = [n, n]

    def branch(p: str) -> onnx.GraphProto:
        y, w = p + "y", p + "w"
        peak = [h.make_node("Sigmoid", ["x"], [p + "a"]), h.make_node("Neg", [p + "a"], [p + "b"]),
                h.make_node("ReduceSum", [p + "b"], [w], keepdims=1)]  # a and b live together, w small
        nodes = {
            "last op": [h.make_node("Relu", ["x"], [y])],
            "first op, then the peak": [h.make_node("Relu", ["x"], [y]), *peak],
            "after the peak": [*peak, h.make_node("Relu", ["x"], [y])],
            "after the peak, no declared shape": [*peak, h.make_node("Relu", ["x"], [y])],
            "Reshape": [h.make_node("Constant", [], [p + "s"], value=nh.from_array(np.array(square, np.int64))),
                        h.make_node("Relu", ["x"], [p + "r"]), h.make_node("Reshape", [p + "r", p + "s"], [y])],
            "Identity of an outer value": [h.make_node("Identity", ["x"], [y])],
            "Constant": [h.make_node("Constant", [], [y], value=nh.from_array(np.ones(square, np.float32)))],
            "no declared shape": [h.make_node("Relu", ["x"], [y])],
            "also read in the branch": [h.make_node("Relu", ["x"], [y]), h.make_node("Sigmoid", [y], [p + "a"]),
                                        h.make_node("ReduceSum", [p + "a"], [w], keepdims=1)],
        }[case]
        outputs = [h.make_tensor_value_info(y, f, None if case.endswith("no declared shape") else square)]
        if any(w in node.output for node in nodes):
            outputs.append(h.make_tensor_value_info(w, f, [1, 1]))
        return h.make_graph(nodes, p, [], outputs)

    then_branch, else_branch = branch("t"), branch("e")
    names = ["y", "w"][:len(then_branch.output)]
    graph = h.make_graph([h.make_node("If", ["c"], names, then_branch=then_branch, else_branch=else_branch)],
                         "if_" + "_".join(case.replace(",", "").split()).lower(),
                         [h.make_tensor_value_info("x", f, square), h.make_tensor_value_info("c", T.BOOL, [])],
                         [h.make_tensor_value_info(o, f, square if o == "y" else [1, 1]) for o in names])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


#: (slices scanned, scan output, scan axis of the input and the output)
SCAN_CASES = ((1, False, 0), (2, False, 0), (4, False, 0), (1, True, 0), (2, True, 0), (4, True, 0), (8, True, 0),
              (4, True, 1))
#: opset 8's Scan (a batch of sequences): (batch, slices per sequence), with a scan output
SCAN8_CASES = ((1, 1), (1, 4), (2, 4))


def scan_model(n: int, rows: int, stacked: bool, axis: int = 0, batch: int = 0) -> onnx.ModelProto:
    """A ``Scan`` over ``rows`` ``[n, n]`` slices of ``xs`` (along ``axis``) with an ``[n, n]`` state
    (``s + Relu(x)``), and with a scan output (``Sigmoid(x)`` per slice, stacked along ``axis``) or without.
    ``batch``: opset 8's ``Scan`` instead, over ``batch`` such sequences (no ``sequence_lens``)."""
    f = T.FLOAT
    square = [n, n]
    body = h.make_graph(
        [h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["s", "r"], ["s_next"])]
        + ([h.make_node("Sigmoid", ["x"], ["row"])] if stacked else []), "body",
        [h.make_tensor_value_info("s", f, square), h.make_tensor_value_info("x", f, square)],
        [h.make_tensor_value_info("s_next", f, square)] + ([h.make_tensor_value_info("row", f, square)] if stacked
                                                           else []))
    outputs = ["s_final", "ys"] if stacked else ["s_final"]
    axes = {"scan_input_axes": [axis], **({"scan_output_axes": [axis]} if stacked else {})} if axis else {}
    inputs = ["", "s0", "xs"] if batch else ["s0", "xs"]
    scan = h.make_node("Scan", inputs, outputs, body=body, num_scan_inputs=1, name="scan", **axes)
    state = [batch, *square] if batch else square
    sliced = [batch, rows, *square] if batch else [*square[:axis], rows, *square[axis:]]
    name = f"scan8_{batch}x{rows}" if batch else f"scan_{rows}{'_stacked' if stacked else ''}"
    graph = h.make_graph([scan], name + (f"_axis{axis}" if axis else ""),
                         [h.make_tensor_value_info("s0", f, state), h.make_tensor_value_info("xs", f, sliced)],
                         [h.make_tensor_value_info("s_final", f, state)]
                         + ([h.make_tensor_value_info("ys", f, sliced)] if stacked else []))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 8 if batch else 17)])
    model.ir_version = 7 if batch else 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _cases(op: str, n: int) -> list[tuple[onnx.ModelProto, dict]]:
    if op == "Scan":
        return ([(scan_model(n, rows, stacked, axis), {"opset": 17, "batch": "-", "slices": rows,
                                                       "scan_output": stacked, "axis": axis})
                 for rows, stacked, axis in SCAN_CASES]
                + [(scan_model(n, rows, True, batch=batch), {"opset": 8, "batch": batch, "slices": rows,
                                                             "scan_output": True, "axis": 1})
                   for batch, rows in SCAN8_CASES])
    if op == "If":
        return [(if_model(n, case), {"branch_output": case}) for case in IF_CASES]
    return [(loop_model(n, trips, stacked, after), {"trips": trips, "scan_output": stacked, "after": after})
            for trips, stacked, after in CASES]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256, help="the carried value (an If's input) is n x n floats")
    ap.add_argument("--op", choices=("Loop", "If", "Scan"), default="Loop", help="which op's cases to run")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_control_flow_") as tmp:
        for model, case in _cases(args.op, args.n):
            path = Path(tmp) / f"{model.graph.name}.onnx"
            onnx.save(model, path)
            run = bench_models(path, repeats=1, warmup=1, ort_opt=False, heap=True, arenas=(False,), mem_pattern=False)
            rows.append({"model": model.graph.name, **case, "predicted": run.predictions["in"].activation_bytes,
                         "heap": run.heap_run("in").heap_peak_bytes})
    square = f"{args.n} x {args.n}"
    what = {"Loop": f"Loop over a {square} float value", "If": f"If over a {square} input",
            "Scan": f"Scan over {square} slices"}[args.op]
    table = Table(title=f"{what}: predicted vs heap peak, bytes")
    for col in ("model", "predicted", "heap", "heap / predicted"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        table.add_row(r["model"], f"{r['predicted']:,}", f"{r['heap']:,}", f"{r['heap'] / r['predicted']:.3f}")
    Console().print(table)
    command = "python benchmarks/loop_memory.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.out:
        args.out.write_text(json.dumps({"command": command, "op": args.op, "n": args.n, "rows": rows}, indent=2) + "\n")
    if args.markdown:
        keys = [k for k in rows[0] if k not in ("model", "predicted", "heap")]
        head = " | ".join(k.replace("_", " ") for k in keys)
        lines = [f"Command: `{command}`", "", f"| model | {head} | predicted | heap | heap / predicted |",
                 "|---" * (len(keys) + 4) + "|"]
        lines += [f"| {r['model']} | " + " | ".join("-" if r[k] is None else str(r[k]) for k in keys)
                  + f" | {r['predicted']:,} | {r['heap']:,} | {r['heap'] / r['predicted']:.3f} |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
