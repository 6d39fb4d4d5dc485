"""Device placement: latency models, exact solvers vs brute force, passes, profiles,
the OpenVINO exporter + affinity pass (real HETERO), and the CLI commands."""

from __future__ import annotations

import itertools
import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import CORPUS
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.cost import latency as lat
from onnx_sched.graph import Csr, Graph, TensorKind
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes import PassContext, available, get_pass
from onnx_sched.passes.placement._optimal import cpsat_placement, mincut_placement
from onnx_sched.profiling import (
    DeviceProfile,
    ProfileSet,
    TransferModel,
    add_simulated,
    load_profiles,
    op_seconds_matrix,
    save_profiles,
)

EXAMPLE_PROFILES = CORPUS.parents[1] / "main" / "examples" / "profiles_cpu_igpu_dgpu.json"
if not EXAMPLE_PROFILES.exists():
    from pathlib import Path

    EXAMPLE_PROFILES = Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json"


# ------------------------------------------------------------------ helpers
def random_graph(n: int, rng: np.random.Generator, p: float = 0.3) -> Graph:
    """``n`` ops, one graph input read by a random subset, one output tensor per op
    (sinks are graph outputs), random sizes."""
    inputs: list[list[int]] = []
    for v in range(n):
        row = [1 + u for u in range(v) if rng.random() < p]
        if not row or rng.random() < 0.2:
            row.insert(0, 0)
        inputs.append(row)
    has_succ = np.zeros(n, bool)
    for row in inputs:
        for t in row:
            if t > 0:
                has_succ[t - 1] = True
    kind = [TensorKind.INPUT] + [TensorKind.ACTIVATION if has_succ[v] else TensorKind.OUTPUT for v in range(n)]
    return Graph(
        name="rand",
        op_names=tuple(f"n{i}" for i in range(n)),
        op_types=tuple(rng.choice(["Conv", "Relu", "Reshape", "ReduceMean"]) for _ in range(n)),
        op_inputs=Csr.from_lists(inputs),
        op_outputs=Csr.from_lists([[v + 1] for v in range(n)]),
        tensor_names=("x",) + tuple(f"t{i}" for i in range(n)),
        tensor_bytes=rng.integers(1, 4_000_000, n + 1),
        tensor_kind=np.asarray(kind, np.int8),
        tensor_producer=np.asarray([-1] + list(range(n)), np.int64),
        op_flops=rng.uniform(1e5, 1e9, n),
        op_bytes=rng.uniform(1e3, 1e7, n),
    )


def random_problem(n: int, k: int, rng: np.random.Generator) -> lat.PlacementProblem:
    g = random_graph(n, rng)
    t = rng.uniform(1e-5, 2e-3, (n, k))
    latency = rng.uniform(0, 1e-4, (k, k))
    inv = rng.uniform(1e-11, 1e-9, (k, k))
    return lat.PlacementProblem(g, tuple(f"d{i}" for i in range(k)), t, latency, inv, host=int(rng.integers(k)))


def all_placements(n: int, k: int) -> np.ndarray:
    return np.array(list(itertools.product(range(k), repeat=n)), np.int64)


def branch_model() -> onnx.ModelProto:
    """x -> two conv branches (different depths) -> Add -> Relu; static shapes, IR 8."""
    rng = np.random.default_rng(0)
    inits = [helper.make_tensor(f"w{i}", TensorProto.FLOAT, [8, 8, 3, 3], rng.standard_normal(576).astype(np.float32) * 0.1)
             for i in range(4)]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["a0"], name="a0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a0"], ["a1"], name="a1"),
        helper.make_node("Conv", ["a1", "w1"], ["a2"], name="a2", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b0"], name="b0", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["b0"], ["b1"], name="b1"),
        helper.make_node("Conv", ["b1", "w3"], ["b2"], name="b2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a2", "b2"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="out"),
    ]
    graph = helper.make_graph(nodes, "branches", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


# --------------------------------------------------------------- cost model
def test_sequential_latency_charges_each_tensor_once_per_destination() -> None:
    # op0 -> (op1, op2, op3); op0 on d0, op1 and op2 on d1, op3 on d0
    g = Graph.from_edges(4, [(0, 1), (0, 2), (0, 3)], output_bytes=[1000, 10, 10, 10], sinks_are_outputs=True)
    t = np.array([[1.0, 2.0]] * 4)
    problem = lat.PlacementProblem(g, ("d0", "d1"), t, np.array([[0, 0.5], [0.25, 0]]),
                                   np.array([[0, 1e-3], [2e-3, 0]]), host=0)
    p = np.array([0, 1, 1, 0])
    # ops 1+2+2+1 = 6; t0 to d1 once: 0.5 + 1000e-3; outputs of op1, op2 back to host: 2 * (0.25 + 10 * 2e-3)
    expected = 6 + 0.5 + 1.0 + 2 * (0.25 + 0.02)
    assert lat.sequential_latency(problem, p) == pytest.approx(expected)


def test_concurrent_latency_overlaps_independent_branches() -> None:
    g = Graph.from_edges(4, [(0, 1), (2, 3)], output_bytes=[1, 1, 1, 1])
    t = np.ones((4, 2))
    problem = lat.PlacementProblem(g, ("d0", "d1"), t, np.zeros((2, 2)), np.zeros((2, 2)), mode="concurrent")
    assert lat.concurrent_latency(problem, np.array([0, 0, 1, 1])) == pytest.approx(2.0)
    assert lat.concurrent_latency(problem, np.array([0, 0, 0, 0])) == pytest.approx(4.0)
    assert lat.sequential_latency(problem, np.array([0, 0, 1, 1])) == pytest.approx(4.0)


def test_concurrent_latency_charges_a_boundary_to_the_receiving_device() -> None:
    """A transfer's fixed latency is work of the receiving device (the split executor's worker), once per tensor and
    device; its bytes delay the consumer like a link.  op0 (d0) feeds op1 and op3 on d1, where op2 (2 s) runs first:
    d1 is busy with op2 until 2, then receives op0's tensor (0.5) and runs op1 (1): 3.5, then op3: 4.5.  As a link
    delay (1 + 0.5 + 0.1 = 1.6 < 2) the latency would have hidden behind op2, predicting 4.0."""
    g = Graph.from_edges(4, [(0, 1), (0, 3)], output_bytes=[100, 1, 1, 1])
    t = np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0], [1.0, 1.0]])
    problem = lat.PlacementProblem(g, ("d0", "d1"), t, np.array([[0, 0.5], [0.5, 0]]),
                                   np.array([[0, 1e-3], [1e-3, 0]]), mode="concurrent")
    p = np.array([0, 1, 1, 1])
    assert lat.receive_seconds(problem, p).tolist() == [0.0, 0.5, 0.0, 0.0]  # once, on the first reader
    assert lat.concurrent_latency(problem, p) == pytest.approx(4.5)
    assert lat.concurrent_latency(problem, np.zeros(4, np.int64)) == pytest.approx(5.0)  # no boundary, no charge


@pytest.mark.parametrize("seed", range(12))
def test_mincut_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 15))  # up to 14 ops: 16384 placements
    problem = random_problem(n, 2, rng)
    best = lat.sequential_latency_batch(problem, all_placements(n, 2)).min()
    p, value = mincut_placement(problem)
    assert value == pytest.approx(best, rel=1e-12, abs=1e-15)
    assert lat.sequential_latency(problem, p) == pytest.approx(value)


@pytest.mark.parametrize("seed", range(3))
def test_cpsat_equals_brute_force_three_devices(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = 6
    problem = random_problem(n, 3, rng)
    best = lat.sequential_latency_batch(problem, all_placements(n, 3)).min()
    p, value, optimal = cpsat_placement(problem, time_limit=20)
    assert optimal
    assert value == pytest.approx(best, rel=1e-6)


def test_problem_validation_messages() -> None:
    g = Graph.from_edges(2, [(0, 1)], output_bytes=[1, 1])
    with pytest.raises(ValueError, match="op_time has shape"):
        lat.PlacementProblem(g, ("a", "b"), np.ones((3, 2)), np.zeros((2, 2)), np.zeros((2, 2)))
    problem = lat.PlacementProblem(g, ("a", "b"), np.ones((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="outside"):
        lat.sequential_latency(problem, np.array([0, 2]))
    # an infinite link would read as free in CP-SAT's integer costs (and as NaN in the model): refused
    for bad in (np.inf, np.nan, -1.0):
        with pytest.raises(ValueError, match="latency must be finite and >= 0"):
            lat.PlacementProblem(g, ("a", "b"), np.ones((2, 2)), np.array([[0.0, bad], [1e-6, 0.0]]), np.zeros((2, 2)))
        with pytest.raises(ValueError, match="finite latency >= 0"):
            TransferModel(bad, 1e10)


# ----------------------------------------------------------------- profiles
def test_profile_roundtrip_and_simulated_devices(tmp_path) -> None:
    base = DeviceProfile("CPU", "cpu", flops_per_s={"compute": 1e11}, bytes_per_s=2e10, op_overhead_s=1e-6)
    ps = add_simulated(ProfileSet((base,), {}, TransferModel(1e-6, 1e10)), ["igpu", "dgpu"])
    assert ps.names == ("CPU", "GPU.0", "GPU.1") and ps.simulated
    assert [d.simulated for d in ps.devices] == [False, True, True]
    path = tmp_path / "p.json"
    save_profiles(ps, path)
    again = load_profiles(path)
    assert again.names == ps.names and again.simulated
    assert again.transfer("CPU", "GPU.1") == ps.transfer("CPU", "GPU.1")
    g = random_graph(10, np.random.default_rng(0))
    m = op_seconds_matrix(g, again)
    assert m.shape == (10, 3) and (m > 0).all()
    conv = [i for i in range(10) if g.op_types[i] == "Conv"]
    if conv:  # compute ops are faster on the simulated dGPU when big enough
        i = max(conv, key=lambda j: g.op_flops[j])
        assert m[i, 2] < m[i, 0]


def test_load_profiles_rejects_other_files(tmp_path) -> None:
    from onnx_sched.errors import OnnxSchedError

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something"}))
    with pytest.raises(OnnxSchedError, match="not an onnx-sched profile"):
        load_profiles(bad)


def test_example_profiles_are_simulated() -> None:
    ps = load_profiles(EXAMPLE_PROFILES)
    assert ps.simulated and ps.host == "CPU"
    assert {d.kind for d in ps.devices} == {"cpu", "igpu", "dgpu"}


def test_profile_openvino_and_ort_time_every_mapped_op() -> None:
    from onnx_sched.profiling import profile_openvino, profile_ort

    imp = import_onnx(branch_model())
    ov = profile_openvino(imp, "CPU", repeats=3, warmup=1)
    assert set(ov.op_seconds) == set(imp.graph.op_names)
    assert sum(ov.op_seconds.values()) > 0 and ov.backend == "openvino" and not ov.simulated
    assert ov.op_seconds["a0"] > 0  # a Conv maps back through originalLayersNames
    ort_prof = profile_ort(imp, repeats=3, warmup=1)
    assert all(ort_prof.op_seconds[n] > 0 for n in imp.graph.op_names)


# ------------------------------------------------------------------- passes
@pytest.fixture(scope="module")
def sim_problem() -> lat.PlacementProblem:
    g = import_onnx(branch_model()).graph
    return lat.placement_problem(g, load_profiles(EXAMPLE_PROFILES), devices=["CPU", "GPU.1"])


def test_latency_passes_registered() -> None:
    names = set(available("latency"))
    assert {"cpu-only", "gpu-only", "auto-cpu-first", "auto-gpu-first", "mincut", "cpsat-place", "heft-place",
            "random-place", "auto"} <= names


def test_passes_return_valid_placements(sim_problem) -> None:
    g = sim_problem.graph
    ctx = PassContext(time_limit=5, problem=sim_problem)
    results = {}
    for name in ("cpu-only", "gpu-only", "auto-gpu-first", "auto-cpu-first", "heft-place", "random-place",
                 "mincut", "cpsat-place", "auto"):
        s = get_pass(name, "latency")(g, ctx)
        assert s.placement is not None and len(s.placement) == g.n_ops
        assert set(s.placement.tolist()) <= {0, 1}
        assert s.info["simulated"] is True and s.info["mode"] == "sequential"
        results[name] = s.info["latency"]
    assert (get_pass("cpu-only", "latency")(g, ctx).placement == 0).all()
    assert (get_pass("gpu-only", "latency")(g, ctx).placement == 1).all()
    best = min(results.values())
    assert results["mincut"] == pytest.approx(best)
    assert results["cpsat-place"] == pytest.approx(best, rel=1e-6)
    assert results["auto"] <= results["cpu-only"]


def test_pass_rejects_missing_problem() -> None:
    g = Graph.from_edges(2, [(0, 1)], output_bytes=[1, 1])
    with pytest.raises(ValueError, match="placement passes need devices and profiles"):
        get_pass("mincut", "latency")(g, PassContext())


# ------------------------------------------------------------- OpenVINO path
def test_openvino_export_survives_save_and_runs_hetero(tmp_path) -> None:
    import openvino as ov
    from openvino.passes import Manager

    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.devices import openvino_core, register_cpu_alias
    from onnx_sched.exporters.openvino import export_openvino, placement_from_rt_info
    from onnx_sched.plugins.openvino_affinity import ApplyAffinity, hetero_device_string
    from onnx_sched.schedule import Schedule

    imp = import_onnx(branch_model())
    g = imp.graph
    placement = np.array([0 if name.startswith("a") else 1 for name in g.op_names])
    core = openvino_core()
    register_cpu_alias(core)
    model = export_openvino(imp, Schedule(np.arange(g.n_ops), "t", placement=placement), ["CPU", "CPUB"])
    ov.save_model(model, tmp_path / "m.xml", compress_to_fp16=False)  # default would halve weight precision
    loaded = core.read_model(tmp_path / "m.xml")
    stored = placement_from_rt_info(loaded)
    assert stored["devices"] == ["CPU", "CPUB"] and set(stored["affinity"].values()) == {"CPU", "CPUB"}
    mgr = Manager()
    mgr.register_pass(ApplyAffinity())
    mgr.run_passes(loaded)
    for op in loaded.get_ordered_ops():
        assert op.get_rt_info()["affinity"].astype(str) in ("CPU", "CPUB")
    for d in ("CPU", "CPUB"):
        core.set_property(d, {"INFERENCE_PRECISION_HINT": "f32"})
    compiled = core.compile_model(loaded, hetero_device_string(loaded))
    assert int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")) >= 2
    feed = random_inputs(imp.model)
    got = compiled.create_infer_request().infer(feed)[compiled.outputs[0]]
    ref_model = core.read_model(imp.model.SerializeToString(), b"")
    ref = core.compile_model(ref_model, "CPU").create_infer_request().infer(feed)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_bench_openvino_light_model_with_initializer_inputs() -> None:
    from onnx_sched.bench.runtimes.openvino import bench_openvino
    from onnx_sched.dag import kahn_order

    imp = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx")  # IR 3: initializers listed as inputs
    g = imp.graph
    p = np.zeros(g.n_ops, np.int64)
    p[kahn_order(g)[g.n_ops // 2:]] = 1
    report = bench_openvino(imp, p, ["CPU", "CPUB"], warmup=1, repeats=2)
    assert report["outputs_equal"] and report["sub_models"] >= 2
    assert set(report["execution_devices"]) == {"CPU", "CPUB"}


def test_bench_openvino_splits_over_three_cpu_names() -> None:
    """On a CPU-only machine a three-device placement runs on CPU, CPUB and CPU2 (the CPU plugin under three names),
    bench-placement's default names for three devices."""
    from onnx_sched.bench.runtimes.openvino import bench_openvino

    imp = import_onnx(branch_model())
    p = np.arange(imp.graph.n_ops) % 3
    report = bench_openvino(imp, p, ["CPU", "CPUB", "CPU2"], warmup=1, repeats=2)
    assert report["outputs_equal"] and report["sub_models"] >= 3
    assert set(report["execution_devices"]) == {"CPU", "CPUB", "CPU2"}


def _int4_matmul_model() -> onnx.ModelProto:
    """Two ``com.microsoft.MatMulNBits`` (4-bit weights, as onnxruntime-genai writes them), Relu, Mul."""
    k, n, block = 64, 32, 32
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.integers(0, 255, (n, k // block, block // 2), dtype=np.uint8), q)
             for q in ("q1", "q2")]
    inits.append(numpy_helper.from_array(rng.random(n * k // block).astype(np.float32), "scales"))
    nodes = [helper.make_node("MatMulNBits", ["x", q, "scales"], [o], domain="com.microsoft", K=k, N=n, bits=4,
                              block_size=block, name=f"mm_{o}") for q, o in (("q1", "a"), ("q2", "b"))]
    nodes += [helper.make_node("Relu", ["a"], ["r"], name="relu"), helper.make_node("Mul", ["r", "b"], ["y"])]
    graph = helper.make_graph(nodes, "int4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, n])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def test_bench_openvino_splits_a_model_with_4_bit_weights_exactly() -> None:
    """The CPU plugin quantizes a compressed-weight MatMul's activations to int8 by default, so the whole model and
    its split computed different outputs (max abs error 36 at values near 5,000: "outputs DIFFER"); f32 runs
    turn that off (``devices.exact_f32``)."""
    from onnx_sched.bench.runtimes.openvino import bench_openvino

    imp = import_onnx(_int4_matmul_model())
    report = bench_openvino(imp, np.array([0, 1, 0, 0]), ["CPU", "CPUB"], warmup=0, repeats=1)
    assert report["sub_models"] >= 2 and report["outputs_equal"] and report["max_abs_error"] == 0


def test_the_sequential_timeline_ends_at_the_sequential_latency() -> None:
    """Every op after the transfers it needs, the outputs' moves to the host last: the sum the model charges, each
    tensor moved once per device."""
    imp = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx")
    problem = lat.placement_problem(imp.graph, load_profiles(EXAMPLE_PROFILES), mode="sequential")
    rng = np.random.default_rng(0)
    for placement in (np.zeros(imp.graph.n_ops, np.int64), rng.integers(0, problem.n_devices, imp.graph.n_ops)):
        start, moves = lat.sequential_timeline(problem, placement)
        ops_end = start + problem.op_time[np.arange(imp.graph.n_ops), placement]
        end = max(ops_end.max(), max((t + d for t, d, *_ in moves), default=0.0))
        assert end == pytest.approx(lat.sequential_latency(problem, placement), rel=1e-9)
        assert len(moves) == len({(tensor, dst) for _, _, tensor, _, dst in moves})  # each tensor moves once


# ---------------------------------------------------------------------- CLI
def test_cli_devices_profile_and_bench_placement(tmp_path) -> None:
    from onnx_sched.cli import main

    model_path = tmp_path / "m.onnx"
    onnx.save(branch_model(), model_path)
    runner = CliRunner()
    r = runner.invoke(main, ["devices", "--json"])
    assert r.exit_code == 0, r.output
    devs = json.loads(r.output)
    assert any(d["backend"] == "openvino" and d["name"] == "CPU" for d in devs)
    prof = tmp_path / "cpu.json"
    r = runner.invoke(main, ["profile", str(model_path), "--device", "CPU", "--repeats", "2", "--simulate", "dgpu",
                             "-o", str(prof)])
    assert r.exit_code == 0, r.output
    ps = load_profiles(prof)
    assert ps.names == ("CPU", "GPU.1") and ps.simulated and not ps.devices[0].simulated
    placement = tmp_path / "p.json"
    report = tmp_path / "r.json"
    r = runner.invoke(main, ["bench-placement", str(model_path), "--method", "mincut", "--profiles", str(prof),
                             "--save-placement", str(placement), "--repeats", "2", "-o", str(report)])
    assert r.exit_code == 0, r.output
    assert "SIMULATED" in r.output
    data = json.loads(report.read_text())
    assert data["outputs_equal"] and data["simulated"]
    r = runner.invoke(main, ["bench-placement", str(model_path), "--placement", str(placement), "--runtime", "ort",
                             "--repeats", "2"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["bench-placement", str(model_path)])  # no placement given, none in the model
    assert r.exit_code == 2 and "no device for" in r.output and "runs MODEL's own placement" in r.output
    r = runner.invoke(main, ["bench-placement", str(model_path), "--placement", str(placement), "--method", "mincut"])
    assert r.exit_code == 2 and "exactly one of" in r.output


# ------------------------------------------------------------------- HSDAG
def test_colocation_merges_only_single_parent_single_child_chains() -> None:
    from onnx_sched.models.inference.hsdag_features import colocate

    # 0 -> 1 -> 2 -> {3, 4} -> 5
    g = Graph.from_edges(6, [(0, 1), (1, 2), (2, 3), (2, 4), (3, 5), (4, 5)], output_bytes=[1] * 6)
    c = colocate(g)
    groups = sorted(sorted(x.tolist()) for x in c.groups)
    assert groups == [[0, 1, 2], [3], [4], [5]]
    assert c.member[0] == c.member[2] != c.member[3]
    assert len(c.edges) == 4


def test_fractal_dimension_of_path_and_grid() -> None:
    from onnx_sched.models.inference.hsdag_features import fractal_dimension

    n = 41
    path = np.array([(i, i + 1) for i in range(n - 1)])
    d_path = fractal_dimension(n, path)
    side = 15
    grid = [(r * side + c, r * side + c + 1) for r in range(side) for c in range(side - 1)]
    grid += [(r * side + c, (r + 1) * side + c) for r in range(side - 1) for c in range(side)]
    d_grid = fractal_dimension(side * side, np.array(grid))
    assert 0.8 < d_path[n // 2] < 1.05
    assert d_grid[(side // 2) * side + side // 2] > 1.5


def test_hsdag_onnx_export_matches_torch(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.inference.hsdag import HsdagPlacer, prepare
    from onnx_sched.models.training.hsdag_train import HsdagNet, _forward, export_onnx

    torch.manual_seed(0)
    net = HsdagNet()
    export_onnx(net, tmp_path)
    problem = lat.placement_problem(import_onnx(branch_model()).graph, load_profiles(EXAMPLE_PROFILES))
    prep = prepare(problem)
    with torch.no_grad():
        want, gid_t = _forward(net, problem, prep)
    placer = HsdagPlacer(tmp_path / "hsdag_placer.onnx", tmp_path / "hsdag_placer_head.onnx")
    got, gid, _ = placer.logits(problem, prep)
    assert (gid == gid_t).all()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


def test_hsdag_pass_with_shipped_checkpoint(sim_problem) -> None:
    from onnx_sched.models.inference.hsdag import ENCODER_PATH

    if not ENCODER_PATH.exists():
        pytest.skip("HSDAG checkpoint not trained in this checkout")
    g = sim_problem.graph
    ctx = PassContext(problem=sim_problem)
    s = get_pass("hsdag", "latency")(g, ctx)
    assert s.placement is not None and set(s.placement.tolist()) <= {0, 1}
    worst_single = max(get_pass(m, "latency")(g, ctx).info["latency"] for m in ("cpu-only", "gpu-only"))
    assert s.info["latency"] <= worst_single
    assert s.info["simulated"] is True and 0 < s.info["groups_round0"] <= g.n_ops


@pytest.mark.parametrize("devices", [("CPU", "GPU.0", "GPU.1"), ("CPU", "GPU.0")])
def test_auto_portfolio_includes_hsdag_and_the_exact_optimum(devices) -> None:
    from pathlib import Path

    from onnx_sched.profiling import load_profiles

    profiles = load_profiles(Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json")
    g = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx").graph
    problem = lat.placement_problem(g, profiles, "sequential", list(devices))
    s = get_pass("auto", "latency")(g, PassContext(time_limit=5, problem=problem))
    tried = s.info["portfolio"]
    exact = "mincut" if len(devices) == 2 else "cpsat-place"
    assert {"heft-place", "hsdag", exact} <= set(tried)
    assert s.info["latency"] == pytest.approx(min(tried.values()))
    assert lat.sequential_latency(problem, s.placement) == pytest.approx(s.info["latency"])
    assert s.optimal  # the exact solver proves it (on ties the proven candidate is the one reported)
    if len(devices) == 2:
        assert s.info["latency"] == pytest.approx(mincut_placement(problem)[1])


@pytest.mark.parametrize("mode", ["sequential", "concurrent"])
def test_auto_on_one_device_is_its_one_placement_proven(mode) -> None:
    from pathlib import Path

    from onnx_sched.profiling import load_profiles

    profiles = load_profiles(Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json")
    g = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx").graph
    problem = lat.placement_problem(g, profiles, mode, ["GPU.1"])
    s = get_pass("auto", "latency")(g, PassContext(time_limit=5, problem=problem))
    assert s.optimal and s.method == "single:GPU.1" and (s.placement == 0).all()
    assert "portfolio" not in s.info  # nothing searched: there is no other placement

# ------------------------------------------------- unnamed / duplicate-named nodes
def anonymous_model(duplicates: bool = True) -> onnx.ModelProto:
    """Two branches whose nodes have no names or (``duplicates``) share one, as many exporters write
    them.  ONNX Runtime refuses duplicate node names; OpenVINO and onnx.checker accept them."""
    dup = "dup" if duplicates else ""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["a1"]),
        helper.make_node("Sigmoid", ["a1"], ["a2"], name=dup),
        helper.make_node("Neg", ["h"], ["b1"], name=dup),
        helper.make_node("Tanh", ["b1"], ["b2"]),
        helper.make_node("Add", ["a2", "b2"], ["y"], name=dup),
    ]
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 16], np.linspace(-1, 1, 256).astype(np.float32).tolist())
    graph = helper.make_graph(nodes, "anon", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_unnamed_and_duplicate_nodes_get_unique_order_independent_names(tmp_path) -> None:
    from onnx_sched.exporters.onnx import export_onnx
    from onnx_sched.schedule import Schedule

    imp = import_onnx(anonymous_model())
    names = imp.graph.op_names
    assert len(set(names)) == len(names) == 6
    order = np.array([0, 3, 4, 1, 2, 5])  # branch b first: a different file order
    out = export_onnx(imp, Schedule(order, "t"))
    onnx.save(out, tmp_path / "r.onnx")
    again = import_onnx(tmp_path / "r.onnx").graph.op_names
    assert sorted(again) == sorted(names) and [names[i] for i in order] == list(again)


def test_bench_placement_runs_a_placement_on_unnamed_nodes(tmp_path) -> None:
    """optimize-style export (reordered, per-node devices) -> bench-placement on the original model."""
    from onnx_sched.cli import main
    from onnx_sched.exporters.onnx import export_onnx
    from onnx_sched.schedule import Schedule

    src = tmp_path / "m.onnx"
    onnx.save(anonymous_model(duplicates=False), src)  # ONNX Runtime refuses duplicate node names
    imp = import_onnx(src)
    g = imp.graph
    branch_b = {g.op_names[i] for i in (3, 4)}  # Neg and Tanh, both unnamed
    placement = np.array([int(n in branch_b) for n in g.op_names])
    out = export_onnx(imp, Schedule(np.array([0, 3, 4, 1, 2, 5]), "t", placement=placement), device_names=["CPU", "GPU.0"])
    onnx.save(out, tmp_path / "placed.onnx")
    report = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["bench-placement", str(src), "--placement", str(tmp_path / "placed.onnx"),
                                  "--runtime", "ort", "--repeats", "2", "--report", str(report)])
    assert r.exit_code == 0, r.output
    data = json.loads(report.read_text())
    assert data["outputs_equal"] and data["sub_models"] >= 2
    assert data["ops_per_device"] == {"CPU": 4, "GPU.0": 2}


def test_openvino_affinity_on_unnamed_and_duplicate_nodes() -> None:
    from openvino.passes import Manager

    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.devices import openvino_core, register_cpu_alias
    from onnx_sched.exporters.openvino import export_openvino, placement_from_rt_info
    from onnx_sched.plugins.openvino_affinity import ApplyAffinity, hetero_device_string
    from onnx_sched.schedule import Schedule

    imp = import_onnx(anonymous_model())
    placement = np.array([0, 0, 0, 1, 1, 0])  # branch b (Neg "dup", unnamed Tanh) on the second device
    core = openvino_core()
    register_cpu_alias(core)
    model = export_openvino(imp, Schedule(np.arange(6), "t", placement=placement), ["CPU", "CPUB"])
    affinity = placement_from_rt_info(model)["affinity"]
    assert {affinity[n] for n in affinity if n.endswith("Tanh") or "b2" in n} <= {"CPUB"}
    mgr = Manager()
    mgr.register_pass(ApplyAffinity())
    mgr.run_passes(model)
    devices = {op.get_friendly_name(): op.get_rt_info()["affinity"].astype(str) for op in model.get_ordered_ops()}
    assert set(devices.values()) == {"CPU", "CPUB"}
    core.set_property("CPUB", {"INFERENCE_PRECISION_HINT": "f32"})
    core.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    compiled = core.compile_model(model, hetero_device_string(model))
    feed = random_inputs(imp.model)
    got = compiled.create_infer_request().infer(feed)[compiled.outputs[0]]
    ref = core.compile_model(core.read_model(imp.model.SerializeToString(), b""), "CPU").create_infer_request().infer(feed)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_cpsat_placement_keeps_the_best_single_device_when_its_model_would_not_be_built_in_time(monkeypatch) -> None:
    from onnx_sched.passes.placement import _optimal

    g = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx").graph
    problem = lat.placement_problem(g, load_profiles(EXAMPLE_PROFILES))
    assert problem.n_devices == 3
    monkeypatch.setattr(_optimal, "BUILD_SECONDS_PER_TERM", 1.0)  # every model "takes" longer than the limit
    singles = min(get_pass(m, "latency")(g, PassContext(problem=problem)).info["latency"] for m in ("cpu-only", "gpu-only"))
    for method in ("cpsat-place", "mincut"):
        s = get_pass(method, "latency")(g, PassContext(problem=problem, time_limit=5.0))
        assert s.info["cpsat_status"].startswith("not built") and s.info["latency"] <= singles + 1e-12
    s = get_pass("auto", "latency")(g, PassContext(problem=problem, time_limit=2.0))
    assert "cpsat-place" not in s.info["portfolio"] and s.info["cpsat_skipped"].startswith("model too large")


def test_auto_with_measured_target_chooses_the_fastest_candidate_run(tmp_path) -> None:
    """``--target measured``: ``auto`` runs its distinct candidates (both single devices always) in one interleaved
    run and keeps the fastest; the host-only placement is the reference (speedup 1 exactly), and the chosen model
    computes what the input computes."""
    from pathlib import Path

    from conftest import assert_bitwise_equal, branchy_model, run_ort

    from onnx_sched.cli import main

    root = Path(__file__).resolve().parents[1]
    src, out, report = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(branchy_model(branches=4, n=256), str(src))
    res = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out), "--objective", "latency", "--profiles",
                                    str(root / "examples" / "profiles_cpu_igpu_dgpu.json"), "--devices", "CPU,GPU.1",
                                    "--target", "measured", "--report", str(report)])
    assert res.exit_code == 0, (res.output, res.exception)
    r = json.loads(report.read_text())
    speed = {c["method"]: c["target_speedup"] for c in r["candidates"]}
    assert {"single:CPU", "single:GPU.1"} <= set(speed) and speed["single:CPU"] == 1.0
    assert r["target"]["speedup"] == max(speed.values()) == speed[r["method_used"]] >= speed["single:GPU.1"]
    assert r["target"]["proxy_best_speedup"] in speed.values()
    assert_bitwise_equal(run_ort(onnx.load(str(src))), run_ort(onnx.load(str(out))))


def test_split_boundary_is_timed_through_the_executor() -> None:
    """A boundary between two executor devices costs more than nothing and is fitted as latency + bytes / bandwidth;
    the chain it is timed on runs the same placed or not (what the subtraction assumes)."""
    from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, split_model
    from onnx_sched.profiling.transfer import measure_split_boundary, relu_chain

    devices = [DeviceSpec("a", cores=(0,)), DeviceSpec("b", cores=(1,))]
    boundary = measure_split_boundary(devices, sizes=(1 << 10, 1 << 16), repeats=9)
    assert boundary.latency_s > 0 and 0 < boundary.bandwidth_Bps < float("inf")
    chain = relu_chain(8, 3)
    assert chain.graph.n_ops == 3
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    for placement in ([0, 0, 0], [0, 1, 0]):
        with SplitExecutor(split_model(chain, np.array(placement)), devices, ["y3"]) as ex:
            assert np.array_equal(ex.run({"x": x})["y3"], np.maximum(x, 0))


def test_profile_scale_to_run_sums_op_times_to_the_split_executor_run(tmp_path) -> None:
    """``profile --scale-to-run``: ONNX Runtime op times (optimizations off, one event per node) are scaled to sum to
    the whole model run as one split-executor part; OpenVINO's profile (already the compiled model) refuses it."""
    from conftest import branchy_model

    from onnx_sched.cli import main

    src = tmp_path / "m.onnx"
    onnx.save(branchy_model(branches=3, n=128), str(src))
    runner = CliRunner()
    res = runner.invoke(main, ["profile", str(src), "--runtime", "ort", "--repeats", "3", "--scale-to-run",
                               "-o", str(tmp_path / "p.json")])
    assert res.exit_code == 0, (res.output, res.exception)
    dev = load_profiles(tmp_path / "p.json").devices[0]
    assert sum(dev.op_seconds.values()) == pytest.approx(dev.total_seconds) and dev.total_seconds > 0
    assert "split-executor part" in dev.notes and all(v > 0 for v in dev.op_seconds.values())
    bad = runner.invoke(main, ["profile", str(src), "--runtime", "openvino", "--scale-to-run",
                               "-o", str(tmp_path / "q.json")])
    assert bad.exit_code != 0 and "PERF_COUNT" in bad.output and not (tmp_path / "q.json").exists()
