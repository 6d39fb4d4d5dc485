"""ONNX importer and exporter on models built in memory and on real files."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from conftest import LIGHT_ONNX, assert_bitwise_equal, branchy_model, run_ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.api import optimize_model
from onnx_sched.cost.memory import peak_memory
from onnx_sched.errors import ModelLoadError, UnknownOpError, UnknownShapeError
from onnx_sched.exporters.onnx import DEVICE_KEY, export_onnx, save_model_atomic
from onnx_sched.graph import TensorKind
from onnx_sched.importers.onnx import import_onnx, parse_dims, parse_input_shapes
from onnx_sched.schedule import Schedule


def _model(nodes, inputs, outputs, initializers=(), ir_version=10, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m


def test_branchy_model_sizes_and_kinds():
    imp = import_onnx(branchy_model(n=64))
    g = imp.graph
    assert g.n_ops == 10
    x = g.tensor_names.index("x")
    y = g.tensor_names.index("y")
    assert g.tensor_kind[x] == TensorKind.INPUT and g.tensor_kind[y] == TensorKind.OUTPUT
    big = 64 * 64 * 4
    assert g.tensor_bytes[x] == big and g.tensor_bytes[y] == 4
    # breadth-first file order: x + 3 Relu outputs + 1 Sigmoid output at the peak
    assert peak_memory(g, np.arange(10)) == 5 * big
    depth_first = [0, 3, 6, 1, 4, 7, 2, 5, 8, 9]
    assert peak_memory(g, depth_first) == 3 * big + 2 * 4  # x, Relu, Sigmoid + two earlier means


def test_weight_nodes_are_folded_into_weights():
    shape = numpy_helper.from_array(np.array([4, 4], dtype=np.int64), "w__SHAPE")
    nodes = [
        helper.make_node("ConstantOfShape", ["w__SHAPE"], ["w"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("Transpose", ["w"], ["wt"]),
        helper.make_node("MatMul", ["x", "wt"], ["y"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [shape])
    imp = import_onnx(m)
    assert imp.graph.op_types == ("MatMul",)
    assert imp.weight_nodes == (0, 1)
    wt = imp.graph.tensor_names.index("wt")
    assert imp.graph.tensor_kind[wt] == TensorKind.WEIGHT
    out = export_onnx(imp, Schedule(order=[0], method="file"))
    onnx.checker.check_model(out)
    assert [n.op_type for n in out.graph.node] == ["ConstantOfShape", "Transpose", "MatMul"]
    assert_bitwise_equal(run_ort(m), run_ort(out))


def test_control_flow_reads_outer_scope_values():
    then_g = helper.make_graph([helper.make_node("Relu", ["a"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [8])])
    else_g = helper.make_graph([helper.make_node("Neg", ["b"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [8])])
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["a"]),
        helper.make_node("Tanh", ["x"], ["b"]),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    zero = numpy_helper.from_array(np.array(0, dtype=np.float32), "zero")
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], [zero])
    g = import_onnx(m).graph
    if_op = g.op_types.index("If")
    preds = {g.op_types[p] for p in g.preds(if_op)}
    assert preds == {"Sigmoid", "Tanh", "Greater"}


def test_dynamic_dims_need_values():
    m = _model([helper.make_node("Relu", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])])
    with pytest.raises(UnknownShapeError, match="--dim"):
        import_onnx(m)
    assert import_onnx(m, dims=parse_dims(["batch=3"])).graph.tensor_bytes.tolist() == [3 * 16 * 4] * 2
    assert import_onnx(m, input_shapes=parse_input_shapes(["x=5x16"])).graph.tensor_bytes.tolist() == [5 * 16 * 4] * 2
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_dims(["batch"])


def test_a_zipmap_output_is_refused_with_what_to_export_instead():
    """ZipMap (scikit-learn classifiers) returns a sequence of maps, which has no size to give: the one-line error
    says which value and how to export the probabilities as a tensor."""
    zipmap = helper.make_node("ZipMap", ["p"], ["probs"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2])
    probs = helper.make_value_info("probs", helper.make_sequence_type_proto(helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))))
    m = _model([helper.make_node("Softmax", ["x"], ["p"], axis=1), zipmap],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [probs])
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    with pytest.raises(UnknownShapeError, match=r"'probs' is ZipMap's sequence of maps.*zipmap=False"):
        import_onnx(m)


def test_unknown_op_and_cycle_and_garbage(tmp_path):
    m = _model([helper.make_node("NoSuchOp", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    with pytest.raises(UnknownOpError):
        import_onnx(m)
    cyc = _model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                 [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])])
    with pytest.raises(ModelLoadError, match="cycle"):
        import_onnx(cyc)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf at all \xff\xfe")
    with pytest.raises(ModelLoadError):
        import_onnx(bad)
    with pytest.raises(ModelLoadError, match="no such file"):
        import_onnx(tmp_path / "missing.onnx")


def test_external_data_over_2gb_is_not_read(tmp_path):
    """A 3 GB external weight (sparse file) imports and exports without being read."""
    n = 3 * 2**30 // 4
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(n * 4))):
        w.external_data.add(key=k, value=v)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
             helper.make_node("ReduceSum", ["w"], ["s"], keepdims=1), helper.make_node("Add", ["a", "b"], ["c"]),
             helper.make_node("Add", ["c", "s"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [w])
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "weights.bin", "wb") as f:
        f.truncate(n * 4)  # sparse: no disk blocks, never read
    onnx.save(m, str(src / "big.onnx"))
    imp = import_onnx(src / "big.onnx")
    assert imp.graph.n_ops == 4 and imp.weight_nodes == (2,)  # ReduceSum(w) only reads weights
    res = optimize_model(src / "big.onnx", method="bfs", time_limit=1)
    save_model_atomic(res.model, src / "big.sched.onnx", source_path=src / "big.onnx")  # beside it: shares the data
    assert sorted(p.name for p in src.iterdir()) == ["big.onnx", "big.sched.onnx", "weights.bin"]
    assert os.stat(src / "weights.bin").st_blocks == 0  # still sparse: nothing wrote it
    reread = onnx.load(str(src / "big.sched.onnx"), load_external_data=False)
    assert reread.graph.initializer[0].data_location == TensorProto.EXTERNAL


def test_export_keeps_everything_but_order_and_adds_metadata(tmp_path):
    m = branchy_model(n=32)
    m.doc_string = "keep me"
    m.metadata_props.add(key="author", value="test")
    res = optimize_model(m, method="dfs", time_limit=1)
    out = res.model
    onnx.checker.check_model(out)
    assert out.ir_version == m.ir_version and out.doc_string == "keep me"
    props = {p.key: p.value for p in out.metadata_props}
    assert props["author"] == "test"
    assert props["onnx_sched.objective"] == "peak-mem"
    assert int(props["onnx_sched.predicted_peak_bytes"]) < int(props["onnx_sched.input_peak_bytes"])
    assert sorted(n.name for n in out.graph.node) == sorted(n.name for n in m.graph.node)
    assert_bitwise_equal(run_ort(m), run_ort(out))
    with pytest.raises(ValueError, match="is an input file"):
        p = tmp_path / "m.onnx"
        onnx.save(m, str(p))
        save_model_atomic(out, p, source_path=p)


def test_a_model_read_from_a_file_is_reordered_in_place_only_when_asked(tmp_path):
    m = branchy_model(n=32)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    copied = optimize_model(path, method="dfs", time_limit=1)
    reused = optimize_model(path, method="dfs", time_limit=1, reuse_input=True)
    assert copied.model is not copied.imported.model  # the imported model keeps the file's order
    assert [n.name for n in copied.imported.model.graph.node] == [n.name for n in m.graph.node]
    assert reused.model is reused.imported.model and reused.model == copied.model
    assert [n.name for n in reused.model.graph.node] != [n.name for n in m.graph.node]  # dfs did reorder
    given = onnx.ModelProto()
    given.CopyFrom(m)
    in_memory = optimize_model(given, method="dfs", time_limit=1, reuse_input=True)
    assert given == m and in_memory.model is not given and in_memory.model == copied.model


def test_pinned_dims_infer_shapes_on_the_structure_not_a_copy_of_the_weights(monkeypatch):
    import onnx_sched.importers.onnx as importer

    w = numpy_helper.from_array(np.ones((16, 4096), np.float32), "w")  # large: a typed input for shape inference
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4096])], [w])
    seen = []
    infer = importer.infer_types
    monkeypatch.setattr(importer, "infer_types", lambda model, *a, **k: seen.append(model) or infer(model, *a, **k))
    imp = import_onnx(m, dims=parse_dims(["batch=3"]))
    assert [t.name for t in seen[0].graph.initializer] == [] and "w" in {i.name for i in seen[0].graph.input}
    assert imp.model is m and imp.graph.tensor_bytes[imp.graph.tensor_names.index("y")] == 3 * 4096 * 4
    with pytest.raises(ValueError, match="has no input 'w'"):
        import_onnx(m, input_shapes=parse_input_shapes(["w=16x4096"]))


def test_a_wrong_input_or_dim_name_is_named_for_the_api_too_and_lists_only_fed_inputs():
    """An IR 3 model lists its weights among its inputs: the message lists the inputs a caller feeds, not those."""
    weights = [numpy_helper.from_array(np.ones((4, 4), np.float32), f"w{i}") for i in range(12)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", f"w{i}"], [f"h{i + 1}"]) for i in range(12)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
               [helper.make_tensor_value_info("h12", TensorProto.FLOAT, ["batch", 4])], weights)
    m.graph.input.extend(helper.make_tensor_value_info(w.name, TensorProto.FLOAT, [4, 4]) for w in weights)
    with pytest.raises(ValueError) as err:
        import_onnx(m, input_shapes={"y": (1, 4)})
    assert str(err.value) == ("--input-shape y (input_shapes= in Python): the model has no input 'y' "
                              "(its inputs: 'x')")
    with pytest.raises(ValueError, match=r"^--dim N \(dims= in Python\): .*\(its symbolic dims are batch\)$"):
        import_onnx(m, dims={"N": 2})


def test_a_saved_model_written_one_initializer_at_a_time_reads_back_as_the_model(tmp_path):
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"w{i}") for i in range(3)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", f"w{i}"], [f"h{i + 1}" if i < 2 else "y"])
             for i in range(3)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], weights)
    m.doc_string = "after the weights in the file, before them in the message"
    m.metadata_props.add(key="k", value="v")
    path = tmp_path / "m.onnx"
    save_model_atomic(m, path)
    assert path.read_bytes() != m.SerializeToString()  # the weights come last in the file
    back = onnx.load(str(path))
    assert back == m and [t.name for t in back.graph.initializer] == ["w0", "w1", "w2"]
    onnx.checker.check_model(str(path), full_check=True)
    assert_bitwise_equal(run_ort(m), run_ort(back))


def test_a_model_with_fields_this_onnx_does_not_know_keeps_them_when_saved(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    unknown = bytes([0x98, 0x06, 0x07])  # field 99, varint 7: what a newer onnx might write
    newer = onnx.ModelProto()
    newer.ParseFromString(m.SerializeToString() + unknown)
    save_model_atomic(newer, tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").read_bytes() == newer.SerializeToString()
    assert (tmp_path / "m.onnx").read_bytes().endswith(unknown)


def test_the_file_check_still_sees_inside_large_weights(tmp_path):
    w = numpy_helper.from_array(np.zeros((128, 128), np.float32), "w")
    w.raw_data = w.raw_data[:100]  # far fewer bytes than 128 x 128 floats
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 128])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 128])], [w])
    onnx.save_model(m, str(tmp_path / "bad.onnx"))
    with pytest.raises(ModelLoadError, match="invalid ONNX model"):
        import_onnx(tmp_path / "bad.onnx")


def test_external_data_in_a_constant_resolves_beside_the_file(tmp_path, monkeypatch):
    from onnx.external_data_helper import convert_model_to_external_data

    value = numpy_helper.from_array(np.ones((64, 128), np.float32), "c")
    m = _model([helper.make_node("Constant", [], ["c"], value=value), helper.make_node("MatMul", ["x", "c"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 128])])
    convert_model_to_external_data(m, location="c.bin", size_threshold=0, convert_attribute=True)
    onnx.save_model(m, str(tmp_path / "m.onnx"))
    assert (tmp_path / "c.bin").stat().st_size == 64 * 128 * 4
    monkeypatch.chdir(tmp_path.parent)  # the data file is not in the working directory
    assert import_onnx(tmp_path / "m.onnx").graph.n_ops == 1


def test_placement_is_written_as_node_metadata():
    imp = import_onnx(branchy_model(n=8))
    n = imp.graph.n_ops
    out = export_onnx(imp, Schedule(order=np.arange(n), method="x", placement=np.arange(n) % 2), device_names=["CPU", "GPU"])
    devices = [p.value for node in out.graph.node for p in node.metadata_props if p.key == DEVICE_KEY]
    assert devices == ["CPU", "GPU"] * (n // 2)
    onnx.checker.check_model(out)


@pytest.mark.parametrize("path", LIGHT_ONNX, ids=lambda p: p.stem)
def test_onnx_light_models_round_trip(path):
    res = optimize_model(path, method="auto", time_limit=2)
    onnx.checker.check_model(res.model)
    assert res.report["peak_bytes"]["output"] <= res.report["peak_bytes"]["input"]
    assert_bitwise_equal(run_ort(onnx.load(str(path))), run_ort(res.model))


def test_sub_byte_tensors_are_counted_packed():
    """An INT4 tensor of 9 elements takes 5 bytes (two to a byte, rounded up), not numpy's 9."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("DequantizeLinear", ["q", "scale"], ["x"], name="dq"),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    scale = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "scale")
    m = _model(nodes, [vi("q", TensorProto.INT4, [9])], [vi("y", TensorProto.FLOAT, [9])], [scale], opset=21)
    g = import_onnx(m).graph
    sizes = dict(zip(g.tensor_names, g.tensor_bytes.tolist()))
    assert sizes["q"] == 5 and sizes["x"] == 36 and sizes["y"] == 36
    from onnx_sched.importers.onnx import tensor_nbytes

    six_bit = getattr(TensorProto, "FLOAT6E2M3", None)
    if six_bit is not None:  # onnx >= 1.20
        assert tensor_nbytes(six_bit, (4,)) == 3


def _string_model() -> onnx.ModelProto:
    """Label lookup: a string initializer gathered by the arg-max of a float input, and a float branch beside it."""
    labels = numpy_helper.from_array(np.array(["cat", "dog", "a-label-longer-than-fifteen"], dtype=object), "labels")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ArgMax", ["r"], ["idx"], axis=1, keepdims=0, name="argmax"),
             helper.make_node("Gather", ["labels", "idx"], ["label"], axis=0, name="gather"),
             helper.make_node("Sigmoid", ["x"], ["s"], name="sig")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3])],
                  [helper.make_tensor_value_info("label", TensorProto.STRING, [5]),
                   helper.make_tensor_value_info("s", TensorProto.FLOAT, [5, 3])], [labels])


def test_string_tensors_are_sized_by_their_string_objects():
    """A string tensor counts 32 bytes per element (ONNX Runtime's ``std::string`` objects; the string weight is
    sized the same way and, like every weight, not counted in a peak); the report says so, and the optimized model
    computes the same labels."""
    from onnx_sched.onnx_structure import STRING_ELEMENT_BYTES

    model = _string_model()
    imp = import_onnx(model)
    g = imp.graph
    size = dict(zip(g.tensor_names, g.tensor_bytes.tolist()))
    assert size["label"] == 5 * STRING_ELEMENT_BYTES == 160 and size["labels"] == 96 and size["s"] == 60
    assert g.metadata["string_tensors"] == 1
    result = optimize_model(model, objective="peak-mem", method="auto", time_limit=5.0)
    assert any("1 string tensor is sized at 32 bytes per element" in n for n in result.report["notes"])
    onnx.checker.check_model(result.model)
    ref, got = run_ort(model), run_ort(result.model)
    assert ref[0].dtype == object and set(ref[0]) <= {"cat", "dog", "a-label-longer-than-fifteen"}
    assert [a.tolist() for a in ref] == [b.tolist() for b in got]


@pytest.mark.parametrize("nodes, expected", [
    ([helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Add", ["a", "ghost"], ["y"], name="add")],
     "node 'add' (Add) reads 'ghost', which nothing defines"),
    ([helper.make_node("Add", ["a", "x"], ["y"], name="add"), helper.make_node("Relu", ["x"], ["a"], name="r")],
     "not in topological order (node 'add' (Add) reads 'a' before node 'r' (Relu) writes it)"),
    ([helper.make_node("Relu", ["b"], ["a"], name="r"), helper.make_node("Add", ["a", "x"], ["b"], name="add"),
      helper.make_node("Neg", ["b"], ["y"], name="n")],
     "graph has a cycle: 'add' (Add) -> 'r' (Relu) -> 'add' (Add)"),
    # an out-of-order pair first and a cycle after it: the cycle is what sorting cannot fix
    ([helper.make_node("Exp", ["e"], ["f"], name="exp"), helper.make_node("Sin", ["x"], ["e"], name="sin"),
      helper.make_node("Relu", ["b"], ["a"], name="r"), helper.make_node("Add", ["a", "f"], ["b"], name="add"),
      helper.make_node("Neg", ["b"], ["y"], name="n")],
     "graph has a cycle: 'r' (Relu) -> 'add' (Add) -> 'r' (Relu)"),
])
def test_topology_errors_say_what_is_wrong(nodes, expected):
    vi = helper.make_tensor_value_info
    m = _model(nodes, [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])])
    with pytest.raises(ModelLoadError) as err:
        import_onnx(m)
    message = str(err.value)
    if "cycle" in expected:  # the same cycle may be named from any of its nodes
        ops = expected.split(": ", 1)[1].split(" -> ")[:-1]
        assert "graph has a cycle: " in message and all(op in message for op in ops), message
    else:
        assert expected in message


def test_a_model_of_constants_passes_through_the_pipeline_api_unchanged():
    """No operators to order: optimize_model says so (the CLI's one line), optimize() and the onnx_ir
    pass hand the model back as it is, so a pipeline step never fails on one."""
    import onnx_ir as ir

    from onnx_sched.api import optimize
    from onnx_sched.errors import NothingToScheduleError
    from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

    const = helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(np.ones(4, np.float32)))
    m = _model([const], [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    with pytest.raises(NothingToScheduleError, match="no operators"):
        optimize_model(m)
    assert optimize(m) is m
    assert OnnxSchedPass()(ir.serde.deserialize_model(m)).modified is False


def test_symbolic_shape_inference_loads_without_importing_torch():
    """ONNX Runtime's symbolic shape inference is loaded from its file: importing it as
    ``onnxruntime.tools.symbolic_shape_infer`` would import torch first (1.8 s) wherever torch is installed."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from onnx_sched.importers.onnx_shapes import _symbolic_shape_inference
        cls = _symbolic_shape_inference()
        print(cls.__name__, "torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["SymbolicShapeInference", "False"]
