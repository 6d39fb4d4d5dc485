"""The console script end to end: good runs and one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import assert_bitwise_equal, branchy_model, run_ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.report import fmt_times

EXE = [sys.executable, "-m", "onnx_sched.cli.__main__"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300)


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def test_optimize_writes_model_report_and_plot(tmp_path):
    src = _save(branchy_model(n=128), tmp_path / "branchy.onnx")
    out, report, plot = tmp_path / "out.onnx", tmp_path / "r.json", tmp_path / "mem.png"
    res = run_cli("optimize", str(src), "-o", str(out), "--objective", "peak-mem", "--method", "dfs",
                  "--report", str(report), "--plot", str(plot))
    assert res.returncode == 0, res.stderr
    assert "Peak memory" in res.stdout
    r = json.loads(report.read_text())
    assert {"objective", "method", "peak_bytes", "optimal", "seconds"} <= set(r)
    assert r["peak_bytes"]["output"] < r["peak_bytes"]["input"]
    assert r["peak_bytes"]["lower_bound"] <= r["peak_bytes"]["output"]
    assert plot.stat().st_size > 1000
    out_model = onnx.load(str(out))
    onnx.checker.check_model(out_model)
    assert_bitwise_equal(run_ort(src), run_ort(out_model))


def test_time_limit_covers_the_whole_command_and_the_report_says_what_it_proves(tmp_path):
    """auto on an irregular graph: the command's own clock (import, search, export; compile excluded)
    stays within --time-limit, and the report names its certificate."""
    from onnx_sched.synth import er_graph
    from onnx_sched.synth.onnx_writer import graph_to_onnx

    src = _save(graph_to_onnx(er_graph(300, 10_007)), tmp_path / "er.onnx")
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    res = run_cli("optimize", str(src), "-o", str(out), "--time-limit", "3", "--report", str(report))
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["time_limit"] == 3.0 and r["compile_seconds"] >= 0.0
    assert r["seconds"] > 1.0  # the search used its budget on this graph ...
    assert r["total_seconds"] <= 3.0 + 0.25  # ... and the whole command stayed within it
    assert r["certificate"] == ("proven optimal" if r["optimal"] else f"within {r['gap']:.1%} of a proven bound")
    assert "Certificate" in res.stdout


def test_inspect_prints_statistics(tmp_path):
    src = _save(branchy_model(n=16), tmp_path / "m.onnx")
    res = run_cli("inspect", str(src), "--json", str(tmp_path / "s.json"))
    assert res.returncode == 0, res.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["ops"] == 10 and stats["file_order_peak_bytes"] >= stats["lower_bound_bytes"]
    assert "placement" not in stats  # no node carries a device


def test_inspect_says_when_devices_written_by_hand_leave_ops_unplaced(tmp_path):
    import onnx

    model = branchy_model(n=16)
    for i, node in enumerate(model.graph.node):
        if i % 2:
            node.metadata_props.add(key="pkg.onnx_sched.device", value="GPU")
    model.ir_version = 10
    src = _save(model, tmp_path / "m.onnx")
    onnx.checker.check_model(onnx.load(str(src)))
    res = run_cli("inspect", str(src), "--json", str(tmp_path / "s.json"))
    assert res.returncode == 0, res.stderr
    placed = json.loads((tmp_path / "s.json").read_text())["placement"]
    assert "no device for" in placed["error"] and "the placement does not cover the model" in res.stdout


def _bad_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = _save(branchy_model(n=16), tmp_path / "good.onnx")
    not_onnx = tmp_path / "notes.onnx"
    not_onnx.write_text("hello, I am a text file\n" * 10)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    vi = helper.make_tensor_value_info
    cyc = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])], "c",
        [vi("x", TensorProto.FLOAT, [4])], [vi("b", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    cyc.ir_version = 10
    unknown_op = helper.make_model(helper.make_graph(
        [helper.make_node("FrobnicateTensor", ["x"], ["y"])], "u",
        [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    unknown_op.ir_version = 10
    dyn = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "d",
        [vi("x", TensorProto.FLOAT, ["n", 4])], [vi("y", TensorProto.FLOAT, ["n", 4])]), opset_imports=[helper.make_opsetid("", 17)])
    dyn.ir_version = 10
    short = numpy_helper.from_array(np.zeros((128, 128), np.float32), "w")
    short.raw_data = short.raw_data[:100]  # a weight cut short: 100 of its 65536 bytes
    short_weight = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "s", [vi("x", TensorProto.FLOAT, [2, 128])],
        [vi("y", TensorProto.FLOAT, [2, 128])], [short]), opset_imports=[helper.make_opsetid("", 17)])
    short_weight.ir_version = 10
    return {
        "not_onnx": (not_onnx, "not a readable ONNX model"),
        "truncated": (truncated, "ONNX"),
        "cycle": (_save(cyc, tmp_path / "cycle.onnx"), "cycle"),
        "missing": (tmp_path / "missing.onnx", "no such file"),
        "unknown_op": (_save(unknown_op, tmp_path / "unknown_op.onnx"), "unknown operator"),
        "unknown_shapes": (_save(dyn, tmp_path / "dyn.onnx"), "--dim"),
        "short_weight": (_save(short_weight, tmp_path / "short.onnx"), "initializer 'w' holds 100 bytes"),
    }


@pytest.mark.parametrize("case", ["not_onnx", "truncated", "cycle", "missing", "unknown_op", "unknown_shapes",
                                  "short_weight"])
def test_bad_input_gives_one_line_and_nonzero_exit(tmp_path, case):
    path, expected = _bad_models(tmp_path)[case]
    res = run_cli("optimize", str(path), "-o", str(tmp_path / "out.onnx"))
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert expected in lines[0]
    assert not (tmp_path / "out.onnx").exists()


def test_output_equal_to_input_is_refused_and_input_untouched(tmp_path):
    src = _save(branchy_model(n=16), tmp_path / "m.onnx")
    before = src.read_bytes()
    res = run_cli("optimize", str(src), "-o", str(src), "--method", "dfs")
    assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1
    assert "is an input file" in res.stderr
    assert src.read_bytes() == before


def test_dim_option_makes_dynamic_model_work(tmp_path):
    vi = helper.make_tensor_value_info
    dyn = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "d",
        [vi("x", TensorProto.FLOAT, ["n", 4])], [vi("y", TensorProto.FLOAT, ["n", 4])]), opset_imports=[helper.make_opsetid("", 17)])
    dyn.ir_version = 10
    src = _save(dyn, tmp_path / "dyn.onnx")
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "o.onnx"), "--dim", "n=2", "--method", "dfs")
    assert res.returncode == 0, res.stderr


def test_pass_options_reach_the_pass_and_bad_ones_fail_cleanly(tmp_path):
    from onnx_sched.cli.optimize import parse_pass_options

    assert parse_pass_options(("episodes=200", "temperature=2.5", "mode=race")) == {
        "episodes": 200, "temperature": 2.5, "mode": "race"}
    src = _save(branchy_model(n=64), tmp_path / "b.onnx")
    report = tmp_path / "r.json"
    ok = run_cli("optimize", str(src), "-o", str(tmp_path / "o.onnx"), "--method", "learned",
                 "--option", "samples=4", "--report", str(report))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(report.read_text())["details"]["decoder"].startswith("sample-4")
    bad = run_cli("optimize", str(src), "-o", str(tmp_path / "x.onnx"), "--option", "episodes")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "KEY=VALUE" in bad.stderr and not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize("mode", ["sequential", "concurrent"])
def test_latency_plot_draws_the_placement_as_its_mode_runs_it(tmp_path, mode):
    """``--plot`` with the latency objective was refused ("has no plot"); it draws the placement's timeline."""
    from conftest import CORPUS

    profiles = Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json"
    out, plot = tmp_path / "o.onnx", tmp_path / "timeline.png"
    res = run_cli("optimize", str(CORPUS / "onnx" / "light_squeezenet.onnx"), "-o", str(out), "--objective",
                  "latency", "--profiles", str(profiles), "--latency-mode", mode, "--time-limit", "2",
                  "--plot", str(plot))
    assert res.returncode == 0, res.stderr
    assert plot.stat().st_size > 5000


def test_makespan_on_a_corpus_model_writes_model_report_and_gantt(tmp_path):
    from conftest import CORPUS

    src = CORPUS / "onnx" / "light_inception_v1.onnx"
    out, report, gantt = tmp_path / "o.onnx", tmp_path / "r.json", tmp_path / "gantt.png"
    machines = Path(__file__).resolve().parents[1] / "examples" / "machines_3types.json"
    res = run_cli("optimize", str(src), "-o", str(out), "--objective", "makespan", "--machines", str(machines),
                  "--time-limit", "2", "--report", str(report), "--plot", str(gantt))
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["makespan"]["lower_bound"] <= r["makespan"]["output"] <= r["makespan"]["list_cp"]
    assert r["time_unit"] == "s"  # a roofline machine file
    shown = fmt_times(r["makespan"]["list_cp"], r["makespan"]["output"])  # the table's times, in one unit
    assert any("Makespan" in line and all(t in line for t in shown) for line in res.stdout.splitlines()), res.stdout
    assert gantt.stat().st_size > 5000
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    assert_bitwise_equal(run_ort(src), run_ort(onnx.load(str(out))))


@pytest.mark.parametrize("args, expected", [
    (["--time-limit", "nan"], "positive, finite number of seconds"),
    (["--time-limit", "0"], "positive, finite number of seconds"),
    (["--dim", "N=-3"], "positive VALUE"),
    (["--input-shape", "x=1x-4"], "positive sizes"),
    (["--input-shape", "x=16"], "--input-shape x=16: the input has 2 dimensions (16x16), not 1"),
    (["--input-shape", "x=16x32"], "--input-shape x=16x32: dimension 1 of the input is fixed at 16 (16x16)"),
    (["--objective", "nope"], "Invalid value for '--objective'"),
    (["--no-such-flag"], "No such option"),
    (["-o", "somewhere/"], "'somewhere/' names a folder; give a file path"),
])
def test_bad_flags_give_one_line_naming_the_flag(tmp_path, args, expected):
    src = _save(branchy_model(n=16), tmp_path / "m.onnx")
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "out.onnx"), *args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnx-sched: error: "), res.stderr
    assert expected in lines[0]
    assert not (tmp_path / "out.onnx").exists()


def test_a_model_without_operators_is_refused_in_one_line(tmp_path):
    vi = helper.make_tensor_value_info
    m = helper.make_model(helper.make_graph([], "passthrough", [vi("x", TensorProto.FLOAT, [4])],
                                            [vi("x", TensorProto.FLOAT, [4])]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    src = _save(m, tmp_path / "m.onnx")
    for extra in ([], ["--devices", "CPU,GPU"]):
        res = run_cli("optimize", str(src), "-o", str(tmp_path / "out.onnx"), *extra)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "no operators" in res.stderr and "nothing to order or place" in res.stderr
    for args, what in ((["profile", str(src), "-o", str(tmp_path / "p.json")], "nothing to profile"),
                       (["bench-placement", str(src), "--placement", str(src)], "nothing to split")):
        res = run_cli(*args)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "no operators" in res.stderr and what in res.stderr, res.stderr


def _model_ort_refuses(tmp_path: Path) -> Path:
    """Valid for onnx-sched (shapes known, a custom-domain op), but ONNX Runtime has no kernel for the op."""
    vi = helper.make_tensor_value_info
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Frob", ["a"], ["y"], domain="custom.x")], "c",
        [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom.x", 1)])
    m.ir_version = 10
    return _save(m, tmp_path / "custom.onnx")


@pytest.mark.parametrize("args", [
    ["--ort-graph", "basic"],
    ["--objective", "makespan", "--machines", "examples/machines_cpu_igpu_dgpu.json", "--target", "measured"],
    ["--objective", "latency", "--profiles", "examples/profiles_cpu_igpu_dgpu.json", "--target", "measured"],
])
def test_commands_that_run_the_model_refuse_one_onnx_runtime_cannot_load_in_one_line(tmp_path, args):
    src = _model_ort_refuses(tmp_path)
    root = Path(__file__).resolve().parents[1]
    args = [str(root / a) if a.startswith("examples/") else a for a in args]
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "out.onnx"), "--time-limit", "5", *args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "ONNX Runtime cannot load the model" in lines[0] and "Frob" in lines[0], res.stderr
    assert not (tmp_path / "out.onnx").exists()
    # without running the model, the same file is scheduled (ORT is not needed to order it)
    assert run_cli("optimize", str(src), "-o", str(tmp_path / "out.onnx")).returncode == 0


def _conv_net(batch: int | str = 1) -> onnx.ModelProto:
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), f"w{i}") for i in (1, 2)]
    vi = helper.make_tensor_value_info
    return helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["b"]),
         helper.make_node("Conv", ["b", "w2"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "conv", [vi("x", TensorProto.FLOAT, [batch, 16, 16, 16])], [vi("y", TensorProto.FLOAT, [batch, 16, 16, 16])],
        initializer=weights), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("external", [False, True])
def test_ort_graph_writes_the_weights_as_the_input_keeps_them(tmp_path, external):
    """ONNX Runtime writes its rewritten graph's weights to a data file (so they are copied, not parsed); a model
    the user gave with its weights inline is written back inline, one with external data keeps a data file."""
    src = tmp_path / "conv.onnx"
    onnx.save_model(_conv_net(), src, save_as_external_data=external, location="conv.onnx.data", size_threshold=1024)
    out_dir = tmp_path / "out"
    out = out_dir / "out.onnx"
    res = run_cli("optimize", str(src), "-o", str(out), "--ort-graph", "basic")
    assert res.returncode == 0, res.stderr
    onnx.checker.check_model(str(out), full_check=True)
    written = onnx.load(str(out), load_external_data=False)
    assert any(t.data_location == TensorProto.EXTERNAL for t in written.graph.initializer) == external
    assert sorted(p.name for p in out_dir.iterdir()) == (["conv.onnx.data", "out.onnx"] if external else ["out.onnx"])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    feed = {"x": np.random.default_rng(2).standard_normal((1, 16, 16, 16)).astype(np.float32)}
    got = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"]).run(None, feed)
    want = ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"]).run(None, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_ort_graph_says_when_onnx_runtime_folded_run_time_tensors_into_weights(tmp_path):
    """A tensor the input computes at run time (ConstantOfShape, 2 MiB) is a weight in ORT's graph: the output is
    right and carries it, and a note says why the file grew; the conv net's rewrite (no such growth) has none."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [512, 1024])
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    vi = helper.make_tensor_value_info
    grow = helper.make_model(helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["c"], value=one), helper.make_node("Add", ["x", "c"], ["y"])],
        "grow", [vi("x", TensorProto.FLOAT, [512, 1024])], [vi("y", TensorProto.FLOAT, [512, 1024])], [shape]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    for model, noted in ((grow, True), (_conv_net(), False)):
        src = _save(model, tmp_path / f"{model.graph.name}.onnx")
        out, report = tmp_path / f"{model.graph.name}.out.onnx", tmp_path / f"{model.graph.name}.json"
        res = run_cli("optimize", str(src), "-o", str(out), "--ort-graph", "basic", "--report", str(report))
        assert res.returncode == 0, res.stderr
        notes = json.loads(report.read_text()).get("notes", [])
        assert any("constant folding made weights" in n for n in notes) == noted, notes
        assert ("constant folding made weights" in " ".join(res.stdout.split())) == noted
    written = onnx.load(str(tmp_path / "grow.out.onnx"))
    assert sum(numpy_helper.to_array(t).nbytes for t in written.graph.initializer) >= 2 * 2**20
    x = np.random.default_rng(4).standard_normal((512, 1024)).astype(np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = ort.InferenceSession(written.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], x + 1.0)


def test_onnx_runtimes_graphs_of_two_models_can_share_a_folder(tmp_path):
    """Each rewritten graph's data file is named after it, so two written into one folder keep their own weights."""
    from onnx import numpy_helper

    from onnx_sched.bench.measure import ort_optimized_model

    models = [_conv_net(), _conv_net()]
    for t in models[1].graph.initializer:
        t.CopyFrom(numpy_helper.from_array(2 * numpy_helper.to_array(t), t.name))
    feed = {"x": np.random.default_rng(3).standard_normal((1, 16, 16, 16)).astype(np.float32)}
    for i, m in enumerate(models):
        src = _save(m, tmp_path / f"m{i}.onnx")
        dst = ort_optimized_model(src, tmp_path / "ort" / f"m{i}.ort.onnx", weights_file=True)
        got = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, feed)
        want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feed)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert sorted(p.name for p in (tmp_path / "ort").iterdir()) == [
        "m0.ort.onnx", "m0.ort.onnx.data", "m1.ort.onnx", "m1.ort.onnx.data"]


def test_ort_graph_all_sizes_its_layout_ops_from_a_run_of_the_graph(tmp_path):
    """ORT's level-all graph of a conv net holds com.microsoft layout ops (NCHWc, where the CPU has it) whose
    output sizes onnx's shape inference does not know: one run of ORT's graph gives them, and the reordered
    graph gives the input's outputs."""
    src = _save(_conv_net(), tmp_path / "conv.onnx")
    out = tmp_path / "out.onnx"
    res = run_cli("optimize", str(src), "-o", str(out), "--ort-graph", "all")
    assert res.returncode == 0, res.stderr
    written = onnx.load(str(out))
    onnx.checker.check_model(written)
    layout = [n for n in written.graph.node if n.domain.startswith("com.microsoft")]
    if not layout:
        pytest.skip("ONNX Runtime has no NCHWc layout ops on this CPU")
    typed = {vi.name for vi in [*written.graph.value_info, *written.graph.output]}
    assert all(o in typed for n in layout for o in n.output)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    feed = {"x": np.random.default_rng(1).standard_normal((1, 16, 16, 16)).astype(np.float32)}
    got = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"]).run(None, feed)
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_ort_graph_all_with_sizes_nothing_gives_names_the_users_model(tmp_path):
    """A symbolic batch pinned with --dim: ORT's graph is not run for sizes (its inputs are not static), so the
    layout ops' sizes stay unknown: one line naming the input file and the way out."""
    src = _save(_conv_net("N"), tmp_path / "conv.onnx")
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "out.onnx"), "--ort-graph", "all", "--dim", "N=1")
    if res.returncode == 0:  # no layout ops on this CPU: the graph imported, and the model was written
        assert (tmp_path / "out.onnx").exists()
        return
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"onnx-sched: error: {src}: unknown size") and "--ort-graph basic" in lines[0]


def test_ort_graph_drops_inputs_whose_initializers_ort_folded(tmp_path):
    """IR 3 lists every initializer as a graph input (light_squeezenet's stripped weights are ConstantOfShape of
    such shape initializers); ORT folds them and shares equal constants, dropping initializers but not their
    input entries: the written model must not ask the caller for them."""
    from onnx import numpy_helper

    vi = helper.make_tensor_value_info
    shapes = [numpy_helper.from_array(np.array([4, 8], np.int64), f"shape{k}") for k in range(3)]
    half = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])
    nodes = [helper.make_node("ConstantOfShape", [f"shape{k}"], [f"c{k}"], value=half) for k in range(3)]
    nodes += [helper.make_node("Add", ["x", "c0"], ["a"]), helper.make_node("Add", ["a", "c1"], ["b"]),
              helper.make_node("Mul", ["b", "c2"], ["y"])]
    inputs = [vi("x", TensorProto.FLOAT, [4, 8]), *(vi(f"shape{k}", TensorProto.INT64, [2]) for k in range(3))]
    m = helper.make_model(helper.make_graph(nodes, "ir3", inputs, [vi("y", TensorProto.FLOAT, [4, 8])],
                                            initializer=shapes),
                          opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    src = _save(m, tmp_path / "ir3.onnx")
    out = tmp_path / "out.onnx"
    res = run_cli("optimize", str(src), "-o", str(out), "--ort-graph", "basic")
    assert res.returncode == 0, res.stderr
    written = onnx.load(str(out))
    inits = {t.name for t in written.graph.initializer}
    assert [i.name for i in written.graph.input if i.name not in inits] == ["x"]
    assert_bitwise_equal(run_ort(str(src)), run_ort(str(out)))


@pytest.mark.parametrize(("args", "expected"), [
    (["--objective", "makespan", "--machines", "examples/machines_3types.json", "--devices", "CPU,GPU"],
     "devices (--devices) does not apply to objective 'makespan'"),
    (["--machines", "examples/machines_3types.json"], "machines (--machines) does not apply to objective 'peak-mem'"),
    (["--latency-mode", "concurrent"], "latency_mode (--latency-mode) does not apply to objective 'peak-mem'"),
    (["--devices", ","], "--devices ',': no device names"),
    (["--dim", "batch=3"], "--dim batch (dims= in Python): no input of the model has a dimension named 'batch'"),
])
def test_an_option_the_objective_does_not_read_is_refused(tmp_path, args, expected):
    src = _save(branchy_model(), tmp_path / "m.onnx")
    root = Path(__file__).resolve().parents[1]
    args = [str(root / a) if a.startswith("examples/") else a for a in args]
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "o.onnx"), *args)
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnx-sched: error: ") and expected in lines[0], res.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_pass_options_nothing_read_are_reported_unused(tmp_path):
    src = _save(branchy_model(), tmp_path / "m.onnx")
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "o.onnx"), "--method", "random", "--samples", "8",
                  "--option", "sampels=8", "--report", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "r.json").read_text())["unused_options"] == ["sampels"]
    assert "did not use the option(s) sampels" in " ".join(res.stdout.split())
    res = run_cli("optimize", str(src), "-o", str(tmp_path / "o2.onnx"), "--method", "random", "--samples", "8",
                  "--report", str(tmp_path / "r2.json"))
    assert json.loads((tmp_path / "r2.json").read_text())["unused_options"] == []
    assert "did not use" not in res.stdout


def test_ort_graph_leaves_data_dependent_sizes_to_the_worst_case_bound(tmp_path):
    """TopK with a computed k: one run of ORT's graph shows one k, not every k; the written model must not declare
    that run's shapes (ORT would warn on any other k), and the report sizes them at their bound, with the note,
    as without --ort-graph."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("ReduceMax", ["kin"], ["k"], keepdims=1), helper.make_node("TopK", ["x", "k"],
                                                                                        ["v", "i"], axis=1),
             helper.make_node("Relu", ["v"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "topk", [vi("x", TensorProto.FLOAT, [3, 8]),
                                                            vi("kin", TensorProto.INT64, [1])],
                                            [vi("y", TensorProto.FLOAT, [3, None]), vi("i", TensorProto.INT64,
                                                                                      [3, None])]),
                          opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    src, out, rep = _save(m, tmp_path / "topk.onnx"), tmp_path / "out.onnx", tmp_path / "r.json"
    plain = run_cli("optimize", str(src), "-o", str(tmp_path / "plain.onnx"), "--report", str(tmp_path / "p.json"))
    res = run_cli("optimize", str(src), "-o", str(out), "--ort-graph", "basic", "--report", str(rep))
    assert plain.returncode == 0 and res.returncode == 0, res.stderr
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    assert not [v.name for v in written.graph.value_info if v.name in {"v", "i", "y"}]
    report, baseline = json.loads(rep.read_text()), json.loads((tmp_path / "p.json").read_text())
    assert report["peak_bytes"]["input"] == baseline["peak_bytes"]["input"] > 3 * 8 * 4
    assert report["notes"] and "data-dependent" in report["notes"][0]


def test_ort_graph_does_not_write_a_tensor_type_for_an_optional_value(tmp_path):
    """An Optional value has no tensor size: --ort-graph must not record the run's tensor as its type (the
    written model would fail onnx.checker and ONNX Runtime's load); it is one line, as without --ort-graph."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Optional", ["x"], ["o"]), helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["g"]), helper.make_node("Relu", ["g"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "optional", [vi("x", TensorProto.FLOAT, [2, 3])],
                                            [vi("y", TensorProto.FLOAT, [2, 3]), vi("has", TensorProto.BOOL, [])]),
                          opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    src, out = _save(m, tmp_path / "opt.onnx"), tmp_path / "out.onnx"
    res = run_cli("optimize", str(src), "-o", str(out), "--ort-graph", "basic")
    if res.returncode == 0:  # a future import that sizes optional values: then the model must be valid
        onnx.checker.check_model(onnx.load(str(out)), full_check=True)
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        return
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "'o'" in lines[0], res.stderr
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["bench", "{src}", "--repeats", "1", "--warmup", "0", "--arena", "off"],
    ["profile", "{src}", "--runtime", "ort", "-d", "CPUExecutionProvider", "--repeats", "1", "-o", "{tmp}/p.json"],
    ["bench-placement", "{src}", "--runtime", "ort", "--method", "auto", "--profiles",
     "examples/profiles_cpu_igpu_dgpu.json", "--profile-devices", "CPU,GPU.1", "--repeats", "1", "--time-limit", "1"],
])
def test_commands_that_time_the_model_refuse_one_onnx_runtime_cannot_load_in_one_line(tmp_path, args):
    src = _model_ort_refuses(tmp_path)
    root = Path(__file__).resolve().parents[1]
    args = [str(root / a) if a.startswith("examples/") else a.format(src=src, tmp=tmp_path) for a in args]
    res = run_cli(*args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "ONNX Runtime cannot load the model" in lines[0] and "Frob" in lines[0], res.stderr
    assert str(src) in lines[0]
    assert not (tmp_path / "p.json").exists()


def _model_ort_fails_to_initialise(tmp_path: Path) -> Path:
    """ONNX Runtime has the kernel but its constructor throws (no such locale), which ORT also logs on stderr."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER", locale="xx_NOT_A.LOCALE")
    m = helper.make_model(helper.make_graph([node], "s", [vi("x", TensorProto.STRING, [3])],
                                            [vi("y", TensorProto.STRING, [3])]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return _save(m, tmp_path / "strnorm.onnx")


@pytest.mark.parametrize("args", [
    ["optimize", "{src}", "-o", "{tmp}/out.onnx", "--ort-graph", "basic"],
    ["bench", "{src}", "--repeats", "1", "--warmup", "0", "--arena", "off"],
    ["profile", "{src}", "--runtime", "ort", "-d", "CPUExecutionProvider", "--repeats", "1", "-o", "{tmp}/p.json"],
])
def test_a_kernel_onnx_runtime_cannot_initialise_is_one_line_without_its_log(tmp_path, args):
    src = _model_ort_fails_to_initialise(tmp_path)
    res = run_cli(*(a.format(src=src, tmp=tmp_path) for a in args))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "ONNX Runtime cannot load the model" in lines[0] and "locale" in lines[0], res.stderr


@pytest.mark.parametrize("args", [
    ["profile", "{src}", "--repeats", "1", "-o", "{tmp}/p.json"],
    ["bench-placement", "{src}", "--method", "auto", "--profiles", "examples/profiles_cpu_igpu_dgpu.json",
     "--profile-devices", "CPU,GPU.1", "--repeats", "1", "--time-limit", "1"],
])
def test_openvino_refusing_an_onnx_model_names_the_file(tmp_path, args):
    src = _model_ort_refuses(tmp_path)  # neither runtime knows custom.x's Frob
    root = Path(__file__).resolve().parents[1]
    res = run_cli(*(str(root / a) if a.startswith("examples/") else a.format(src=src, tmp=tmp_path) for a in args))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"onnx-sched: error: {src}: OpenVINO cannot read"), res.stderr
    assert "Frob" in lines[0] and lines[0].endswith("(--runtime ort runs an ONNX model with ONNX Runtime)")


def test_makespan_on_one_device_is_proven_with_no_gap(tmp_path):
    from conftest import CORPUS

    from onnx_sched.api import optimize_model

    machines = tmp_path / "one.json"
    machines.write_text(json.dumps({"name": "one", "links": [], "devices": [
        {"name": "CPU", "streams": 1, "peak_flops": 1.0e12, "mem_bandwidth": 6.0e10, "overhead": 5.0e-6}]}))
    report = optimize_model(CORPUS / "onnx" / "light_squeezenet.onnx", "makespan", time_limit=5,
                            machines=machines).report
    assert report["optimal"] and report["gap"] == 0.0  # one device runs the ops' total: the bound, up to ulps
    assert report["makespan"]["output"] == pytest.approx(report["makespan"]["lower_bound"], rel=1e-12)


def test_inspect_shows_floats_briefly_and_counts_per_kind():
    from onnx_sched.cli.inspect import _shown

    assert _shown("gflops", 22.442464652) == "22.44"
    assert _shown("shape_sources", {}) == "-" and _shown("shape_sources", {"ort-run": 2}) == "ort-run: 2"
    assert _shown("lower_bound_bytes", 3 * 2**20) == "3.00 MiB" and _shown("gap_to_bound", 0.125) == "12.5%"
