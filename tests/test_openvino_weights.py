"""An ONNX import read into OpenVINO (``bench/runtimes/openvino_inputs.py``): once per import, its weights mapped
from the model's file or the data files beside it instead of passing through Python, the same outputs as OpenVINO
reading the whole model from bytes, and an import whose weights changed in memory read with those weights."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnx_sched.bench.runtimes import openvino_inputs
from onnx_sched.importers import onnx_weights
from onnx_sched.importers.onnx import import_onnx

ov = pytest.importorskip("openvino")

from test_ort_session import N, _external_data_model, changed_in_memory, weighted_model  # noqa: E402


def _run(model, x: np.ndarray) -> list[np.ndarray]:
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled.create_infer_request().infer({"x": x})
    return [res[compiled.output(name)] for name in ("y", "gm")]


def _from_bytes(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    return _run(ov.Core().read_model(model.SerializeToString(), b""), x)


def _python_never_reads_weights(monkeypatch) -> None:
    def no_reading(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the weights went through Python")

    monkeypatch.setattr(openvino_inputs, "with_weights", no_reading)
    monkeypatch.setattr(onnx_weights, "load_external_data_for_model", no_reading)


def test_weights_the_file_holds_are_mapped_by_openvino_and_the_model_is_read_once(tmp_path, monkeypatch) -> None:
    from onnx_sched.exporters import openvino as ov_exporter

    path = tmp_path / "weighted.onnx"
    onnx.save_model(weighted_model(), path)
    imported = import_onnx(path)
    found = openvino_inputs.weights_in_files(imported)
    assert set(found) == {"w0", "w1", "b16", "idx"} and {w.path for w in found.values()} == {path.resolve()}
    data = path.read_bytes()
    for t in imported.model.graph.initializer:
        if t.name in found:
            assert data[found[t.name].offset:found[t.name].offset + len(t.raw_data)] == t.raw_data
    _python_never_reads_weights(monkeypatch)
    reads = []
    real_read = ov_exporter.read_onnx_into_openvino
    monkeypatch.setattr(ov_exporter, "read_onnx_into_openvino", lambda m: reads.append(m) or real_read(m))
    first, second = openvino_inputs.openvino_model_of(imported), openvino_inputs.openvino_model_of(imported)
    assert len(reads) == 1 and first is not second
    first.set_rt_info("placed", "onnx_sched_test")  # each caller annotates its own clone
    assert not second.has_rt_info("onnx_sched_test")
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    for a, b in zip(_from_bytes(weighted_model(), x), _run(second, x)):
        np.testing.assert_array_equal(a, b)


def test_weights_in_a_data_file_are_mapped_by_openvino(tmp_path, monkeypatch) -> None:
    path = _external_data_model(tmp_path)
    imported = import_onnx(path)
    found = openvino_inputs.weights_in_files(imported)
    assert set(found) == {"w0", "w1", "b16", "idx"}
    assert {w.path for w in found.values()} == {path.resolve().parent / "external.onnx.data"}
    _python_never_reads_weights(monkeypatch)
    x = np.random.default_rng(2).standard_normal((N, N)).astype(np.float32)
    for a, b in zip(_from_bytes(weighted_model(), x), _run(openvino_inputs.openvino_model_of(imported), x)):
        np.testing.assert_array_equal(a, b)


def test_weights_changed_in_memory_or_a_model_given_in_memory_are_handed_over(tmp_path) -> None:
    changed, model = changed_in_memory(tmp_path)
    assert set(openvino_inputs.weights_in_files(changed)) == {"w1", "b16", "idx"}  # w0 is the model's, not the file's
    x = np.ones((N, N), np.float32)
    for a, b in zip(_from_bytes(model, x), _run(openvino_inputs.openvino_model_of(changed), x)):  # the zero w0
        np.testing.assert_array_equal(a, b)
    in_memory = import_onnx(weighted_model())
    assert openvino_inputs.weights_in_files(in_memory) == {}
    for a, b in zip(_from_bytes(weighted_model(), x), _run(openvino_inputs.openvino_model_of(in_memory), x)):
        np.testing.assert_array_equal(a, b)


def test_a_data_file_outside_the_model_folder_is_not_mapped(tmp_path) -> None:
    """The importer refuses such a model (onnx's checker); an import changed in memory is not mapped either."""
    (tmp_path / "inner").mkdir()
    imported = import_onnx(_external_data_model(tmp_path / "inner"))
    model = onnx.ModelProto()
    model.CopyFrom(imported.model)
    for t in model.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../external.onnx.data"
    (tmp_path / "inner" / "external.onnx.data").rename(tmp_path / "external.onnx.data")
    assert openvino_inputs.weights_in_files(replace(imported, model=model)) == {}


def test_the_mapped_model_has_the_ops_openvino_reads_from_the_whole_model(tmp_path) -> None:
    """OpenVINO's frontend folds an Identity of a weight into the weight; the mapped read does the same, so a
    placement's affinities fall on the same ops (an Identity left over changed HETERO's split of bert_base)."""
    from collections import Counter

    from onnx import TensorProto, helper

    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    w = numpy_helper.from_array(np.random.default_rng(5).standard_normal((N, N)).astype(np.float32), "w")
    nodes = [helper.make_node("Identity", ["w"], ["w_id"], name="weight_identity"),
             helper.make_node("MatMul", ["x", "w_id"], ["y"], name="mm"),
             helper.make_node("ReduceMean", ["y"], ["gm"], name="mean", keepdims=1, axes=[0, 1])]
    graph = helper.make_graph(nodes, "identity", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N]),
                               helper.make_tensor_value_info("gm", TensorProto.FLOAT, [1, 1])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=10)
    onnx.save_model(model, tmp_path / "identity.onnx")
    imported = import_onnx(tmp_path / "identity.onnx")
    assert set(openvino_inputs.weights_in_files(imported)) == {"w"}
    mapped, whole = openvino_inputs.openvino_model_of(imported), read_onnx_into_openvino(model)
    assert Counter(op.get_type_name() for op in mapped.get_ordered_ops()) == \
        Counter(op.get_type_name() for op in whole.get_ordered_ops())
    assert "Identity" not in {op.get_type_name() for op in mapped.get_ordered_ops()}
    x = np.random.default_rng(6).standard_normal((N, N)).astype(np.float32)
    for a, b in zip(_run(whole, x), _run(mapped, x)):
        np.testing.assert_array_equal(a, b)
