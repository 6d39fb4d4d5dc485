"""A model's structure without its large weights (onnx_sched.onnx_structure) and the work that uses it."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.onnx_structure import LARGE_ELEMENTS, annotate_shapes, infer_shapes, structure_only


def _model(ir_version: int = 10, weights_as_inputs: bool = False) -> onnx.ModelProto:
    """x (2, 64) @ w (64, 128) -> Reshape by the small constant s -> y (4, 64); w large, s small."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w")
    s = numpy_helper.from_array(np.array([4, -1], np.int64), "s")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Reshape", ["m", "s"], ["y"])]
    inputs = [x] + ([helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in (w, s)]
                    if weights_as_inputs else [])
    return helper.make_model(helper.make_graph(nodes, "g", inputs, [y], [w, s]), ir_version=ir_version,
                             opset_imports=[helper.make_opsetid("", 17)])


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    g = model.graph
    return {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
            for vi in [*g.value_info, *g.output] if vi.type.tensor_type.HasField("shape")}


def test_large_initializers_become_typed_inputs_and_small_ones_stay():
    model = _model()
    assert 64 * 128 > LARGE_ELEMENTS >= 2
    light = structure_only(model)
    assert [t.name for t in light.graph.initializer] == ["s"]
    w = next(i for i in light.graph.input if i.name == "w")
    assert w.type.tensor_type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in w.type.tensor_type.shape.dim] == [64, 128]
    assert len(model.graph.initializer) == 2  # the model itself is untouched
    assert light.ByteSize() < model.ByteSize() / 10


def test_ir3_initializers_already_listed_as_inputs_are_not_declared_twice():
    light = structure_only(_model(ir_version=3, weights_as_inputs=True))
    assert [i.name for i in light.graph.input] == ["x", "w", "s"]


def test_a_model_without_large_weights_is_returned_as_is():
    model = _model()
    assert structure_only(model, max_elements=64 * 128) is model


def test_external_data_counts_as_large_whatever_its_size():
    model = _model()
    s = model.graph.initializer[1]
    s.ClearField("raw_data")
    s.data_location = TensorProto.EXTERNAL
    s.external_data.add(key="location", value="weights.bin")
    assert [i.name for i in structure_only(model).graph.input] == ["x", "w", "s"]


def test_inferred_shapes_match_onnx_on_the_whole_model():
    model = _model()
    whole = onnx.shape_inference.infer_shapes(model, data_prop=True)
    assert _shapes(infer_shapes(model, data_prop=True)) == _shapes(whole) == {"m": [2, 128], "y": [4, 64]}


def test_annotate_writes_value_infos_and_keeps_the_weights():
    model = _model()
    before = [t.SerializeToString() for t in model.graph.initializer]
    annotate_shapes(model)
    assert _shapes(model) == {"m": [2, 128], "y": [4, 64]}
    assert [t.SerializeToString() for t in model.graph.initializer] == before
    assert [i.name for i in model.graph.input] == ["x"]
    onnx.checker.check_model(model, full_check=True)


def _run(model: onnx.ModelProto, feed: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def test_torch_preparation_folds_an_identity_of_a_weight_into_that_weight_by_name():
    from onnx_sched.bench.runtimes.torch_parts import prepare_for_torch

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    nodes = [helper.make_node("Identity", ["w"], ["w_shared"]),  # exporters share weights this way
             helper.make_node("Identity", ["w_shared"], ["w_again"]),
             helper.make_node("Add", ["b", "b"], ["b2"]),  # a computed constant: ONNX Runtime folds it
             helper.make_node("MatMul", ["x", "w_shared"], ["m"]),
             helper.make_node("Add", ["m", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 64]),
                               helper.make_tensor_value_info("w_again", TensorProto.FLOAT, [64, 64])], [w, b])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    prepared = prepare_for_torch(model)
    assert {n.op_type for n in prepared.graph.node} == {"MatMul", "Add", "Identity"}  # Identity: output copies only
    assert sorted(t.name for t in prepared.graph.initializer) == ["b2", "w_again", "w_shared"]
    folded = {t.name: numpy_helper.to_array(t) for t in prepared.graph.initializer}
    np.testing.assert_array_equal(folded["w_shared"], numpy_helper.to_array(w))
    np.testing.assert_array_equal(folded["w_again"], numpy_helper.to_array(w))
    feed = {"x": rng.standard_normal((3, 64)).astype(np.float32)}
    for want, got in zip(_run(model, feed), _run(prepared, feed)):
        np.testing.assert_array_equal(want, got)
    assert len(model.graph.node) == 5 and len(model.graph.initializer) == 2  # the caller's model is untouched


def test_the_importer_sizes_a_model_whose_shapes_need_a_small_constant_beside_a_large_weight():
    from onnx_sched.importers.onnx import import_onnx

    model = _model()
    assert structure_only(model) is not model  # the shape engines see the structure only
    graph = import_onnx(model).graph
    sizes = dict(zip(graph.tensor_names, graph.tensor_bytes))
    assert sizes["m"] == 2 * 128 * 4 and sizes["y"] == 4 * 64 * 4 and sizes["w"] == 64 * 128 * 4


def test_torch_preparation_keeps_a_folded_weight_that_only_a_subgraph_reads():
    from onnx_sched.bench.runtimes.torch_parts import prepare_for_torch

    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    then = helper.make_graph([helper.make_node("Add", ["x", "w_shared"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    other = helper.make_graph([helper.make_node("Sub", ["x", "w_shared"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Identity", ["w"], ["w_shared"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    prepared = prepare_for_torch(model)
    assert "w_shared" in {t.name for t in prepared.graph.initializer}
    for c in (True, False):
        feed = {"x": np.ones((2, 3), np.float32), "c": np.array(c)}
        np.testing.assert_array_equal(_run(model, feed)[0], _run(prepared, feed)[0])
