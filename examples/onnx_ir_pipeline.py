"""onnx-sched as one pass of an ``onnx_ir`` PassManager pipeline.

    python examples/onnx_ir_pipeline.py [MODEL.onnx] [--method auto] [--time-limit 10]

Cleans the model with onnx_ir's own passes, reorders its nodes for peak memory
with :class:`OnnxSchedPass` (in place: the same ``ir.Node`` objects, moved), then
checks it and writes ``<model>.ir_peakmem.onnx`` in the current directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import onnx_ir as ir
import onnx_ir.passes
import onnx_ir.passes.common as common

from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(HERE / "randwire_ws.onnx"))
    parser.add_argument("--method", default="auto")
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()

    model = ir.load(args.model)
    schedule = OnnxSchedPass("peak-mem", method=args.method, time_limit=args.time_limit)
    pipeline = onnx_ir.passes.PassManager(
        [
            common.RemoveUnusedNodesPass(),
            common.IdentityEliminationPass(),
            schedule,
            common.CheckerPass(),
        ]
    )
    result = pipeline(model)
    out = Path.cwd() / (Path(args.model).stem + ".ir_peakmem.onnx")
    ir.save(result.model, out)
    report = schedule.last_report or {}
    peaks = report.get("peak_bytes", {})
    if peaks:
        print(f"reordered={result.modified}: predicted peak {peaks['input'] / 1e6:.2f} MB -> "
              f"{peaks['output'] / 1e6:.2f} MB with {report['method_used']}; wrote {out}")
    else:
        print(f"reordered={result.modified}: empty graph, peak unchanged; wrote {out}")


if __name__ == "__main__":
    main()
