"""OpenVINO alone, no onnx-sched code: HETERO computes light_squeezenet wrong for some manual affinities.

The corpus ONNX file is read by OpenVINO's own frontend (its initializers removed from the graph
inputs first, as for any IR < 4 model, so they stay constants), the CPU plugin is registered a
second time as ``CPUB``, and single ops get affinity ``CPUB`` (everything else ``CPU``).  With
OpenVINO 2026.4 on this machine (results 6.1): the last Relu (``n63``) or Conv (``n62``) alone on
CPUB gives a uniform softmax (max abs difference 0.124 from the whole model on CPU), the
ReduceMean (``n64``) fails at the first inference ("the model input (shape=[1,1000,1,1]) and the
tensor (shape=(0.0.0.0)) are incompatible"), and an earlier Relu (``n59``) is exact.  Prints one line per
case; the report for OpenVINO's HETERO maintainers.

    python benchmarks/openvino_hetero_repro.py
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import openvino as ov

from onnx_sched.models.training.regal_data import CORPUS

CASES = ({"n63"}, {"n62", "n62/WithoutBiases"}, {"n64"}, {"n59"})


def main() -> int:
    core = ov.Core()
    core.register_plugin(os.path.join(os.path.dirname(ov.__file__), "libs", "libopenvino_intel_cpu_plugin.so"), "CPUB")
    for device in ("CPU", "CPUB"):
        core.set_property(device, {"INFERENCE_PRECISION_HINT": "f32"})
    proto = onnx.load(str(CORPUS / "light_squeezenet.onnx"))
    inits = {i.name for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in inits]
    del proto.graph.input[:]
    proto.graph.input.extend(inputs)
    model = core.read_model(proto.SerializeToString(), b"")
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    reference = np.asarray(core.compile_model(model, "CPU")(x)[0])
    print(f"OpenVINO {ov.get_version()}")
    for on_b in CASES:
        placed = model.clone()
        for op in placed.get_ordered_ops():
            op.get_rt_info()["affinity"] = "CPUB" if op.get_friendly_name() in on_b else "CPU"
        try:
            got = np.asarray(core.compile_model(placed, "HETERO:CPU,CPUB")(x)[0])
            print(f"{sorted(on_b)} on CPUB: max abs difference from CPU alone {np.abs(got - reference).max():.3g}")
        except RuntimeError as exc:
            print(f"{sorted(on_b)} on CPUB: fails: {str(exc).strip().splitlines()[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
