"""Does OpenVINO's HETERO plugin compute what the whole model computes, for random two-device splits?

Each corpus model is split over ``CPU`` and ``CPUB`` (the CPU plugin registered a second time) by
``--placements`` random placements (seeds 0..N-1), run once through ``bench_openvino`` (HETERO with
per-op affinities, f32) and compared with the whole model on ``CPU``.  Then, for each model that
failed, the ops that break it alone: every placement with exactly one op on ``CPUB``.

    python benchmarks/openvino_hetero_check.py --out docs/openvino_hetero_check.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from onnx_sched.bench.runtimes.openvino import bench_openvino
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.models.training.regal_data import CORPUS

MODELS = ("light_squeezenet", "light_inception_v1", "resnet50", "mobilenet_v2", "light_shufflenet",
          "efficientnet_b0", "bert_base", "unet")
DEVICES = ["CPU", "CPUB"]


def run(imp, placement: np.ndarray) -> dict:
    try:
        r = bench_openvino(imp, placement, DEVICES, warmup=0, repeats=1)
    except RuntimeError as exc:
        return {"outputs_equal": False, "error": str(exc).strip().splitlines()[-1]}
    return {"outputs_equal": bool(r["outputs_equal"]), "max_abs_error": r["max_abs_error"], "sub_models": r["sub_models"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--placements", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for name in args.models.split(","):
        imp = import_onnx(CORPUS / f"{name}.onnx")
        n = imp.graph.n_ops
        random = [run(imp, np.random.default_rng(s).integers(0, 2, n)) for s in range(args.placements)]
        row = {"model": name, "ops": n, "random": random}
        if not all(r["outputs_equal"] for r in random):
            breaking = []
            for i in range(n):
                one = np.zeros(n, np.int64)
                one[i] = 1
                if not run(imp, one)["outputs_equal"]:
                    breaking.append({"op": imp.graph.op_names[i], "type": imp.graph.op_types[i]})
            row["single_op_splits_that_break"] = breaking
        rows.append(row)
        print(name, n, [("ok" if r["outputs_equal"] else r.get("error") or f"differs {r['max_abs_error']:.3g}")
                        for r in random], row.get("single_op_splits_that_break", ""), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"command": "python benchmarks/openvino_hetero_check.py " + " ".join(
            sys.argv[1:] if argv is None else argv), "rows": rows, "seconds": time.perf_counter() - t0}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
