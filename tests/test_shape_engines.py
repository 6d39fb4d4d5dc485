"""Shape inference past onnx's own: OpenVINO on a pinned copy with external data, and ONNX Runtime runs for
contrib ops no engine infers (onnx_sched.importers.onnx_shapes, observed_shapes)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import run_ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.importers.observed_shapes import observed_shapes
from onnx_sched.importers.onnx import import_onnx, parse_dims


def _const(name: str, value: list[int]) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.int64)))


def _reshape_by_mod_model() -> onnx.ModelProto:
    """``Relu(Reshape(x @ w, [-1, 9 mod 5]))`` with a dynamic batch: onnx's inference does not fold ``Mod``, so the
    last two shapes come from OpenVINO."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), _const("a", [9]), _const("m", [5]),
             helper.make_node("Mod", ["a", "m"], ["k"]), _const("neg", [-1]),
             helper.make_node("Concat", ["neg", "k"], ["shape"], axis=0),
             helper.make_node("Reshape", ["y", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["out"])]
    w = numpy_helper.from_array(np.random.default_rng(0).random((32, 32)).astype(np.float32), "w")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 32])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, None])], initializer=[w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_pinned_dims_reach_openvino_when_the_weights_are_external(tmp_path):
    model = _reshape_by_mod_model()
    onnx.save(model, tmp_path / "inline.onnx")
    onnx.save(model, tmp_path / "ext.onnx", save_as_external_data=True, location="ext.weights", size_threshold=1024)
    inline = import_onnx(tmp_path / "inline.onnx", dims=parse_dims(["b=3"]))
    external = import_onnx(tmp_path / "ext.onnx", dims=parse_dims(["b=3"]))
    assert inline.shape_sources["openvino"] == 2 and external.shape_sources["openvino"] == 2
    r = external.graph.tensor_names.index("r")
    assert external.graph.tensor_bytes[r] == 3 * 32 * 4
    assert external.graph.tensor_bytes.tolist() == inline.graph.tensor_bytes.tolist()


def _qlinear_pool_model(n: int = 2, c: int = 8, hw: int = 5) -> onnx.ModelProto:
    """Quantize -> com.microsoft QLinearGlobalAveragePool -> Dequantize, as ONNX Runtime's quantizer writes it."""
    scale = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    zero = numpy_helper.from_array(np.array(128, np.uint8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("QLinearGlobalAveragePool", ["xq", "s", "z", "s", "z"], ["pq"], domain="com.microsoft",
                              channels_last=0),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
                          initializer=[scale, zero])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def test_contrib_op_shapes_come_from_onnx_runtime_runs(tmp_path):
    imported = import_onnx(_qlinear_pool_model())
    assert imported.shape_sources["ort-run"] == 2  # the pool's output and the model's output
    g = imported.graph
    assert g.tensor_bytes[g.tensor_names.index("pq")] == 2 * 8  # uint8, N x C x 1 x 1
    assert g.tensor_bytes[g.tensor_names.index("y")] == 2 * 8 * 4
    src, out = tmp_path / "q.onnx", tmp_path / "q.sched.onnx"
    onnx.save(_qlinear_pool_model(), src)
    res = subprocess.run([sys.executable, "-m", "onnx_sched.cli", "optimize", src, "-o", out, "--objective",
                          "peak-mem-devices", "--devices", "CPU,GPU", "--time-limit", "2"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    onnx.checker.check_model(str(out))
    np.testing.assert_array_equal(run_ort(str(src))[0], run_ort(str(out))[0])


def test_observed_shapes_leave_out_sizes_that_follow_the_data():
    nodes = [helper.make_node("Greater", ["x", "half"], ["mask"]), helper.make_node("NonZero", ["mask"], ["where"])]
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info("where", TensorProto.INT64, None)], initializer=[half])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    found = observed_shapes(model, ["mask", "where"], None)
    assert found == {"mask": (TensorProto.BOOL, (64,))}  # NonZero's count differs between the two seeded runs
    dynamic = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    del model.graph.input[:]
    model.graph.input.append(dynamic)
    assert observed_shapes(model, ["mask"], None) == {}  # no static input shape, no run


def test_a_run_does_not_size_a_standard_op_whose_shape_follows_the_data() -> None:
    """``SequenceAt`` with an index fed at run time: both runs read element 0 (integer inputs are zeros), so only
    the sequence bound may size it, never one observed element."""
    from onnx_sched.importers.onnx_shapes import _after_custom_ops

    contrib = _qlinear_pool_model()
    assert _after_custom_ops(contrib.graph) == {"pq", "y"}
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
             helper.make_node("SequenceAt", ["seq", "i"], ["picked"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4]),
                                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [16]),
                                       helper.make_tensor_value_info("i", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("picked", TensorProto.FLOAT, [None])])
    assert _after_custom_ops(g) == set()


def test_an_op_nothing_knows_is_named_with_what_to_do(tmp_path):
    from onnx_sched.errors import UnknownShapeError

    nodes = [helper.make_node("Foo", ["x"], ["y"], domain="my.domain"), helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1)],
                              ir_version=10)
    with pytest.raises(UnknownShapeError, match=r"my\.domain\.Foo is an op no shape inference knows.*value_info"):
        import_onnx(model)
    model.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]))
    assert import_onnx(model).graph.tensor_bytes.tolist() == [24, 24, 24]
