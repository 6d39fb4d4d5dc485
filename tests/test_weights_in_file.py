"""An ONNX file imported with its large weights left in it (``import_onnx(path, weights_in_file=True)``, what
``optimize``, ``bench-placement``, ``profile`` and ``inspect`` do): the same graph as a plain import, every large
inline weight an external reference to its bytes in the file itself, runs through ONNX Runtime and OpenVINO with the
file's weights, broken data files refused in one line, and ``optimize``'s output written with the weights inline."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_ort_session import N, _outputs, weighted_model

from onnx_sched.bench.ort_runner import make_session_options
from onnx_sched.bench.ort_session import import_session
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.importers.onnx_weights import with_weights
from onnx_sched.onnx_structure import LARGE_ELEMENTS


def _saved(tmp_path, model: onnx.ModelProto) -> str:
    path = tmp_path / "weighted.onnx"
    onnx.save_model(model, path)
    return str(path)


def test_large_inline_weights_become_references_to_the_file_itself(tmp_path) -> None:
    path = _saved(tmp_path, weighted_model())
    plain, by_ref = import_onnx(path), import_onnx(path, weights_in_file=True)
    a, b = plain.graph, by_ref.graph
    assert (a.op_names, a.op_types, a.tensor_names, a.tensor_shapes) == (b.op_names, b.op_types, b.tensor_names,
                                                                         b.tensor_shapes)
    for field in ("tensor_bytes", "tensor_kind", "tensor_producer", "op_flops", "op_bytes", "op_param_bytes"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    data = open(path, "rb").read()
    values = {t.name: t for t in plain.model.graph.initializer}
    kept = {}
    for t in by_ref.model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            where = {e.key: e.value for e in t.external_data}
            assert where["location"] == "weighted.onnx" and not t.raw_data
            off, n = int(where["offset"]), int(where["length"])
            assert data[off:off + n] == values[t.name].raw_data
        else:
            kept[t.name] = t
    assert set(kept) == {"shape"}  # the small one stays inline
    assert len(by_ref.model.SerializeToString()) < 40_000 < len(data)
    for t in with_weights(by_ref).graph.initializer:  # read in from the file where something needs the values
        np.testing.assert_array_equal(numpy_helper.to_array(t), numpy_helper.to_array(values[t.name]))


def test_runtimes_read_the_weights_from_the_file(tmp_path) -> None:
    path = _saved(tmp_path, weighted_model())
    imported = import_onnx(path, weights_in_file=True)
    x = np.random.default_rng(7).standard_normal((N, N)).astype(np.float32)
    whole = ort.InferenceSession(path, make_session_options(arena=True, opt_level="all", threads=1),
                                 providers=["CPUExecutionProvider"])
    session = import_session(imported, make_session_options(arena=True, opt_level="all", threads=1),
                             ["CPUExecutionProvider"])
    for a, b in zip(_outputs(whole, x), _outputs(session, x)):
        np.testing.assert_array_equal(a, b)
    ov = pytest.importorskip("openvino")
    from onnx_sched.bench.runtimes.openvino_inputs import openvino_model_of, weights_in_files

    assert set(weights_in_files(imported)) == {"w0", "w1", "b16", "idx"}
    compiled = ov.Core().compile_model(openvino_model_of(imported), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled.create_infer_request().infer({"x": x})
    for name, want in zip(["y", "gm"], _outputs(whole, x)):
        np.testing.assert_allclose(got[compiled.output(name)], want, rtol=1e-5, atol=1e-5)


def test_weights_not_held_as_raw_bytes_stay_in_the_model(tmp_path) -> None:
    """A tensor written as float_data has no byte span in the file to point to: it is read as it is."""
    values = np.arange(2 * LARGE_ELEMENTS, dtype=np.float32).reshape(2, LARGE_ELEMENTS)
    w = helper.make_tensor("w", TensorProto.FLOAT, values.shape, values.ravel().tolist())  # float_data
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, LARGE_ELEMENTS])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, LARGE_ELEMENTS])
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    imported = import_onnx(_saved(tmp_path, model), weights_in_file=True)
    (t,) = imported.model.graph.initializer
    assert t.data_location == TensorProto.DEFAULT and len(t.float_data) == values.size


@pytest.mark.parametrize("damage", ["missing", "short", "outside"])
def test_a_broken_data_file_is_one_line_as_the_checker_says_it(tmp_path, damage) -> None:
    """The checker does not read the file of a by-reference import, so its data files are checked apart."""
    from test_ort_session import _external_data_model

    from onnx_sched.errors import ModelLoadError

    (tmp_path / "inner").mkdir()
    path = _external_data_model(tmp_path / "inner")
    data = path.with_name("external.onnx.data")
    if damage == "missing":
        data.unlink()
    elif damage == "short":
        data.write_bytes(data.read_bytes()[:1000])
    else:
        model = onnx.load(str(path), load_external_data=False)
        for t in model.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = "../external.onnx.data"
        data.rename(tmp_path / "external.onnx.data")
        onnx.save_model(model, path)
    with pytest.raises(ModelLoadError, match="invalid ONNX model: the data of initializer 'w0'") as err:
        import_onnx(path, weights_in_file=True)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("same_folder", [True, False])
def test_optimize_writes_the_weights_it_left_in_the_input_inline_again(tmp_path, same_folder) -> None:
    """``optimize`` imports by reference and writes every weight back from the input file: a self-contained output
    (no data file, no copy of the input beside it), the input's bytes for every weight, the input's outputs."""
    from click.testing import CliRunner

    from onnx_sched.cli import main

    path = _saved(tmp_path, weighted_model())
    out_dir = tmp_path if same_folder else tmp_path / "out"
    out = out_dir / "reordered.onnx"
    result = CliRunner().invoke(main, ["optimize", path, "-o", str(out), "--time-limit", "5"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out_dir.iterdir()) == (["reordered.onnx", "weighted.onnx"] if same_folder
                                                         else ["reordered.onnx"])
    onnx.checker.check_model(str(out), full_check=True)
    written = onnx.load(str(out), load_external_data=False)
    original = {t.name: t for t in onnx.load(path).graph.initializer}
    assert {t.name for t in written.graph.initializer} == set(original)
    for t in written.graph.initializer:
        assert t.data_location == TensorProto.DEFAULT and not t.external_data
        assert t.raw_data == original[t.name].raw_data
    x = np.random.default_rng(8).standard_normal((N, N)).astype(np.float32)
    sessions = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (path, out)]
    for a, b in zip(*(_outputs(s, x) for s in sessions)):
        np.testing.assert_array_equal(a, b)


def test_optimize_writes_nothing_when_the_input_changed_meanwhile(tmp_path, monkeypatch) -> None:
    """The output's weights are read from the input again: a file changed during the run is refused, in one line."""
    from click.testing import CliRunner

    from onnx_sched import api
    from onnx_sched.cli import main

    path = _saved(tmp_path, weighted_model())
    real = api.optimize_model

    def meanwhile(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        result = real(*args, **kwargs)
        with open(path, "ab") as fh:  # another process rewrote the model
            fh.write(b"\0")
        return result

    monkeypatch.setattr(api, "optimize_model", meanwhile)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(main, ["optimize", path, "-o", str(out), "--time-limit", "5"])
    assert result.exit_code == 2 and "the file changed while it was being optimized" in result.output
    assert not out.exists()
