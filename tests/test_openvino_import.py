"""OpenVINO IR import: corpus files and in-memory models."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

ov = pytest.importorskip("openvino")
ops = pytest.importorskip("openvino.opset13")

from onnx_sched.cost import memory, memory_bound  # noqa: E402
from onnx_sched.dag import is_topological_order  # noqa: E402
from onnx_sched.errors import ModelLoadError, UnknownShapeError  # noqa: E402
from onnx_sched.graph import TensorKind  # noqa: E402
from onnx_sched.importers.openvino import ImportedOpenVINO, import_openvino  # noqa: E402

CORPUS = Path("/work/shared/corpus/openvino")
XMLS = sorted(CORPUS.glob("*.xml")) if CORPUS.is_dir() else []


def _materialized_weight_bytes() -> dict[str, int]:
    with open(CORPUS / "OPENVINO.tsv", encoding="utf-8") as fh:
        return {row["name"]: int(row["materialized_weight_bytes"]) for row in csv.DictReader(fh, delimiter="\t")}


@pytest.mark.skipif(not XMLS, reason="OpenVINO corpus not present")
@pytest.mark.parametrize("xml", XMLS, ids=lambda p: p.stem)
def test_corpus_models_import(xml: Path) -> None:
    imp = import_openvino(xml)
    g = imp.graph
    assert isinstance(imp, ImportedOpenVINO) and isinstance(imp.model, ov.Model)
    assert len(imp.op_index) == g.n_ops > 50
    # No weight-computing node is an op; the stripped weights became weight tensors.
    assert not set(g.op_types) & {"Constant", "Parameter", "Result"}
    assert not any(name.endswith("/stripped_weight") for name in imp.op_index)
    assert any(name.endswith("/stripped_weight") for name in imp.weight_nodes)
    # Weight bytes = the materialized Broadcast(0, shape) weights (+ small constants).
    expected = _materialized_weight_bytes()[xml.stem]
    assert expected <= g.weight_bytes <= expected * 1.01 + 4096
    kinds = g.tensor_kind
    assert (kinds == TensorKind.INPUT).sum() == len(imp.model.get_parameters())
    assert (kinds == TensorKind.OUTPUT).sum() == len(imp.model.get_results())
    assert (g.tensor_bytes[kinds != TensorKind.WEIGHT] > 0).all()
    # get_ordered_ops() order is topological, and the memory model accepts it.
    order = np.arange(g.n_ops)
    assert is_topological_order(g, order)
    assert memory.peak_memory(g, order, False) >= memory_bound.lower_bound(g, False) > 0
    assert g.op_flops.sum() > 0


def _tiny_model() -> "ov.Model":
    x = ops.parameter([1, 8], np.float32, name="x")
    w = ops.constant(np.ones((8, 16), np.float32), name="w")
    bias = ops.convert(ops.constant(np.ones((16,), np.float16), name="b16"), "f32")  # Convert of a constant
    mm = ops.matmul(x, w, False, False)
    mm.set_friendly_name("mm")
    add = ops.add(mm, bias)
    add.set_friendly_name("add")
    relu = ops.relu(add)
    relu.set_friendly_name("relu")
    sig = ops.sigmoid(add)
    sig.set_friendly_name("sig")
    return ov.Model([relu, sig], [x], "tiny")


def test_in_memory_model() -> None:
    model = _tiny_model()
    imp = import_openvino(model)
    g = imp.graph
    assert imp.model is model and imp.path is None
    assert imp.op_index[:2] == ("mm", "add") and set(imp.op_index[2:]) == {"relu", "sig"}
    idx = {name: i for i, name in enumerate(imp.op_index)}
    assert [g.op_types[idx[n]] for n in ("mm", "add", "relu", "sig")] == ["MatMul", "Add", "Relu", "Sigmoid"]
    assert g.n_tensors == 1 + 2 + 4  # x, two weights (w, converted bias), four op outputs
    weights = np.flatnonzero(g.tensor_kind == TensorKind.WEIGHT)
    assert sorted(int(b) for b in g.tensor_bytes[weights]) == [16 * 4, 8 * 16 * 4]  # bias sized as f32
    assert g.tensor_kind[g.op_outputs.row(idx["relu"])[0]] == TensorKind.OUTPUT
    assert g.tensor_kind[g.op_outputs.row(idx["add"])[0]] == TensorKind.ACTIVATION
    assert g.preds(idx["relu"]).tolist() == [idx["add"]]
    assert sorted(g.succs(idx["add"]).tolist()) == sorted([idx["relu"], idx["sig"]])
    assert g.op_flops[0] == 2.0 * 16 * 8  # 2 * out elements * K
    assert g.tensor_shapes[g.op_outputs.row(0)[0]] == (1, 16)
    assert g.tensor_dtypes[g.op_outputs.row(0)[0]] == "float32"


def test_dynamic_shapes_are_listed() -> None:
    y = ops.parameter(ov.PartialShape([-1, 8]), np.float32, name="y")
    relu = ops.relu(y)
    relu.set_friendly_name("dyn_relu")
    with pytest.raises(UnknownShapeError, match=r"(dyn_relu|y).*give static shapes with --input-shape"):
        import_openvino(ov.Model([relu], [y], "dyn"))


def test_shapes_that_depend_on_values_are_not_blamed_on_the_inputs() -> None:
    x = ops.parameter(ov.PartialShape([1, 3, 1]), np.float32, name="x")  # static: --input-shape has nothing to pin
    shape = ops.parameter(ov.PartialShape([3]), np.int64, name="shape")  # static too, but its values set the size
    with pytest.raises(UnknownShapeError, match="every input is static.*no --input-shape can size them"):
        import_openvino(ov.Model([ops.relu(ops.broadcast(x, shape, broadcast_spec="BIDIRECTIONAL"))], [x, shape], "e"))


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        import_openvino(tmp_path / "missing.xml")
    bad = tmp_path / "bad.xml"
    bad.write_text("<net>")
    with pytest.raises(ModelLoadError, match="cannot read"):
        import_openvino(bad)
    with pytest.raises(TypeError):
        import_openvino(42)
