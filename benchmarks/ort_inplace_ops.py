"""Which ops does ONNX Runtime's CPU provider run in place?  Measured with the heap tracker.

The memory model's in-place variant (``--inplace``, :data:`onnx_sched.cost.memory.INPLACE_OP_TYPES`)
lets an op write its output into a same-sized input that dies at that op, as ORT's
allocation planner does for kernels that declare it.  Which kernels do is ORT's
business and changes between versions, so this measures it: for each op, the model

    x (4 KiB) -> Expand -> e (2 MiB) -> OP -> o (2 MiB) -> ReduceSum -> y

runs once warmed up under memray (arena off, ORT optimizations off).  The run
allocates e, then o: in place, the heap peak is about 2 MiB; with a copy, about
4 MiB (more for kernels with scratch).  Ops whose output size differs from their
input's (Equal, Not on bools, ...) cannot reuse the buffer and are not probed.

    python benchmarks/ort_inplace_ops.py --out docs/ort_inplace_ops.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from rich.console import Console
from rich.table import Table

from onnx_sched.bench.heap import trace_heap
from onnx_sched.cost.memory import INPLACE_OP_TYPES

ROWS, COLS = 512, 1024
BLOCK = ROWS * COLS * 4  # bytes of e and o (float32 or int32)


@dataclass(frozen=True)
class Probe:
    """One op applied to the 2 MiB tensor ``e``; extra inputs are small initializers."""

    op: str
    domain: str = ""
    dtype: int = T.FLOAT
    inits: tuple[onnx.TensorProto, ...] = ()
    attrs: dict = field(default_factory=dict)


def _scalar(name: str, value: float, dtype: int = T.FLOAT) -> onnx.TensorProto:
    return h.make_tensor(name, dtype, [1], [value])


UNARY = ("Abs", "Acos", "Asin", "Atan", "Ceil", "Celu", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu",
         "HardSigmoid", "HardSwish", "Identity", "LeakyRelu", "Log", "Mish", "Neg", "Reciprocal", "Relu", "Round",
         "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
         "ThresholdedRelu", "Dropout", "Flatten", "Clip", "Softmax", "LogSoftmax", "Hardmax")
BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu")

PROBES: tuple[Probe, ...] = (
    *(Probe(op) for op in UNARY),
    *(Probe(op, inits=(_scalar("c", 2.0),)) for op in BINARY),
    Probe("Mod", dtype=T.INT32, inits=(_scalar("c", 3, T.INT32),)),
    Probe("Cast", attrs={"to": T.INT32}),
    Probe("Reshape", inits=(h.make_tensor("c", T.INT64, [2], [COLS, ROWS]),)),
    Probe("Squeeze"),
    Probe("Unsqueeze", inits=(h.make_tensor("c", T.INT64, [1], [0]),)),
    Probe("Transpose"),
    Probe("LayerNormalization", inits=(h.make_tensor("c", T.FLOAT, [COLS], [1.0] * COLS),)),
    Probe("Where", inits=(h.make_tensor("cond", T.BOOL, [1], [True]), _scalar("c", 0.0))),
    *(Probe(op, domain="com.microsoft") for op in ("FastGelu", "QuickGelu", "Gelu")),
    Probe("BiasGelu", domain="com.microsoft", inits=(h.make_tensor("c", T.FLOAT, [COLS], [0.0] * COLS),)),
)


def probe_model(p: Probe) -> onnx.ModelProto:
    """x -> Expand -> e -> OP(e, extra...) -> o -> ReduceSum -> y."""
    inputs = ["cond", "e", "c"] if p.op == "Where" else ["e", *(t.name for t in p.inits)]
    nodes = [h.make_node("Expand", ["x", "shape"], ["e"]),
             h.make_node(p.op, inputs, ["o"], domain=p.domain, **p.attrs)]
    out_type = p.attrs.get("to", p.dtype)
    nodes.append(h.make_node("ReduceSum", ["o", "axes"], ["y"], keepdims=0))
    graph = h.make_graph(
        nodes, f"probe_{p.op}", [h.make_tensor_value_info("x", p.dtype, [COLS])],
        [h.make_tensor_value_info("y", out_type, None)],
        initializer=[h.make_tensor("shape", T.INT64, [2], [ROWS, COLS]), h.make_tensor("axes", T.INT64, [1], [0]),
                     *p.inits])
    opsets = [h.make_opsetid("", 20)] + ([h.make_opsetid(p.domain, 1)] if p.domain else [])
    return h.make_model(graph, opset_imports=opsets, ir_version=10)


def heap_peak(p: Probe) -> int:
    """Heap peak of one warmed-up run of the probe model (arena off, optimizations off)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.enable_cpu_mem_arena = False
    sess = ort.InferenceSession(probe_model(p).SerializeToString(), so, providers=["CPUExecutionProvider"])
    np_type = onnx.helper.tensor_dtype_to_np_dtype(p.dtype)
    x = (np.random.default_rng(0).random(COLS) + 1.5).astype(np_type)
    sess.run(None, {"x": x})
    _, trace = trace_heap(lambda: sess.run(None, {"x": x}))
    return trace.peak_bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="JSON with every probe's heap peak and verdict")
    args = ap.parse_args(argv)
    rows = []
    for p in PROBES:
        name = f"{p.domain}.{p.op}" if p.domain else p.op
        try:
            peak = heap_peak(p)
        except Exception as exc:  # noqa: BLE001 - an op this ORT build lacks: report and go on
            rows.append({"op": name, "heap_peak_bytes": None, "in_place": None,
                         "error": str(exc).strip().splitlines()[0][:120]})
            continue
        rows.append({"op": name, "heap_peak_bytes": peak, "in_place": peak < 1.5 * BLOCK,
                     "in_model_list": p.op in INPLACE_OP_TYPES})
    table = Table(title=f"ORT {ort.__version__} CPU: in place? (x -> Expand 2 MiB -> OP -> ReduceSum, heap peak)")
    for col in ("op", "heap peak", "in place", "in the model's list"):
        table.add_column(col, justify="left" if col == "op" else "right")
    for r in rows:
        table.add_row(r["op"], "-" if r["heap_peak_bytes"] is None else f"{r['heap_peak_bytes']:,}",
                      r.get("error", "") if r["in_place"] is None else ("yes" if r["in_place"] else "no"),
                      "" if r["in_place"] is None else ("yes" if r["in_model_list"] else "no"))
    Console().print(table)
    wrong = [r["op"] for r in rows if r["in_place"] is not None and r["in_place"] != r["in_model_list"]]
    print("model list disagrees with ORT on:", ", ".join(wrong) or "none")
    if args.out:
        command = "python benchmarks/ort_inplace_ops.py " + " ".join(argv if argv is not None else sys.argv[1:])
        args.out.write_text(json.dumps({"command": command, "onnxruntime": ort.__version__, "block_bytes": BLOCK,
                                        "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
