"""ORT split executor: cutting models at device boundaries and running the parts
(concurrently and sequentially) with outputs equal to one whole-model session."""

from __future__ import annotations

import networkx as nx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import CORPUS
from onnx import TensorProto, helper

from onnx_sched.bench.inputs import random_inputs
from onnx_sched.bench.outputs import compare_outputs, output_tolerance
from onnx_sched.bench.placement_file import load_placement, save_placement
from onnx_sched.bench.runtimes.ort import bench_ort
from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, split_model
from onnx_sched.bench.weights import with_random_weights
from onnx_sched.dag import kahn_order
from onnx_sched.importers.onnx import import_onnx

DEVICES = [DeviceSpec("d0", cores=(0,)), DeviceSpec("d1", cores=(1,))]


def diamond_model(branches: int = 4, n: int = 32) -> onnx.ModelProto:
    """x -> MatMul branches of different lengths (random weights) -> Concat -> Softmax."""
    rng = np.random.default_rng(1)
    nodes, inits, ends = [], [], []
    for b in range(branches):
        src = "x"
        for s in range(b + 1):
            w = f"w{b}_{s}"
            inits.append(helper.make_tensor(w, TensorProto.FLOAT, [n, n], (rng.standard_normal(n * n) / n).astype(np.float32)))
            nodes.append(helper.make_node("MatMul", [src, w], [f"m{b}_{s}"], name=f"mm{b}_{s}"))
            nodes.append(helper.make_node("Tanh", [f"m{b}_{s}"], [f"h{b}_{s}"], name=f"tanh{b}_{s}"))
            src = f"h{b}_{s}"
        ends.append(src)
    nodes.append(helper.make_node("Concat", ends, ["c"], name="concat", axis=1))
    nodes.append(helper.make_node("Softmax", ["c"], ["y"], name="softmax", axis=1))
    graph = helper.make_graph(nodes, "diamond", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, n * branches])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def whole(imp) -> dict[str, np.ndarray]:  # noqa: ANN001
    feed = random_inputs(imp.model)
    names = [o.name for o in imp.model.graph.output]
    sess = ort.InferenceSession(imp.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, feed)))


def quotient_is_dag(parts) -> bool:  # noqa: ANN001
    q = nx.DiGraph()
    q.add_nodes_from(p.index for p in parts)
    q.add_edges_from((d, p.index) for p in parts for d in p.deps)
    return nx.is_directed_acyclic_graph(q) and all(d < p.index for p in parts for d in p.deps)


@pytest.mark.parametrize("seed", range(5))
def test_random_placements_split_into_valid_parts(seed: int) -> None:
    imp = import_onnx(diamond_model())
    rng = np.random.default_rng(seed)
    placement = rng.integers(0, 2, imp.graph.n_ops)
    parts = split_model(imp, placement)
    covered = sorted(i for p in parts for i in p.nodes)
    assert covered == sorted(int(i) for i in imp.op_node)  # every compute node exactly once
    assert quotient_is_dag(parts)
    for p in parts:
        assert {placement[list(imp.op_node).index(i)] for i in p.nodes} == {p.device}
        onnx.checker.check_model(p.model)
    ref = whole(imp)
    feed = random_inputs(imp.model)
    for concurrent in (True, False):
        with SplitExecutor(parts, DEVICES, list(ref), concurrent=concurrent) as ex:
            got = ex.run(feed)
            assert set(ex.last_device_seconds) <= {"d0", "d1"}
        ok, err = compare_outputs(ref, got)
        assert ok, err


def test_parts_keep_branches_concurrent_and_merge_only_where_nothing_waits() -> None:
    imp = import_onnx(diamond_model(branches=2))
    g = imp.graph
    # branch 0 on d1, the rest on d0: d0's branch must not share a part with the concat
    # (that part would wait for d1), so both branches start at once and the concat waits for both
    placement = np.array([1 if name.endswith("0_0") else 0 for name in g.op_names])
    parts = split_model(imp, placement)
    assert [(p.device, p.deps) for p in parts] == [(1, ()), (0, ()), (0, (0, 1))]
    assert {g.op_names[list(imp.op_node).index(i)] for i in parts[2].nodes} == {"concat", "softmax"}
    # a d0 -> d1 -> d0 chain cannot merge its two d0 ends
    chain = np.array([1 if name == "tanh1_0" else 0 for name in g.op_names])
    assert [p.device for p in split_model(imp, chain)] == [0, 1, 0]
    # one device: one part; two independent branches on one device with no cross traffic: merged
    assert len(split_model(imp, np.zeros(g.n_ops, np.int64))) == 1
    four = import_onnx(diamond_model(branches=4))
    names = four.graph.op_names
    two_each = np.array([1 if name[-3] in "23" else 0 for name in names])  # branches 2, 3 on d1
    parts = split_model(four, two_each)
    assert sorted(p.device for p in parts) == [0, 0, 1]  # d1: one part for both of its branches


def test_branchy_corpus_model_concurrent_equals_whole() -> None:
    zeros = import_onnx(CORPUS / "onnx" / "randwire_ws.onnx")
    imp = with_random_weights(zeros)  # the corpus's zero weights would make equality trivial
    assert imp.graph is zeros.graph and len(imp.model.graph.node) == len(zeros.model.graph.node)
    order = kahn_order(imp.graph)
    placement = np.zeros(imp.graph.n_ops, np.int64)
    placement[order[::7]] = 1  # many boundaries
    report = bench_ort(imp, placement, DEVICES, warmup=1, repeats=2)
    assert report["outputs_equal"] and report["outputs_informative"] and report["sub_models"] > 2
    assert set(report["device_seconds"]) == {"d0", "d1"}


def test_ir3_model_with_initializer_inputs() -> None:
    imp = import_onnx(CORPUS / "onnx" / "light_inception_v1.onnx")
    placement = np.zeros(imp.graph.n_ops, np.int64)
    placement[kahn_order(imp.graph)[imp.graph.n_ops // 3:]] = 1
    report = bench_ort(imp, placement, DEVICES, warmup=0, repeats=1, concurrent=True)
    assert report["outputs_equal"] and report["sub_models"] >= 2


def test_a_part_of_dead_ops_still_runs() -> None:
    """Neg's result is read by nothing: its part has no tensor anyone needs, and still runs as placed."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Neg", ["x"], ["b"], name="n"),
         helper.make_node("Exp", ["a"], ["y"], name="e")],
        "dead", [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])])
    imp = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    placement = np.array([1 if name == "n" else 0 for name in imp.graph.op_names])
    parts = split_model(imp, placement)
    assert [p.outputs for p in parts if p.device == 1] == [("b",)]
    report = bench_ort(imp, placement, DEVICES, warmup=0, repeats=1, concurrent=True)
    assert report["outputs_equal"] and report["sub_models"] == 2


def test_a_tensor_only_the_importer_could_type_crosses_parts() -> None:
    """onnx's shape inference does not know com.microsoft's FusedMatMul, so it types nothing after it; the importer's
    later engines do, and a split across its output takes that type."""
    vi = helper.make_tensor_value_info
    w = onnx.numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("FusedMatMul", ["x", "w"], ["m"], name="fmm", domain="com.microsoft", alpha=2.0),
         helper.make_node("Relu", ["m"], ["y"], name="r")],
        "contrib", [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])], [w])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    assert "m" not in {v.name for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    imp = import_onnx(model)
    placement = np.array([1 if name == "r" else 0 for name in imp.graph.op_names])
    parts = split_model(imp, placement)
    assert [p.inputs for p in parts if p.device == 1] == [("m",)]
    report = bench_ort(imp, placement, DEVICES, warmup=0, repeats=1, concurrent=True)
    assert report["outputs_equal"] and report["sub_models"] == 2


def test_part_failure_is_raised() -> None:
    imp = import_onnx(diamond_model(branches=2))
    parts = split_model(imp, np.arange(imp.graph.n_ops) % 2)
    with SplitExecutor(parts, DEVICES, ["y"]) as ex:
        with pytest.raises(Exception, match="x"):
            ex.run({"x": np.zeros((3, 5), np.float32)})  # wrong shape: the first part fails


def test_placement_file_roundtrip_and_onnx_metadata(tmp_path) -> None:
    from onnx_sched.exporters.onnx import export_onnx
    from onnx_sched.schedule import Schedule

    imp = import_onnx(diamond_model(branches=2))
    g = imp.graph
    placement = np.arange(g.n_ops) % 2
    path = tmp_path / "p.json"
    save_placement(path, g, placement, ["CPU", "GPU.1"], method="test", simulated=True)
    got, names, meta = load_placement(path, g)
    assert names == ["CPU", "GPU.1"] and (got == placement).all() and meta["simulated"] is True
    model = export_onnx(imp, Schedule(kahn_order(g), "t", placement=placement), device_names=["CPU", "GPU.1"])
    onnx.save(model, tmp_path / "m.onnx")
    got2, names2, _ = load_placement(tmp_path / "m.onnx", g)
    assert [names2[i] for i in got2] == [["CPU", "GPU.1"][i] for i in placement]
    # every op on the second device: the model still names both devices, in the exporter's order
    ones = np.ones(g.n_ops, dtype=np.int64)
    onnx.save(export_onnx(imp, Schedule(kahn_order(g), "t", placement=ones), device_names=["CPU", "GPU.1"]),
              tmp_path / "one.onnx")
    got3, names3, _ = load_placement(tmp_path / "one.onnx", g)
    assert names3 == ["CPU", "GPU.1"] and (got3 == 1).all()


def test_random_weights_keep_an_unnormalized_residual_stack_at_unit_scale() -> None:
    """MobileBERT (NoNorm layers, 100+ residual adds): the role-aware fill keeps outputs O(1), distinct
    per channel and reproducible, so 1e-5 output equality checks data flow, not fp32 rounding."""
    imp = import_onnx(CORPUS / "onnx" / "mobilebert_uncased.onnx")
    a, b = with_random_weights(imp, seed=3), with_random_weights(imp, seed=3)
    assert a.model.SerializeToString() == b.model.SerializeToString()
    sess = ort.InferenceSession(a.model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = [np.asarray(o) for o in sess.run(None, random_inputs(a.model, 0)) if np.asarray(o).dtype.kind == "f"]
    assert outs and all(np.isfinite(o).all() for o in outs)
    big = max(float(np.abs(o).max()) for o in outs)
    spread = max(float(o.max() - o.min()) for o in outs)
    assert 1e-2 < big < 1e3 and spread > 1e3 * 1e-5


def test_graph_outputs_that_are_weights_come_back_from_the_split() -> None:
    """A graph output written by no compute op -- an initializer, a Constant's output -- is returned too."""
    vi = helper.make_tensor_value_info
    const = helper.make_tensor("k", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Constant", [], ["c"], value=const),
         helper.make_node("Mul", ["a", "two"], ["y"])], "weights_out",
        [vi("x", TensorProto.FLOAT, [2, 4])],
        [vi("y", TensorProto.FLOAT, [2, 4]), vi("c", TensorProto.FLOAT, [3]), vi("two", TensorProto.FLOAT, [])],
        initializer=[helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    imp = import_onnx(model)
    ref = whole(imp)
    for placement in ([0, 0], [0, 1], [1, 0]):
        with SplitExecutor(split_model(imp, np.array(placement)), DEVICES, list(ref)) as ex:
            got = ex.run(random_inputs(imp.model))
        assert list(got) == ["y", "c", "two"]
        ok, err = compare_outputs(ref, got)
        assert ok, (placement, err)


def test_interleaved_timing_measures_what_fits_before_a_deadline() -> None:
    """Past the deadline only the ``required`` rows are measured (the rest NaN); without one, every row."""
    from onnx_sched.bench.runtimes.placement_timing import interleaved_seconds
    from onnx_sched.deadline import Deadline

    imp = import_onnx(diamond_model(branches=2, n=16))
    rows = np.random.default_rng(0).integers(0, 2, (4, imp.graph.n_ops))
    rows[0] = 0
    every = interleaved_seconds(imp, rows, ["d0", "d1"], repeats=2, warmup=0)
    assert np.isfinite(every).all() and (every > 0).all()
    late = interleaved_seconds(imp, rows, ["d0", "d1"], repeats=2, warmup=0, deadline=Deadline(1e-9), required=2)
    assert np.isfinite(late[:2]).all() and np.isnan(late[2:]).all()


def test_a_deadline_too_short_for_every_round_cuts_warm_ups_then_repeats() -> None:
    """Runs that cannot all end in time (a large model): the required rows get MIN_REPEATS timed rounds, no more,
    and their speedups still come out (medians over the rounds run)."""
    from onnx_sched.bench.runtimes.placement_timing import MIN_REPEATS, interleaved_seconds, speedups_over
    from onnx_sched.deadline import Deadline

    imp = import_onnx(diamond_model(branches=2, n=16))
    rows = np.random.default_rng(0).integers(0, 2, (3, imp.graph.n_ops))
    late = interleaved_seconds(imp, rows, ["d0", "d1"], repeats=10, warmup=2, deadline=Deadline(1e-9), required=2)
    assert late.shape == (3, 10)
    assert (np.isfinite(late[:2]).sum(axis=1) == MIN_REPEATS).all() and np.isnan(late[2]).all()
    speedups = speedups_over(imp, rows[0], rows[1:], ["d0", "d1"], repeats=10, deadline=Deadline(1e-9), required=1)
    assert np.isfinite(speedups[0]) and np.isnan(speedups[1])


def _narrow_float_model(output_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """x -> bfloat16 -> float, and x -> float16 -> Relu -> float, added: narrow tensors for the split to cut."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16, name="to_bf16"),
             helper.make_node("Cast", ["xb"], ["xf"], to=TensorProto.FLOAT, name="from_bf16"),
             helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16, name="to_fp16"),
             helper.make_node("Relu", ["xh"], ["rh"], name="relu"),
             helper.make_node("Cast", ["rh"], ["rf"], to=TensorProto.FLOAT, name="from_fp16"),
             helper.make_node("Add", ["xf", "rf"], ["y"], name="add"),
             helper.make_node("Cast", ["y"], ["out"], to=output_type, name="out")]
    graph = helper.make_graph(nodes, "narrow", [vi("x", TensorProto.FLOAT, [4, 64])], [vi("out", output_type, [4, 64])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_bfloat16_and_float16_tensors_cross_parts() -> None:
    """numpy has no bfloat16: such a tensor crosses as an OrtValue.  Where the split falls decides which values
    ONNX Runtime rounds to float16 (it casts around the Relu it lacks), so the outputs agree within float16's
    tolerance, not float32's."""
    imp = import_onnx(_narrow_float_model())
    assert output_tolerance(imp.model) == pytest.approx(5e-2)
    ref = whole(imp)
    feed = random_inputs(imp.model)
    rounded_apart = 0.0
    for on_1 in (("from_bf16", "from_fp16"), ("relu",)):  # bfloat16 and float16 tensors cross; float16 ones cross
        placement = np.array([1 if name in on_1 else 0 for name in imp.graph.op_names])
        assert len(split_model(imp, placement)) >= 2
        with SplitExecutor(split_model(imp, placement), DEVICES, ["out"]) as ex:
            got = ex.run(feed)
        ok, err = compare_outputs(ref, got, output_tolerance(imp.model))
        assert ok, (on_1, err)
        rounded_apart = max(rounded_apart, err)
    assert rounded_apart > 1e-5  # the narrow tolerance is needed: float32's would call these runs different


def test_a_float_graph_output_of_a_part_that_also_sends_bfloat16_comes_back_as_an_array() -> None:
    """A part with a bfloat16 output runs with OrtValues for all its outputs; its graph outputs still come back
    as arrays."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16, name="to_bf16"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["xb"], ["y"], to=TensorProto.FLOAT, name="from_bf16")]
    graph = helper.make_graph(nodes, "mixed", [vi("x", TensorProto.FLOAT, [4, 8])],
                              [vi("r", TensorProto.FLOAT, [4, 8]), vi("y", TensorProto.FLOAT, [4, 8])])
    imp = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    placement = np.array([1 if name == "from_bf16" else 0 for name in imp.graph.op_names])
    ref = whole(imp)
    with SplitExecutor(split_model(imp, placement), DEVICES, list(ref)) as ex:
        got = ex.run(random_inputs(imp.model))
    assert all(isinstance(v, np.ndarray) for v in got.values())
    ok, err = compare_outputs(ref, got, output_tolerance(imp.model))
    assert ok, err


def test_a_bfloat16_graph_output_is_refused_in_one_line() -> None:
    imp = import_onnx(_narrow_float_model(TensorProto.BFLOAT16))
    with pytest.raises(ValueError, match="graph output 'out' is of a type"):
        SplitExecutor(split_model(imp, np.zeros(imp.graph.n_ops, np.int64)), DEVICES, ["out"])


def test_runs_for_a_plan_feed_the_shapes_the_plan_pinned() -> None:
    """--dim / --input-shape pin the graph's input shapes, not the model's declared ones: the measured target,
    bench-placement and profile feed what the plan assumed (import_feed), not the declared dims at 1."""
    from onnx_sched.bench.inputs import import_feed

    model = diamond_model(branches=2)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    declared = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    assert import_feed(import_onnx(model, dims={"batch": 6}))["x"].shape == (6, *declared)
    assert import_feed(import_onnx(model, input_shapes={"x": (2, *declared)}))["x"].shape == (2, *declared)
    assert random_inputs(model)["x"].shape == (1, *declared)  # the model alone knows no pin


def test_ort_gpu_provider_devices_are_read_and_refused_in_one_line_when_missing(tmp_path) -> None:
    """``--devices CPU,CUDAExecutionProvider``: the part would run in ONNX Runtime's CUDA provider (TF32 off, the CPU
    provider behind it); on a build without it, one line says what to install or use instead, and no output is
    written."""
    from click.testing import CliRunner
    from conftest import branchy_model

    from onnx_sched.bench.split_executor import device_spec
    from onnx_sched.cli import main

    spec = device_spec("CUDAExecutionProvider:1")
    assert spec.provider == "CUDAExecutionProvider"
    assert dict(spec.provider_options) == {"device_id": "1", "use_tf32": "0"}
    assert spec.providers[-1] == "CPUExecutionProvider" and not spec.torch_device
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this ONNX Runtime build has the CUDA provider")
    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    graph = import_onnx(model).graph
    save_placement(tmp_path / "p.json", graph, np.arange(graph.n_ops) % 2, ["CPU", "GPU"])
    res = CliRunner().invoke(main, ["bench-placement", str(model), "--placement", str(tmp_path / "p.json"),
                                    "--runtime", "ort", "--devices", "CPU,CUDAExecutionProvider",
                                    "--report", str(tmp_path / "r.json")])
    assert res.exit_code != 0 and not (tmp_path / "r.json").exists()
    assert "CUDAExecutionProvider is not available" in res.output and "onnxruntime-gpu" in res.output
    assert "Traceback" not in res.output


def _random_model() -> onnx.ModelProto:
    """y = x @ w + RandomNormalLike(x) (unseeded) beside z = Relu(x @ w): two branches placements can split."""
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("RandomNormalLike", ["m"], ["n"], name="noise"),
             helper.make_node("Add", ["m", "n"], ["y"], name="add"),
             helper.make_node("Relu", ["m"], ["z"], name="relu")]
    graph = helper.make_graph(nodes, "noisy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 16]) for n in ("y", "z")],
                              [onnx.numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_outputs_an_unseeded_random_op_feeds_are_not_compared() -> None:
    """ONNX Runtime seeds an unseeded random op per process and its draws follow the run order, so the measured
    target refused every such model ("a placement's outputs differ from the reference"); the other outputs are
    still compared."""
    from onnx_sched.bench.outputs import random_outputs
    from onnx_sched.bench.runtimes.placement_timing import interleaved_seconds

    model = _random_model()
    assert random_outputs(model) == {"y"}
    imp = import_onnx(model)
    rows = np.array([[0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    assert np.isfinite(interleaved_seconds(imp, rows, ["d0", "d1"], repeats=1, warmup=0)).all()
    report = bench_ort(imp, rows[1], [DeviceSpec("d0"), DeviceSpec("d1")], warmup=0, repeats=1)
    assert report["outputs_equal"] and report["unchecked_outputs"] == ["y"]
    seeded = _random_model()
    seeded.graph.node[1].attribute.append(helper.make_attribute("seed", 1.0))
    assert random_outputs(seeded) == frozenset()  # a seeded op draws the same values in every run order
    called = _random_model()  # the random op inside a model-local function
    noisy = helper.make_function("local", "Noisy", ["a"], ["b"], [helper.make_node("RandomNormalLike", ["a"], ["n"]),
                                 helper.make_node("Add", ["a", "n"], ["b"])], [helper.make_opsetid("", 17)])
    called.functions.append(noisy)
    called.opset_import.append(helper.make_opsetid("local", 1))
    del called.graph.node[1:3]
    called.graph.node.insert(1, helper.make_node("Noisy", ["m"], ["y"], domain="local", name="noisy"))
    onnx.checker.check_model(called)
    assert random_outputs(called) == {"y"}
