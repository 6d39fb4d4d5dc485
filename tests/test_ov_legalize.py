"""OpenVINO legalization: AveragePool used as a global pool -> GlobalAveragePool, only when equivalent."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnx_sched.errors import ModelLoadError
from onnx_sched.exporters.ov_legalize import legalize_for_openvino

from conftest import CORPUS, local_function_model

ov = pytest.importorskip("openvino")


def pool_model(spatial: list[int | str], **attrs: object) -> onnx.ModelProto:
    """x [1, 3, *spatial] -> Mul(2) -> AveragePool(**attrs) -> Relu -> y (the pool is not a graph output)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, *spatial])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Mul", ["x", "two"], ["m"], name="mul"),
             helper.make_node("AveragePool", ["m"], ["p"], name="pool", **attrs),
             helper.make_node("Relu", ["p"], ["y"], name="relu")]
    model = helper.make_model(helper.make_graph(nodes, "pool", [x], [y], [two]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _ort_at_least(major: int, minor: int) -> bool:
    return tuple(int(v) for v in ort.__version__.split(".")[:2]) >= (major, minor)


#: ONNX Runtime before 1.29 divides a ceil-mode window that overhangs the input by the whole kernel (the overhang
#: counted as padding; onnxruntime 1.22 and 1.26 measured), later ones by the window inside the input and its pads,
#: as PyTorch's ``AvgPool2d(ceil_mode=True)`` -- which is what the rewrite keeps.
ORT_CEIL_WINDOWS_INSIDE = _ort_at_least(1, 29)


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def run_openvino(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    compiled = ov.Core().compile_model(read_onnx_into_openvino(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return np.asarray(compiled({compiled.inputs[0]: x})[compiled.outputs[0]])


EQUIVALENT = {
    # transformers EfficientNet's pooler: nn.AvgPool2d(1280, ceil_mode=True) on a 7x7 map
    "efficientnet_pooler": ([7, 7], dict(kernel_shape=[1280, 1280], strides=[1280, 1280], ceil_mode=1,
                                         count_include_pad=1, pads=[0, 0, 0, 0])),
    "ceil_no_count_pad": ([7, 7], dict(kernel_shape=[1280, 1280], strides=[1280, 1280], ceil_mode=1)),
    "ceil_overhang_lt_stride": ([7, 7], dict(kernel_shape=[9, 9], strides=[3, 3], ceil_mode=1, count_include_pad=1)),
    "kernel_equals_input": ([7, 5], dict(kernel_shape=[7, 5])),
    "mixed_axes_1d": ([6], dict(kernel_shape=[8], strides=[4], ceil_mode=1, count_include_pad=1)),
    "kernel_equals_input_valid": ([4, 4, 4], dict(kernel_shape=[4, 4, 4], auto_pad="VALID")),
}


@pytest.mark.parametrize("case", list(EQUIVALENT))
def test_global_average_pool_rewrite(case: str) -> None:
    spatial, attrs = EQUIVALENT[case]
    model = pool_model(spatial, **attrs)
    before = model.SerializeToString()
    out = legalize_for_openvino(model)
    assert model.SerializeToString() == before, "the input model must not be modified"
    pool = next(n for n in out.graph.node if n.name == "pool")
    assert pool.op_type == "GlobalAveragePool" and list(pool.output) == ["p"] and not pool.attribute
    x = np.random.default_rng(0).standard_normal((1, 3, *spatial)).astype(np.float32)
    mean = np.maximum(2 * x.mean(axis=tuple(range(2, x.ndim)), keepdims=True), 0)
    np.testing.assert_allclose(run_ort(out, x), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_openvino(model, x), mean, rtol=1e-5, atol=1e-5)  # OpenVINO reads the original
    if ORT_CEIL_WINDOWS_INSIDE or not attrs.get("ceil_mode"):
        np.testing.assert_allclose(run_ort(model, x), mean, rtol=1e-5, atol=1e-6)


NOT_EQUIVALENT = {
    # floor mode, kernel > input: an empty output by the ONNX shape formula; ONNX Runtime
    # makes one output and, counting the overhang as padding, divides the 7x7 sum by 81
    "floor_kernel_gt_input": ([7, 7], dict(kernel_shape=[9, 9], strides=[9, 9], count_include_pad=1)),
    # padding counted in the divisor
    "pads_counted": ([7, 7], dict(kernel_shape=[9, 9], pads=[1, 1, 1, 1], count_include_pad=1)),
    "same_upper": ([7, 7], dict(kernel_shape=[9, 9], strides=[9, 9], auto_pad="SAME_UPPER", count_include_pad=1)),
    "kernel_lt_input": ([7, 7], dict(kernel_shape=[3, 3])),
    "dynamic_spatial": (["h", "w"], dict(kernel_shape=[7, 7])),
}


@pytest.mark.parametrize("case", list(NOT_EQUIVALENT))
def test_non_equivalent_average_pool_left_unchanged(case: str) -> None:
    spatial, attrs = NOT_EQUIVALENT[case]
    model = pool_model(spatial, **attrs)
    assert legalize_for_openvino(model) is model


def test_floor_mode_pool_is_not_a_global_mean_and_openvino_error_is_one_line() -> None:
    spatial, attrs = NOT_EQUIVALENT["floor_kernel_gt_input"]
    model = pool_model(spatial, **attrs)
    x = np.abs(np.random.default_rng(1).standard_normal((1, 3, 7, 7))).astype(np.float32)
    got = run_ort(model, x)
    if _ort_at_least(1, 22):  # one output, the 7x7 sum over 81 (NOT_EQUIVALENT's comment)
        np.testing.assert_allclose(got, 2 * x.sum(axis=(2, 3), keepdims=True) / 81, rtol=1e-5)
    else:  # onnxruntime 1.20: the empty output of ONNX's shape formula
        assert got.shape == (1, 3, 0, 0)
    with pytest.raises(ModelLoadError) as err:
        run_openvino(model, x)
    msg = str(err.value)
    assert "\n" not in msg and "AveragePool" in msg and "'pool'" in msg


def test_an_op_openvino_cannot_convert_is_named_in_the_one_line_error() -> None:
    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    model.ir_version = 10
    with pytest.raises(ModelLoadError, match=r"^OpenVINO cannot read the ONNX model: it has no conversion for "
                                             r"com\.example\.Frobnicate$"):
        read_onnx_into_openvino(model)


def test_corpus_efficientnet_reads_into_openvino() -> None:
    path = CORPUS / "onnx" / "efficientnet_b0.onnx"
    if not path.exists():
        pytest.skip("corpus not present")
    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    model = onnx.load(str(path), load_external_data=False)
    out = legalize_for_openvino(model)
    changed = [(a.name, b.op_type) for a, b in zip(model.graph.node, out.graph.node) if a.op_type != b.op_type]
    assert changed == [("/m/efficientnet/pooler/AveragePool", "GlobalAveragePool")]
    assert read_onnx_into_openvino(model).outputs[0].get_partial_shape().to_shape() == [1, 1000]


def test_local_functions_are_inlined_for_openvino_and_placed_by_their_calls() -> None:
    from onnx_sched.api import optimize_model
    from onnx_sched.exporters.openvino import export_openvino, placement_from_rt_info, read_onnx_into_openvino
    from onnx_sched.importers.onnx import import_onnx

    model = local_function_model()
    before = model.SerializeToString()
    out = legalize_for_openvino(model)
    assert model.SerializeToString() == before, "the input model must not be modified"
    assert not out.functions and "Swish" not in {n.op_type for n in out.graph.node}
    x = np.random.default_rng(2).standard_normal((1, 8)).astype(np.float32)
    np.testing.assert_allclose(run_openvino(model, x), run_ort(model, x), rtol=1e-5, atol=1e-6)
    # a placement of the calls reaches the inlined bodies: every OpenVINO op gets a device
    result = optimize_model(model, "peak-mem", "partition-dfs", time_limit=5.0, devices=("CPU", "GPU"))
    imported = import_onnx(model)
    assert imported.graph.n_ops == 4
    affinity = placement_from_rt_info(export_openvino(imported, result.schedule, ("CPU", "GPU")))["affinity"]
    ops = [op.get_friendly_name() for op in read_onnx_into_openvino(model).get_ordered_ops()]
    assert set(ops) <= set(affinity) and set(affinity.values()) <= {"CPU", "GPU"}
    device = dict(zip(imported.graph.op_names, np.asarray(result.schedule.placement)))
    for call in ("swish_a", "swish_b"):  # the body's ops (named <call>/<k>) run where the call was placed
        body = [name for name in ops if name.startswith(f"{call}/")]
        assert len(body) == 2 and {affinity[name] for name in body} == {("CPU", "GPU")[device[call]]}
