"""ONNX Runtime sessions whose large weights are handed over as values (``bench/ort_session.py``): the same
outputs as a session built from the serialized model, the model given never changed, and the split executor
keeping only the structure of the parts it holds sessions for."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.bench.ort_runner import make_session_options
from onnx_sched.bench.ort_session import PLACEHOLDER_LOCATION, inference_session, with_placeholders
from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, iter_parts
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.onnx_structure import LARGE_ELEMENTS

N = 128  # N * N > LARGE_ELEMENTS: the MatMul weights are large


def weighted_model(ir_version: int = 10) -> onnx.ModelProto:
    """x (1, N) -> MatMul w0 (float32) -> Add b (float16 weight cast up) -> Reshape (small int64 shape) -> Gather
    with a large int64 index table -> MatMul w1; every large initializer of another type."""
    rng = np.random.default_rng(0)
    w0 = numpy_helper.from_array((rng.standard_normal((N, N)) / N).astype(np.float32), "w0")
    w1 = numpy_helper.from_array((rng.standard_normal((N, N)) / N).astype(np.float32), "w1")
    b16 = numpy_helper.from_array(rng.standard_normal((N, N)).astype(np.float16), "b16")
    idx = numpy_helper.from_array(rng.integers(0, N, size=LARGE_ELEMENTS + 1).astype(np.int64), "idx")
    shape = numpy_helper.from_array(np.array([N, 1], np.int64), "shape")
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["m0"], name="mm0"),
        helper.make_node("Cast", ["b16"], ["b32"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["m0", "b32"], ["a"], name="add"),
        helper.make_node("ReduceSum", ["a"], ["r"], name="sum", keepdims=0, axes=[0]),
        helper.make_node("Reshape", ["r", "shape"], ["col"], name="reshape"),
        helper.make_node("Gather", ["col", "idx"], ["g"], name="gather", axis=0),
        helper.make_node("ReduceMean", ["g"], ["gm"], name="mean", keepdims=1, axes=[0]),
        helper.make_node("MatMul", ["a", "w1"], ["y"], name="mm1"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N]),
            helper.make_tensor_value_info("gm", TensorProto.FLOAT, [1, 1])]
    inits = [w0, w1, b16, idx, shape]
    inputs = [x]
    if ir_version < 4:  # IR 3 lists every initializer among the graph inputs too
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    opset = 7 if ir_version < 4 else 11  # ReduceSum / ReduceMean take their axes as an attribute in both
    graph = helper.make_graph(nodes, "weighted", inputs, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def _outputs(session: ort.InferenceSession, x: np.ndarray) -> list[np.ndarray]:
    return session.run(["y", "gm"], {"x": x})


@pytest.mark.parametrize("ir_version", [3, 10])
def test_a_session_given_the_weights_as_values_computes_what_one_from_the_bytes_does(ir_version: int) -> None:
    model = weighted_model(ir_version)
    before = model.SerializeToString()
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    so = make_session_options(arena=True, opt_level="all", threads=1)
    plain = ort.InferenceSession(before, so, providers=["CPUExecutionProvider"])
    so = make_session_options(arena=True, opt_level="all", threads=1)
    held = inference_session(model, so, ["CPUExecutionProvider"])
    for a, b in zip(_outputs(plain, x), _outputs(held, x)):
        np.testing.assert_array_equal(a, b)
    assert model.SerializeToString() == before  # the model given is not changed


def test_only_large_plain_typed_weights_become_placeholders() -> None:
    model = weighted_model()
    bf16 = helper.make_tensor("bf16", TensorProto.BFLOAT16, [N, N], np.zeros(N * N, np.uint16).tobytes(), raw=True)
    model.graph.initializer.append(bf16)
    light, names, values = with_placeholders(model)
    assert names == ["w0", "w1", "b16", "idx"]
    assert [v.dtype for v in values] == [np.float32, np.float32, np.float16, np.int64]
    kept = {t.name: t for t in light.graph.initializer}
    assert kept["shape"].raw_data and kept["bf16"].raw_data  # small, and a type numpy has no plain array for
    for name in names:
        t = kept[name]
        assert t.data_location == TensorProto.EXTERNAL and not t.raw_data
        assert {e.key: e.value for e in t.external_data}["location"] == PLACEHOLDER_LOCATION
        assert list(t.dims) == list(next(u for u in model.graph.initializer if u.name == name).dims)
    assert len(light.SerializeToString()) < len(bf16.raw_data) + 2000  # the inline bf16 weight, and little else
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    del plain.graph.initializer[:]
    assert with_placeholders(plain) == (plain, [], [])  # nothing to hand over: the model itself


def test_the_split_executor_keeps_the_structure_of_the_parts_it_runs() -> None:
    imported = import_onnx(weighted_model())
    x = np.random.default_rng(2).standard_normal((N, N)).astype(np.float32)
    devices = [DeviceSpec("d0"), DeviceSpec("d1")]
    placement = np.arange(imported.graph.n_ops, dtype=np.int64) % 2
    whole = inference_session(imported.model, make_session_options(arena=True, opt_level="all", threads=1),
                              ["CPUExecutionProvider"])
    with SplitExecutor(iter_parts(imported, placement), devices, ["y", "gm"]) as ex:
        assert ex.n_parts > 2
        assert not any(t.raw_data and len(t.raw_data) > 4 * LARGE_ELEMENTS
                       for p in ex.parts for t in p.model.graph.initializer)
        out = ex.run({"x": x})
    np.testing.assert_allclose(out["y"], _outputs(whole, x)[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["gm"], _outputs(whole, x)[1], rtol=1e-5, atol=1e-6)
