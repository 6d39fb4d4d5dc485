"""Reorder an ONNX model for peak memory with the Python API, then check it in ONNX Runtime.

    python examples/optimize_api.py [MODEL.onnx] [--method auto] [--time-limit 10] [--bench]

Writes ``<model>.peakmem.onnx`` in the current directory and prints the predicted
peak before/after.  With ``--bench`` it also measures both files in fresh ONNX
Runtime processes (arena off and on) and checks the outputs are bitwise equal.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import onnx

import onnx_sched
from onnx_sched.bench.measure import bench_models

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(HERE / "randwire_ws.onnx"))
    parser.add_argument("--method", default="auto")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--bench", action="store_true", help="measure both models in ONNX Runtime")
    args = parser.parse_args()

    model = onnx.load(args.model)
    reordered = onnx_sched.optimize(model, objective="peak-mem", method=args.method, time_limit=args.time_limit)
    out = Path.cwd() / (Path(args.model).stem + ".peakmem.onnx")
    onnx.save(reordered, out)

    meta = {p.key: p.value for p in reordered.metadata_props}
    before = int(meta["onnx_sched.input_peak_bytes"])
    after = int(meta["onnx_sched.predicted_peak_bytes"])
    print(f"method {meta['onnx_sched.method']}: predicted peak {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB "
          f"(lower bound {int(meta['onnx_sched.lower_bound_bytes']) / 1e6:.2f} MB); wrote {out}")

    if args.bench:
        report = bench_models(args.model, out, repeats=5, warmup=1)
        for run in report.runs:
            print(f"{run.label:>3} arena={'on ' if run.arena else 'off'} measured peak RSS delta "
                  f"{run.peak_rss_delta / 1e6:7.1f} MB, median {run.latency_median_s * 1e3:.2f} ms")
        print("outputs bitwise equal" if report.outputs_equal else f"outputs differ: {report.mismatched_outputs}")


if __name__ == "__main__":
    main()
