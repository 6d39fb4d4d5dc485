"""Data-dependent shapes (NonZero, NonMaxSuppression) are sized at their upper bound, and said so
(onnx_sched.importers.bounded_shapes); a dimension without a bound still stops the import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import openvino as ov
import pytest
from conftest import assert_bitwise_equal, run_ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.errors import UnknownShapeError
from onnx_sched.importers.dispatch import import_model
from onnx_sched.importers.onnx import import_onnx

vi = helper.make_tensor_value_info


def _model(nodes: list, inputs: list, outputs: list, inits: tuple = ()) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "dd", inputs, outputs, initializer=list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def nonzero_model(rows: int = 8, cols: int = 16) -> onnx.ModelProto:
    """Relu -> NonZero -> Transpose -> GatherND -> ReduceSum: the indices and the gathered values have
    as many rows as the input has non-zeros."""
    return _model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("NonZero", ["r"], ["nz"]),
                   helper.make_node("Transpose", ["nz"], ["nzt"]), helper.make_node("GatherND", ["r", "nzt"], ["g"]),
                   helper.make_node("ReduceSum", ["g"], ["y"], keepdims=1)],
                  [vi("x", TensorProto.FLOAT, [rows, cols])], [vi("y", TensorProto.FLOAT, [1])])


def nms_model(boxes: int = 100, keep: int = 10) -> onnx.ModelProto:
    inits = (numpy_helper.from_array(np.array([keep], np.int64), "keep"),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.1], np.float32), "threshold"))
    return _model([helper.make_node("Sigmoid", ["logits"], ["scores"]),
                   helper.make_node("NonMaxSuppression", ["boxes", "scores", "keep", "iou", "threshold"], ["sel"]),
                   helper.make_node("Cast", ["sel"], ["self"], to=TensorProto.FLOAT),
                   helper.make_node("ReduceSum", ["self"], ["y"], keepdims=0)],
                  [vi("boxes", TensorProto.FLOAT, [1, boxes, 4]), vi("logits", TensorProto.FLOAT, [1, 1, boxes])],
                  [vi("y", TensorProto.FLOAT, [])], inits)


def _bytes(graph) -> dict[str, int]:  # noqa: ANN001
    return {n: int(b) for n, b in zip(graph.tensor_names, graph.tensor_bytes)}


def test_nonzero_indices_and_what_follows_are_sized_for_every_element():
    imported = import_onnx(nonzero_model(8, 16))
    sizes = _bytes(imported.graph)
    assert sizes["nz"] == sizes["nzt"] == 2 * 128 * 8  # int64 [rank, at most 128 non-zeros]
    assert sizes["g"] == 128 * 4
    assert imported.graph.metadata["upper_bound_tensors"] == 3
    assert imported.shape_sources["openvino-upper-bound"] == 3


def test_nms_output_is_bounded_by_its_constant_box_limit_in_both_importers():
    model = nms_model(boxes=100, keep=10)
    assert _bytes(import_onnx(model).graph)["sel"] == 10 * 3 * 8
    from_ov = import_model(ov.Core().read_model(model.SerializeToString(), b""))
    assert _bytes(from_ov.graph)["self"] == 10 * 3 * 4
    assert from_ov.graph.metadata["upper_bound_tensors"] >= 2


def test_a_dimension_without_a_bound_still_stops_the_import():
    """A symbolic input dimension has no upper bound: the size stays unknown and --dim is named."""
    model = nonzero_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    with pytest.raises(UnknownShapeError, match="--dim"):
        import_onnx(model)
    assert import_onnx(model, dims={"batch": 8}).graph.metadata["upper_bound_tensors"] == 3


def test_optimize_says_the_figures_are_bounds_and_keeps_the_outputs(tmp_path):
    src, out = tmp_path / "nms.onnx", tmp_path / "nms.sched.onnx"
    onnx.save(nms_model(), src)
    res = subprocess.run([sys.executable, "-m", "onnx_sched.cli.__main__", "optimize", str(src), "-o", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "data-dependent shapes" in " ".join(res.stdout.split())
    onnx.checker.check_model(str(out))
    assert_bitwise_equal(run_ort(str(src)), run_ort(str(out)))

