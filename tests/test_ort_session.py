"""ONNX Runtime sessions whose large weights are handed over as values or read from the model's file
(``bench/ort_session.py``, ``bench/file_weights.py``): the same outputs as a session built from the serialized
model, the model given never changed, the file trusted only where its bytes equal the model's, the split
executor keeping only the structure of the parts it holds sessions for, and a placement read from a model
without its weights."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.bench.file_weights import _ort_reads_from_a_folder, file_weights
from onnx_sched.bench.ort_runner import make_session_options
from onnx_sched.bench.ort_session import PLACEHOLDER_LOCATION, inference_session, with_placeholders
from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, iter_parts
from onnx_sched.graph import TensorKind
from onnx_sched.importers.onnx import ImportedOnnx, import_onnx
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


#: Reading a model's weights from its file needs ONNX Runtime 1.21 (``bench/file_weights.py``); before it the weights
#: are handed over (``test_an_onnx_runtime_before_1_21_gets_the_weights_handed_over``).
needs_ort_1_21 = pytest.mark.skipif(not _ort_reads_from_a_folder(), reason="ONNX Runtime before 1.21 reads no weights "
                                    "from a folder it is told: the weights are handed over instead")


@needs_ort_1_21
def test_weights_the_model_file_holds_are_read_by_onnx_runtime_from_the_file(tmp_path) -> None:
    path = tmp_path / "weighted.onnx"
    onnx.save_model(weighted_model(), path)
    imported = import_onnx(path)
    weights = file_weights(imported)
    assert weights is not None and weights.path == path.resolve()
    assert set(weights.spans) == {"w0", "w1", "b16", "idx"}  # the large ones; "shape" is small
    data = path.read_bytes()
    for t in imported.model.graph.initializer:
        if t.name in weights.spans:
            off, n = weights.spans[t.name]
            assert data[off:off + n] == t.raw_data
    light, names, _ = with_placeholders(imported.model, weights)
    assert names == []  # nothing handed over as a value: every large weight points to the file
    where = {t.name: {e.key: e.value for e in t.external_data} for t in light.graph.initializer if t.external_data}
    assert {w["location"] for w in where.values()} == {path.name}
    x = np.random.default_rng(3).standard_normal((N, N)).astype(np.float32)
    from_file = inference_session(imported.model, make_session_options(arena=True, opt_level="all", threads=1),
                                  ["CPUExecutionProvider"], weights)
    plain = ort.InferenceSession(str(path), make_session_options(arena=True, opt_level="all", threads=1),
                                 providers=["CPUExecutionProvider"])
    for a, b in zip(_outputs(plain, x), _outputs(from_file, x)):
        np.testing.assert_array_equal(a, b)


def changed_in_memory(tmp_path: Path) -> tuple[ImportedOnnx, onnx.ModelProto]:
    """weighted_model saved to a file and imported, then its ``w0`` zeroed in memory: an import that keeps its
    path, as bench.weights does, and the changed model."""
    path = tmp_path / "weighted.onnx"
    onnx.save_model(weighted_model(), path)
    imported = import_onnx(path)
    model = onnx.ModelProto()
    model.CopyFrom(imported.model)
    w0 = next(t for t in model.graph.initializer if t.name == "w0")
    w0.CopyFrom(numpy_helper.from_array(np.zeros((N, N), np.float32), "w0"))
    return replace(imported, model=model), model


@needs_ort_1_21
def test_an_import_whose_weights_changed_in_memory_is_not_read_from_its_file(tmp_path) -> None:
    changed, model = changed_in_memory(tmp_path)
    weights = file_weights(changed)
    assert weights is not None and "w0" not in weights.spans and "w1" in weights.spans
    x = np.ones((N, N), np.float32)
    sess = inference_session(model, make_session_options(arena=True, opt_level="all", threads=1),
                             ["CPUExecutionProvider"], weights)
    plain = ort.InferenceSession(model.SerializeToString(), make_session_options(arena=True, opt_level="all",
                                 threads=1), providers=["CPUExecutionProvider"])
    for a, b in zip(_outputs(plain, x), _outputs(sess, x)):  # the zero w0, not the file's
        np.testing.assert_array_equal(a, b)
    assert file_weights(import_onnx(weighted_model())) is None  # given in memory: no file


def test_a_placement_is_read_from_a_model_without_reading_its_weights(tmp_path) -> None:
    from onnx_sched.bench.placement_file import load_placement
    from onnx_sched.exporters.onnx import DEVICE_KEY
    from onnx_sched.importers.onnx import load_model_without_initializers

    model = weighted_model()
    for i, node in enumerate(model.graph.node):
        node.metadata_props.add(key=DEVICE_KEY, value=("CPU", "GPU")[i % 2])
    path = tmp_path / "placed.onnx"
    onnx.save_model(model, path)
    light = load_model_without_initializers(path)
    assert not light.graph.initializer and len(light.graph.node) == len(model.graph.node)
    assert light.SerializeToString() != model.SerializeToString()
    graph = import_onnx(weighted_model()).graph
    placement, devices, _ = load_placement(path, graph)
    device_of = {n.name: ("CPU", "GPU")[i % 2] for i, n in enumerate(model.graph.node)}
    assert devices == ["CPU", "GPU"]
    assert placement.tolist() == [devices.index(device_of[name]) for name in graph.op_names]


def _external_data_model(tmp_path) -> Path:
    """weighted_model saved with its large weights in a data file beside it."""
    path = tmp_path / "external.onnx"
    onnx.save_model(weighted_model(), path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="external.onnx.data", size_threshold=1024)
    return path


@needs_ort_1_21
def test_weights_in_external_data_files_are_read_by_onnx_runtime_not_by_python(tmp_path, monkeypatch) -> None:
    """bench-placement's run of a model whose weights are in a data file: ONNX Runtime reads the file beside the
    model; Python never loads the data (the loader is made to fail), and the split's outputs equal the whole's."""
    from onnx_sched.bench import file_weights as fw
    from onnx_sched.bench.runtimes.ort import bench_ort
    from onnx_sched.importers import onnx_weights

    imported = import_onnx(_external_data_model(tmp_path))
    assert fw.file_weights(imported) is not None and not fw.file_weights(imported).spans

    def no_loading(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the external data was read into Python")

    monkeypatch.setattr(onnx_weights, "load_external_data_for_model", no_loading)
    placement = np.arange(imported.graph.n_ops, dtype=np.int64) % 2
    report = bench_ort(imported, placement, [DeviceSpec("d0"), DeviceSpec("d1")], warmup=0, repeats=1)
    assert report["sub_models"] > 2 and report["outputs_equal"] and report["max_abs_error"] == 0.0


def test_a_torch_part_of_an_external_data_model_gets_its_weights(tmp_path) -> None:
    pytest.importorskip("torch", reason="torch parts need torch and onnx2torch (the [gpu] or [train] extra)")
    from onnx_sched.bench.split_executor import device_spec

    path = _external_data_model(tmp_path)
    imported = import_onnx(path)
    x = np.random.default_rng(4).standard_normal((N, N)).astype(np.float32)
    plain = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    placement = np.arange(imported.graph.n_ops, dtype=np.int64) % 2
    with SplitExecutor(iter_parts(imported, placement), [device_spec("CPU"), device_spec("torch:cpu")],
                       ["y", "gm"]) as ex:
        out = ex.run({"x": x})
    for name, want in zip(["y", "gm"], _outputs(plain, x)):
        np.testing.assert_allclose(out[name], want, rtol=1e-4, atol=1e-5)


def test_an_onnx_runtime_before_1_21_gets_the_weights_handed_over(tmp_path, monkeypatch) -> None:
    """Before 1.21 ORT cannot be told where a model given as bytes keeps its data: no file weights, and a model
    with external data is read in first, as before."""
    from onnx_sched.bench.file_weights import file_weights, model_for_sessions
    from onnx_sched.bench.runtimes.ort import bench_ort

    monkeypatch.setattr(ort, "__version__", "1.20.1")
    imported = import_onnx(_external_data_model(tmp_path))
    assert file_weights(imported) is None
    model, weights = model_for_sessions(imported)
    assert weights is None and not any(t.external_data for t in model.graph.initializer)
    placement = np.arange(imported.graph.n_ops, dtype=np.int64) % 2
    assert bench_ort(imported, placement, [DeviceSpec("d0"), DeviceSpec("d1")], warmup=0, repeats=1)["outputs_equal"]


def _shape_cut_model() -> onnx.ModelProto:
    """x (1, 6, 2, 4) -> Reshape to (1, 6, 8) by a shape computed from x (Shape -> Gather -> Unsqueeze -> Concat with
    a constant) -> MatMul w -> Add b: an attention block's output projection in miniature, with the static shapes
    its exporter wrote down (which ONNX's shape inference could not find through the computed shape)."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    inits = [w, b, numpy_helper.from_array(np.array([8], np.int64), "last"),
             numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array(1, np.int64), "i1"),
             numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "i0"], ["d0"], name="gather0", axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["d1"], name="gather1", axis=0),
        helper.make_node("Unsqueeze", ["d0", "axis0"], ["u0"], name="unsqueeze0"),
        helper.make_node("Unsqueeze", ["d1", "axis0"], ["u1"], name="unsqueeze1"),
        helper.make_node("Concat", ["u0", "u1", "last"], ["to"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "to"], ["r"], name="reshape"),
        helper.make_node("MatMul", ["r", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["b", "m"], ["y"], name="add"),
    ]
    graph = helper.make_graph(nodes, "shape_cut", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8])], inits,
                              value_info=[helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 6, 8]) for v in "rm"])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_part_cut_between_a_shape_and_its_reshape_runs_on_every_onnx_runtime() -> None:
    """The part after the cut reads the shape's pieces as its inputs and knows the Reshape's static output shape
    from the import; ONNX Runtime 1.22-1.30 fail to make its session (ReshapeFusion after MatMulAddFusion:
    "Attempting to get index by a name which does not exist") -- this failed there before ``inference_session``
    made such a part again without ReshapeFusion (1.31 and later make it either way)."""
    imported = import_onnx(_shape_cut_model())
    names = [n.name for n in imported.model.graph.node]
    placement = np.array([int(name in ("concat", "reshape", "matmul", "add")) for name in names], np.int64)
    x = np.random.default_rng(4).standard_normal((1, 6, 2, 4)).astype(np.float32)
    whole = inference_session(imported.model, make_session_options(arena=True, opt_level="all", threads=1),
                              ["CPUExecutionProvider"])
    with SplitExecutor(iter_parts(imported, placement), [DeviceSpec("d0"), DeviceSpec("d1")], ["y"]) as ex:
        second = next(p for p in ex.parts if p.device == 1)
        assert {"u0", "u1"} <= {i.name for i in second.model.graph.input}
        out = ex.run({"x": x})
    np.testing.assert_allclose(out["y"], whole.run(["y"], {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_a_split_with_an_omitted_output_runs_split_and_whole(tmp_path) -> None:
    """onnx's checker accepts a ``Split`` whose second output is omitted (``""``), and ONNX Runtime (1.19-1.32,
    its issue 18601) kills the process in ``run`` on it: ``optimize --target measured`` died of SIGSEGV with
    nothing on stderr.  Every session made here names that output, so the split and the whole model run (in a
    child process, so a crash fails this test instead of ending the run)."""
    import subprocess
    import sys

    split = helper.make_node("Split", ["x", "halves"], ["a", ""], name="split", axis=1)
    nodes = [split, helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Neg", ["x"], ["n"], name="neg"),
             helper.make_node("Concat", ["r", "r"], ["c"], name="concat", axis=1),
             helper.make_node("Add", ["c", "n"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "split_omit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                              [numpy_helper.from_array(np.array([4, 4], np.int64), "halves")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "split_omit.onnx"
    onnx.save(model, path)
    script = f"""
import numpy as np, onnx
from onnx_sched.bench.ort_runner import make_session_options
from onnx_sched.bench.ort_session import inference_session
from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, iter_parts
from onnx_sched.importers.onnx import import_onnx
imported = import_onnx(onnx.load({str(path)!r}))
x = np.arange(16, dtype=np.float32).reshape(2, 8) - 8
want = np.concatenate([np.maximum(x[:, :4], 0)] * 2, axis=1) - x
whole = inference_session(imported.model, make_session_options(arena=True, opt_level="all", threads=1),
                          ["CPUExecutionProvider"])
np.testing.assert_array_equal(whole.run(["y"], {{"x": x}})[0], want)
placement = np.array([int(n.name in ("relu", "concat")) for n in imported.model.graph.node], np.int64)
with SplitExecutor(iter_parts(imported, placement), [DeviceSpec("d0"), DeviceSpec("d1")], ["y"]) as ex:
    np.testing.assert_array_equal(ex.run({{"x": x}})["y"], want)
print("ok")
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), (res.returncode, res.stderr[-2000:])


def _sparse_weight_model() -> onnx.ModelProto:
    """x (2, 4) -> MatMul(x, sparse w) -> Relu -> MatMul(., sparse w) -> y; ``w`` has 3 of its 16 values set (onnx's
    shape inference types ``w`` as a sparse tensor, which MatMul does not take: the import lost the sizes)."""
    values = numpy_helper.from_array(np.array([1.5, -2.0, 3.0], np.float32), "w")
    w = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 5, 15], np.int64), "w_index"), [4, 4])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm1"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "sparse", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], sparse_initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_sparse_initializers_are_weights_and_the_parts_get_them_dense(tmp_path) -> None:
    """A sparse initializer is a weight like a dense one: the import read it as an undefined tensor ("reads 'w',
    which nothing defines"), and a part of the split executor, which copies the initializers it reads, had none."""
    from onnx_sched.api import optimize_model
    from onnx_sched.bench.runtimes.ort_graph import ort_optimized_model

    model = _sparse_weight_model()
    onnx.checker.check_model(model)
    imported = import_onnx(model)
    w = imported.graph.tensor_names.index("w")
    assert imported.graph.tensor_kind[w] == TensorKind.WEIGHT
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    whole = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    with SplitExecutor(iter_parts(imported, np.array([0, 1, 0])), [DeviceSpec("d0"), DeviceSpec("d1")], ["y"]) as ex:
        assert any(t.name == "w" for p in ex.parts for t in p.model.graph.initializer)  # dense in the parts
        assert np.array_equal(ex.run({"x": x})["y"], whole)
    out = optimize_model(model, method="dfs", time_limit=1).model
    assert len(out.graph.sparse_initializer) == 1 and not out.graph.initializer  # the model's own weights as given
    # a sparse initializer may also be a graph input (a default the caller can override): declared once
    listed = _sparse_weight_model()
    listed.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 4]))
    onnx.checker.check_model(listed)
    onnx.save(listed, tmp_path / "listed.onnx")
    for source in (listed, tmp_path / "listed.onnx"):
        assert import_onnx(source, weights_in_file=isinstance(source, Path)).graph.n_ops == 3
    from onnx_sched.bench.inputs import random_inputs

    assert list(random_inputs(listed)) == ["x"]  # the caller feeds x only
    # ORT writes the indices of its own graph's sparse weights as int8, which onnx's checker refuses
    onnx.save(model, tmp_path / "sparse.onnx")
    ort_graph = onnx.load(ort_optimized_model(tmp_path / "sparse.onnx", tmp_path / "ort.onnx"))
    onnx.checker.check_model(ort_graph)
    assert ort_graph.graph.sparse_initializer[0].indices.data_type == TensorProto.INT64
