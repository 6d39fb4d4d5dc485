"""Sequence values (lists of tensors) are sized from the ops that build them
(onnx_sched.importers.sequence_sizes), so models with sequence ops import, reorder, split over devices
and run with their outputs unchanged."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_bitwise_equal, run_ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.api import optimize_model
from onnx_sched.bench.inputs import random_inputs
from onnx_sched.bench.outputs import compare_outputs
from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, split_model
from onnx_sched.errors import UnknownShapeError
from onnx_sched.importers.onnx import import_onnx

vi = helper.make_tensor_value_info
F32 = 4


def _init(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(value, name)


def sequence_model(mixed: bool = False) -> onnx.ModelProto:
    """x[1,64] -> MatMul -> a -> SplitToSequence (4 chunks of 16) -> SequenceAt 0 and 3 -> SequenceConstruct
    -> ConcatFromSequence -> MatMul -> y0, beside a side branch x -> MatMul -> ReduceSum; y = y0 + that.
    ``mixed``: the second SequenceConstruct element is ``a`` itself (64 wide), and the element read back by a
    SequenceAt at a position the caller gives (input ``k``) has no shape before run time: it is sized at its
    upper bound (the whole sequence)."""
    r = np.random.default_rng(0)
    inits = [_init("w1", r.standard_normal((64, 64)).astype(np.float32)),
             _init("w2", r.standard_normal((80 if mixed else 32, 8)).astype(np.float32)),
             _init("w3", r.standard_normal((64, 64)).astype(np.float32)),
             _init("i0", np.array(0, np.int64)), _init("i3", np.array(3, np.int64)),
             _init("sp", np.array(16, np.int64))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("SplitToSequence", ["a", "sp"], ["seq"], axis=1, name="split"),
             helper.make_node("MatMul", ["x", "w3"], ["side"], name="mm3"),
             helper.make_node("SequenceAt", ["seq", "i0"], ["e0"], name="at0"),
             helper.make_node("SequenceAt", ["seq", "i3"], ["e3"], name="at3"),
             helper.make_node("Relu", ["e3"], ["r3"], name="relu"),
             helper.make_node("SequenceConstruct", ["e0", "a" if mixed else "r3"], ["s2"], name="construct")]
    nodes += [helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=1, name="concat"),
              helper.make_node("MatMul", ["c", "w2"], ["y0"], name="mm2"),
              helper.make_node("ReduceSum", ["side"], ["z"], keepdims=1, name="sum")]
    if mixed:  # one element read back, reduced to a scalar, added too
        nodes += [helper.make_node("SequenceAt", ["s2", "k"], ["back"], name="at_back"),
                  helper.make_node("ReduceSum", ["back"], ["b"], keepdims=0, name="sum_back"),
                  helper.make_node("Add", ["z", "b"], ["zb"], name="add_back")]
    nodes += [helper.make_node("Add", ["y0", "zb" if mixed else "z"], ["y"], name="add")]
    inputs = [vi("x", TensorProto.FLOAT, [1, 64])] + ([vi("k", TensorProto.INT64, [])] if mixed else [])
    model = helper.make_model(helper.make_graph(nodes, "seq", inputs,
                                                [vi("y", TensorProto.FLOAT, [1, 8])], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def _bytes(imported, name: str) -> int:
    g = imported.graph
    return int(g.tensor_bytes[list(g.tensor_names).index(name)])


def test_sequences_hold_the_bytes_of_their_elements() -> None:
    imp = import_onnx(sequence_model())
    assert _bytes(imp, "seq") == 64 * F32  # the four chunks of a
    assert _bytes(imp, "s2") == 2 * 16 * F32  # e0 and r3
    assert _bytes(imp, "c") == 32 * F32
    g = imp.graph
    assert g.tensor_dtypes[list(g.tensor_names).index("seq")] == "sequence"
    assert g.metadata["upper_bound_tensors"] == 0


def test_an_element_of_unknown_shape_is_sized_at_the_whole_sequence_and_counted_as_a_bound() -> None:
    model = sequence_model(mixed=True)
    imp = import_onnx(model)
    assert _bytes(imp, "s2") == (16 + 64) * F32
    assert _bytes(imp, "back") == (16 + 64) * F32  # e0 or a, chosen at run time: at most both
    assert imp.graph.metadata["upper_bound_tensors"] >= 1
    notes = optimize_model(model, "peak-mem", "auto", time_limit=5.0).report["notes"]
    assert any("read out of a sequence" in n and "worst-case bounds" in n for n in notes)


def test_a_sequence_built_by_an_op_that_does_not_fix_its_elements_still_stops_the_import() -> None:
    model = sequence_model()
    body = helper.make_graph([helper.make_node("Relu", ["t"], ["u"])], "body", [vi("t", TensorProto.FLOAT, None)],
                             [vi("u", TensorProto.FLOAT, None)])
    model.graph.node.insert(2, helper.make_node("SequenceMap", ["seq"], ["mapped"], body=body, name="map"))
    for node in model.graph.node:
        node.input[:] = ["mapped" if x == "seq" and node.name != "map" else x for x in node.input]
    with pytest.raises(UnknownShapeError, match="SequenceMap|sequence ops"):
        import_onnx(model)


@pytest.mark.parametrize("devices", [None, ("CPU", "GPU")])
def test_a_model_with_sequence_ops_is_scheduled_with_its_outputs_unchanged(devices) -> None:
    model = sequence_model()
    result = optimize_model(model, "peak-mem", "auto" if devices is None else "brkga", time_limit=5.0,
                            devices=devices)
    onnx.checker.check_model(result.model)
    assert_bitwise_equal(run_ort(model), run_ort(result.model))


def test_split_executor_hands_a_sequence_to_another_device() -> None:
    imp = import_onnx(sequence_model())
    names = list(imp.graph.op_names)
    placement = np.zeros(imp.graph.n_ops, np.int64)
    placement[[names.index(n) for n in ("at0", "at3", "relu")]] = 1  # the sequence crosses devices
    parts = split_model(imp, placement)
    assert any("seq" in p.inputs for p in parts if p.device == 1)
    feed = random_inputs(imp.model)
    import onnxruntime as ort

    ref = dict(zip(["y"], ort.InferenceSession(imp.model.SerializeToString()).run(None, feed)))
    with SplitExecutor(parts, [DeviceSpec("d0", cores=(0,)), DeviceSpec("d1", cores=(1,))], ["y"]) as ex:
        ok, err = compare_outputs(ref, ex.run(feed))
    assert ok, err


def optional_model() -> onnx.ModelProto:
    """x[4,16] -> Optional -> o; Optional() -> e (empty); y = Relu(OptionalGetElement(o)) + OptionalHasElement(e),
    the flag cast to float."""
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, [4, 16])
    nodes = [helper.make_node("Optional", ["x"], ["o"], name="wrap"),
             helper.make_node("Optional", [], ["e"], type=t, name="empty"),
             helper.make_node("OptionalGetElement", ["o"], ["got"], name="get"),
             helper.make_node("Relu", ["got"], ["r"], name="relu"),
             helper.make_node("OptionalHasElement", ["e"], ["has"], name="has"),
             helper.make_node("Cast", ["has"], ["hf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Add", ["r", "hf"], ["y"], name="add")]
    model = helper.make_model(helper.make_graph(nodes, "opt", [vi("x", TensorProto.FLOAT, [4, 16])],
                                                [vi("y", TensorProto.FLOAT, [4, 16])]),
                              opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def test_an_optional_holds_the_bytes_of_its_value_and_crosses_devices() -> None:
    """``Optional(x)`` holds x (the import stopped at it: "unknown size"), an empty one nothing; the split executor
    hands both to another device (its parts had no type for them: "no type known")."""
    imp = import_onnx(optional_model())
    g = imp.graph
    assert _bytes(imp, "o") == 4 * 16 * F32 and _bytes(imp, "e") == 0
    assert g.tensor_dtypes[list(g.tensor_names).index("o")] == "optional"
    names = list(g.op_names)
    placement = np.zeros(g.n_ops, np.int64)
    placement[[names.index(n) for n in ("get", "relu", "has")]] = 1
    parts = split_model(imp, placement)
    assert {"o", "e"} <= {x for p in parts if p.device == 1 for x in p.inputs}
    feed = random_inputs(imp.model)
    with SplitExecutor(parts, [DeviceSpec("d0"), DeviceSpec("d1")], ["y"]) as ex:
        assert_bitwise_equal(run_ort(imp.model), [ex.run(feed)["y"]])
