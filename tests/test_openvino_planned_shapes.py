"""OpenVINO runs an ONNX import at the shapes it was planned with (``--dim``): a split of a dynamic-quantized
transformer with dynamic batch and sequence dims, which OpenVINO's HETERO could not create an infer request for
while its inner tensors stayed dynamic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")


def _dynamic_quantized_transformer(tmp_path: Path) -> Path:
    from onnxruntime.quantization import quantize_dynamic

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    src = tmp_path / "transformer.onnx"
    torch.onnx.export(encoder, (torch.randn(2, 5, 32),), str(src), input_names=["x"],
                      dynamic_axes={"x": {0: "b", 1: "s"}}, opset_version=17, dynamo=False)
    model = onnx.load(src)
    model.ir_version = min(model.ir_version, 10)
    onnx.save(model, src)
    out = tmp_path / "transformer_qdyn.onnx"
    quantize_dynamic(str(src), str(out))
    return out


def test_a_split_of_a_model_with_pinned_dynamic_dims_runs_in_openvino_at_those_shapes(tmp_path) -> None:
    from onnx_sched.bench.runtimes.openvino import bench_openvino
    from onnx_sched.bench.runtimes.openvino_inputs import openvino_model_of
    from onnx_sched.importers.onnx import import_onnx

    imported = import_onnx(_dynamic_quantized_transformer(tmp_path), dims={"b": 2, "s": 5})
    assert [list(p.get_partial_shape().to_shape()) for p in openvino_model_of(imported).inputs] == [[2, 5, 32]]
    placement = np.arange(imported.graph.n_ops) % 2  # every other op on the second device
    report = bench_openvino(imported, placement, ["CPU", "CPUB"], warmup=0, repeats=1)
    assert report["sub_models"] > 2 and report["outputs_equal"], report
