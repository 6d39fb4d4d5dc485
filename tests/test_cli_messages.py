"""What the CLI prints and writes: names with brackets survive rich, trainers refuse a light install in one
line, candidate passes say when the time limit cut their sampling or a reference won, ``--candidates`` sizes
BRKGA's population; bad values, foreign checkpoints and file-system errors are one line; outputs never replace
a device or a pipe, nor overwrite a profile, a machine file or an IR's weights."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import BLOCK_TORCH, CORPUS, branchy_model

from onnx_sched.cli import main

ROOT = Path(__file__).resolve().parents[1]
MACHINES = ROOT / "examples" / "machines_cpu_igpu_dgpu.json"


def test_bracketed_names_are_printed_as_given(tmp_path) -> None:
    """rich would read ``[x]`` in a path or an op name as markup and drop it."""
    model, out = tmp_path / "m[x].onnx", tmp_path / "o[y].onnx"
    onnx.save(branchy_model(), model)
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(out), "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output.replace("\n", "")
    res = CliRunner().invoke(main, ["inspect", str(model)])
    assert res.exit_code == 0 and "m[x]" in res.output  # the title may wrap after the bracket


@pytest.mark.parametrize("trainer", ["peak-mem", "regal", "makespan", "hsdag"])
def test_trainers_refuse_a_light_install_in_one_line(trainer: str) -> None:
    code = BLOCK_TORCH + textwrap.dedent(
        f"""
        from onnx_sched.cli import main
        sys.argv = ["onnx-sched", "train", {trainer!r}]
        main()
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == ["onnx-sched: error: training needs torch: pip install 'onnx-sched[train]'"]


def test_pass_through_trainers_show_their_own_options() -> None:
    pytest.importorskip("torch")
    for trainer, option in (("makespan", "--n-ops"), ("hsdag", "--imitation-minutes")):
        res = CliRunner().invoke(main, ["train", trainer, "--help"])
        assert res.exit_code == 0 and option in res.output and f"train {trainer} [-h]" in res.output


def test_bench_openvino_without_openvino_is_one_line(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["openvino"] = None
        from onnx_sched.cli import main
        sys.argv = ["onnx-sched", "bench", {str(model)!r}, "--runtime", "openvino"]
        main()
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == ["onnx-sched: error: OpenVINO is not installed (pip install "
                                               "'onnx-sched[openvino]')"]


def _makespan(tmp_path: Path, *extra: str) -> dict:
    model, report = tmp_path / "m.onnx", tmp_path / "r.json"
    onnx.save(branchy_model(branches=6), model)
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(tmp_path / "out.onnx"), "--objective", "makespan",
                                    "--machines", str(MACHINES), "--report", str(report), *extra])
    assert res.exit_code == 0, res.output
    return json.loads(report.read_text())


@pytest.mark.parametrize("asked", [30, 250])
def test_brkga_candidates_size_its_final_population(tmp_path, asked: int) -> None:
    details = _makespan(tmp_path, "--method", "brkga", "--candidates", str(asked), "--time-limit", "5")["details"]
    assert details["candidates_generated"] == asked


def test_gflownet_says_when_the_time_limit_cut_its_samples(tmp_path) -> None:
    report = _makespan(tmp_path, "--method", "gflownet", "--candidates", "1000", "--time-limit", "0.01")
    generated = report["details"]["candidates_generated"]
    assert generated < 1000
    assert f"gflownet generated {generated} of the 1000 candidates asked for before the time limit" in " ".join(
        report["notes"])
    chosen = report["details"]["chosen"]
    if chosen in ("list-cp", "no-split"):  # a reference won: the method says so, as auto's does
        assert report["method_used"] == f"gflownet:{chosen}"
    else:
        assert report["method_used"] == "gflownet"


def _one_line_error(res, *words: str) -> None:
    """Exit 2 and one stderr line (CliRunner mixes stdout and stderr in ``output``) holding ``words``."""
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnx-sched: error: "), res.output
    assert all(w in lines[0] for w in words), lines[0]


def test_output_into_a_pipe_writes_through_it(tmp_path) -> None:
    """A device or a pipe (``-o /dev/null``) is written into, never replaced by a regular file."""
    import os
    import stat
    import threading

    model, fifo = tmp_path / "m.onnx", tmp_path / "pipe"
    onnx.save(branchy_model(), model)
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = CliRunner().invoke(main, ["inspect", str(model), "--report", str(fifo)])
    reader.join(timeout=60)
    assert res.exit_code == 0, res.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["ops"] == 10


def test_outputs_never_overwrite_profiles_machines_or_an_irs_weights(tmp_path) -> None:
    import shutil

    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    machines = tmp_path / "machines.json"
    shutil.copy(MACHINES, machines)
    before = machines.read_bytes()
    for flags in (["-o", str(tmp_path / "o.onnx"), "--report", str(machines)], ["-o", str(machines)]):
        res = CliRunner().invoke(main, ["optimize", str(model), "--objective", "makespan", "--machines", str(machines),
                                        *flags])
        _one_line_error(res, "is an input file")
    assert machines.read_bytes() == before
    xml = Path(CORPUS) / "openvino" / "randwire_ws.xml"
    if xml.is_file():
        res = CliRunner().invoke(main, ["optimize", str(xml), "-o", str(tmp_path / "o.xml"), "--report",
                                        str(tmp_path / "o.bin")])
        _one_line_error(res, "--report", "-o (its .bin)")
        assert not (tmp_path / "o.xml").exists()


def test_a_plot_format_matplotlib_lacks_is_refused_before_anything_is_written(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(tmp_path / "o.onnx"), "--plot",
                                    str(tmp_path / "p.xyz")])
    _one_line_error(res, "--plot", ".png")
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("args, words", [
    (["--devices", "CPU,GPU", "--memory-limit", "GPU=inf"], ["--memory-limit", "GPU=inf"]),
    (["--devices", "CPU,GPU", "--memory-limit", "GPU=4GiB", "--memory-limit", "GPU=1"], ["given twice"]),
    (["--objective", "makespan", "--machines", str(MACHINES), "--method", "ga", "--option", "population=0"],
     ["ga: population must be >= 2"]),
    (["--method", "learned", "--option", "model=NOT_ONNX"], ["not a readable ONNX model"]),
    (["--devices", "CPU,GPU", "--method", "regal", "--option", "model=NOT_ONNX"], ["not a REGAL checkpoint"]),
    (["--devices", "CPU,GPU", "--method", "local-search", "--option", "neighbours=0"], ["neighbours must be >= 1"]),
    (["--objective", "makespan", "--machines", str(MACHINES), "--method", "gflownet", "--temperature", "inf"],
     ["--temperature must be positive and finite"]),
    (["--objective", "makespan", "--machines", "NOT_ONNX"], ["not a machine description (not UTF-8 text)"]),
    (["--dim", "N=2", "--dim", "N=3"], ["given twice"]),
])
def test_bad_values_are_one_line(tmp_path, args: list[str], words: list[str]) -> None:
    model, junk = tmp_path / "m.onnx", tmp_path / "junk.onnx"
    onnx.save(branchy_model(), model)
    junk.write_bytes(b"\x98\x00 not a model")
    args = [a.replace("NOT_ONNX", str(junk)) for a in args]
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(tmp_path / "o.onnx"), "--time-limit", "2", *args])
    _one_line_error(res, *words)


def test_file_system_errors_are_one_line(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    res = CliRunner().invoke(main, ["gen", "layered", "-n", "10", "-o", str(tmp_path / "file" / "g")])
    _one_line_error(res, "Not a directory")


def test_a_torch_checkpoint_of_another_trainer_is_one_line(tmp_path) -> None:
    pytest.importorskip("torch")
    from onnx_sched.models.training.checkpoint_io import load_checkpoint

    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    with pytest.raises(ValueError, match="not a torch checkpoint"):
        load_checkpoint(junk)
    import torch

    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="no model; another trainer"):
        load_checkpoint(tmp_path / "other.pt", ("model",))


def test_a_placement_of_another_model_is_refused(tmp_path) -> None:
    from onnx_sched.bench.placement_file import load_placement, save_placement
    from onnx_sched.importers.onnx import import_onnx

    small, big = tmp_path / "small.onnx", tmp_path / "big.onnx"
    onnx.save(branchy_model(branches=2), small)
    onnx.save(branchy_model(branches=6), big)
    g_small, g_big = import_onnx(small).graph, import_onnx(big).graph
    save_placement(tmp_path / "p.json", g_big, [0] * g_big.n_ops, ["A", "B"])
    data = json.loads((tmp_path / "p.json").read_text())
    data["model"] = "another"
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="a placement of model 'another'"):
        load_placement(tmp_path / "p.json", g_small)


def test_latency_says_when_profiles_were_measured_on_another_model(tmp_path) -> None:
    model, report = tmp_path / "m.onnx", tmp_path / "r.json"
    onnx.save(branchy_model(), model)
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(tmp_path / "o.onnx"), "--objective", "latency",
                                    "--profiles", str(ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"),
                                    "--time-limit", "2", "--report", str(report)])
    assert res.exit_code == 0, res.output
    rep = json.loads(report.read_text())
    assert set(rep["measured_ops"].values()) == {0}
    assert any("measured model 'resnet50'" in n and "fitted per-op-type rates" in n for n in rep["notes"])


def test_bench_checks_dim_names_like_optimize(tmp_path) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "sym.onnx")
    for dim, words in (("M=2", ["--dim M", "symbolic dims are N"]), ("N=0", ["positive VALUE"])):
        res = CliRunner().invoke(main, ["bench", str(tmp_path / "sym.onnx"), "--dim", dim, "--no-heap"])
        _one_line_error(res, *words)


def test_a_file_name_that_is_not_utf8(tmp_path) -> None:
    """optimize reads it (onnx's checker gets the model, not the name); bench says why it cannot, in one line."""
    import os

    folder = os.fsencode(tmp_path)
    name = os.fsdecode(folder + b"/bad\xff.onnx")
    onnx.save(branchy_model(), name)
    res = CliRunner().invoke(main, ["optimize", name, "-o", str(tmp_path / "o.onnx"), "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["bench", name, "--no-heap"])
    _one_line_error(res, "UTF-8 names only")


def test_models_without_operators_and_crossed_sizes_are_one_line(tmp_path) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    model = helper.make_model(helper.make_graph([], "zero", [x], [x]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "zero.onnx")
    placement = tmp_path / "p.json"
    placement.write_text(json.dumps({"format": "onnx-sched-placement/1", "model": "zero", "devices": ["A"],
                                      "placement": {}}))
    for args in (["bench-placement", str(tmp_path / "zero.onnx"), "--placement", str(placement)],
                 ["profile", str(tmp_path / "zero.onnx"), "-o", str(tmp_path / "prof.json")]):
        _one_line_error(CliRunner().invoke(main, args), "has no operators")
    for trainer in ("peak-mem", "regal"):
        _one_line_error(CliRunner().invoke(main, ["train", trainer, "--min-ops", "300", "--max-ops", "100"]),
                        "--min-ops 300 is above --max-ops 100")
    has_torch = importlib.util.find_spec("torch") is not None  # the trainer's own checks come after torch's import
    _one_line_error(CliRunner().invoke(main, ["train", "regal", "--advantage", "leave-one-out", "--samples", "1"]),
                    "give --samples 2 or more" if has_torch else "training needs torch")


def test_a_model_onnx_runtime_folds_to_constants_is_one_line_naming_ort_graph(tmp_path) -> None:
    """The input has an operator (an Identity of its input that nothing reads) beside a Relu of a constant, but
    ONNX Runtime's --ort-graph drops the one and folds the other: the refusal names ORT's graph and the way out, not
    "the model has no operators"; without --ort-graph the model is written."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    c = numpy_helper.from_array(np.array([-1.0, 2.0], np.float32), "c")
    nodes = [helper.make_node("Identity", ["x"], ["unread"]), helper.make_node("Constant", [], ["k"], value=c),
             helper.make_node("Relu", ["k"], ["y"])]
    graph = helper.make_graph(nodes, "folds", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    src = tmp_path / "folds.onnx"
    onnx.save(model, src)
    out = tmp_path / "out.onnx"
    _one_line_error(CliRunner().invoke(main, ["optimize", str(src), "-o", str(out), "--ort-graph", "basic"]),
                    "--ort-graph basic graph has no operators left", "run without --ort-graph")
    assert not out.exists()
    res = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_profile_refuses_options_it_would_ignore(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    for args, words in ((["--simulate", ",,"], ["--simulate", "no device kinds"]),
                        (["--threads", "4"], ["--threads", "OpenVINO"]),
                        (["--hosts", "CPU"], ["--hosts", "does not apply to CPU on openvino"]),
                        (["--runtime", "ort", "--hosts", "CPU"], ["--hosts", "CPUExecutionProvider on ort"]),
                        (["-d", "torch:cpu", "--no-transfer", "--hosts", "CPU"],
                         ["torch:cpu on torch with --no-transfer"])):
        res = CliRunner().invoke(main, ["profile", str(model), "-o", str(tmp_path / "p.json"), *args])
        _one_line_error(res, *words)
    assert not (tmp_path / "p.json").exists()


def test_an_ir_sidecar_placement_applies_to_the_ir_it_came_from(tmp_path) -> None:
    """The sidecar names the IR's Constants and Parameters too; that is not a placement of another model."""
    xml = Path(CORPUS) / "openvino" / "randwire_ws.xml"
    if not xml.is_file():
        pytest.skip("corpus IR not available")
    out = tmp_path / "rw.ms.xml"
    res = CliRunner().invoke(main, ["optimize", str(xml), "-o", str(out), "--objective", "makespan", "--machines",
                                    str(MACHINES), "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    from onnx_sched.bench.placement_file import load_placement, sidecar_path
    from onnx_sched.importers.openvino import import_openvino

    graph = import_openvino(xml).graph
    placement, devices, _ = load_placement(sidecar_path(out), graph)
    assert len(placement) == graph.n_ops and set(placement.tolist()) <= set(range(len(devices)))
    res = CliRunner().invoke(main, ["bench", str(xml), "--runtime", "openvino", "--dim", "N=2", "--no-heap"])
    _one_line_error(res, "--dim names symbolic dimensions")
    res = CliRunner().invoke(main, ["optimize", str(xml), "-o", str(tmp_path / "x.xml"), "--input-shape",
                                    "image=1x3x16"])
    _one_line_error(res, "cannot reshape", "do not match", "(node ")


def test_a_missing_machine_or_profile_file_is_named_before_the_model_is_read(tmp_path) -> None:
    """The objective's missing option is the error even for a model that cannot be read: no import is spent."""
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    for objective, flag in (("makespan", "--machines M.json"), ("latency", "--profiles P.json")):
        for ort_graph in ([], ["--ort-graph", "basic"]):  # ONNX Runtime's rewrite reads the model first
            res = CliRunner().invoke(main, ["optimize", str(broken), "--objective", objective, "-o",
                                            str(tmp_path / "o.onnx"), *ort_graph])
            _one_line_error(res, f"--objective {objective} needs {flag}")


def test_pipeline_passes_check_what_the_objective_needs_when_built() -> None:
    from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

    with pytest.raises(ValueError, match="--objective makespan needs --machines M.json"):
        OnnxSchedPass("makespan")
    with pytest.raises(ValueError, match="not an onnx-sched profile file"):
        OnnxSchedPass("latency", profiles=[MACHINES])


def test_a_run_over_its_time_limit_says_where_the_time_went():
    from onnx_sched.cli.optimize import _overrun_reason

    searched = {"total_seconds": 3.0, "seconds": 2.7, "details": {}}
    assert _overrun_reason(searched, 1.0) == "2.7 s searching, 0.3 s reading, preparing and writing"
    timed = {**searched, "details": {"measure_seconds": 2.6}}  # reward=measured: the pass ran placements itself
    assert "(2.6 s of it timing placements for real, the single devices first)" in _overrun_reason(timed, 1.0)
    held_back = {**searched, "measure_seconds": 4.0}  # a measured target's runs, estimated before the search
    assert _overrun_reason(held_back, 1.0).startswith("measuring on the target alone needs about 4.0 s")
    rewritten = {"total_seconds": 6.0, "seconds": 0.01, "details": {}, "ort_graph": {"level": "basic", "seconds": 2.3}}
    assert _overrun_reason(rewritten, 1.0).startswith("ONNX Runtime's --ort-graph rewrite (2.3 s), reading and writing")


def test_a_placement_of_a_model_openvino_runs_without_ops_says_why(tmp_path) -> None:
    """The output is a constant and the one op's result is read by nothing (a random control-flow draw of
    ``benchmarks/control_flow_models.py`` once its branches folded): onnx-sched places the op, OpenVINO drops it, so
    HETERO has no op to give a device.  The one line said ``complete_affinity: no op of the model has a device``."""
    pytest.importorskip("openvino")
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 8])
    nodes = [onnx.helper.make_node("Relu", ["x"], ["unread"]),
             onnx.helper.make_node("Constant", [], ["y"], value=onnx.numpy_helper.from_array(np.ones((2, 8), "f")))]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 10
    path = tmp_path / "identities.onnx"
    onnx.save(model, path)
    profiles = Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json"
    res = CliRunner().invoke(main, ["bench-placement", str(path), "--method", "auto", "--profiles", str(profiles),
                                    "--profile-devices", "CPU,GPU.1", "--time-limit", "1", "--repeats", "1"])
    _one_line_error(res, "OpenVINO reads this model with no op to run", "nothing to place on devices")


def test_a_model_openvino_crashes_on_is_one_line_for_profile_and_bench(tmp_path) -> None:
    """A ``Loop`` whose body holds a ``Scan`` whose body gives a constant (``tests/data/openvino_crashes.onnx``,
    made smaller from a control-flow fuzz case): OpenVINO 2026.4 kills the process compiling it (SIGSEGV).
    ``profile`` compiled it in its own process and died with no word; now, as ``bench``, one line.  Run as commands
    of their own: a crash here would take pytest with it."""
    model = Path(__file__).parent / "data" / "openvino_crashes.onnx"
    for args in (["profile", str(model), "-o", str(tmp_path / "p.json"), "--repeats", "1"],
                 ["bench", str(model), "--runtime", "openvino", "--repeats", "1", "--warmup", "0", "--no-heap"]):
        done = subprocess.run([sys.executable, "-m", "onnx_sched.cli", *args], capture_output=True, text=True,
                              timeout=600)
        if done.returncode == 0:  # a later OpenVINO may run it: then nothing to say
            continue
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        # OpenVINO 2025.0 refuses the model instead of crashing on it: one line all the same
        said = "SIGSEGV" if "SIGSEGV" in done.stderr else "OpenVINO cannot compile"
        assert done.stderr.strip().splitlines() == [done.stderr.strip()] and said in done.stderr, done.stderr


def test_a_model_openvino_cannot_compile_is_one_line_for_profile_and_bench(tmp_path) -> None:
    """onnx's expanded ``LinearAttention`` node test (a ``Convert`` of a dynamic ``Reshape`` inside an ``If``;
    ``tests/data/openvino_refuses.onnx``, written from ``onnx.backend.test.case.node``): OpenVINO 2026.4's CPU plugin
    refuses to compile it.  ``profile`` raised OpenVINO's RuntimeError as a traceback; both now quote its reason."""
    model = Path(__file__).parent / "data" / "openvino_refuses.onnx"
    old_onnx = onnx.IR_VERSION < onnx.load(model).ir_version  # onnx 1.17 checks IR 10 at most: it may refuse first
    for args in (["profile", str(model), "-o", str(tmp_path / "p.json"), "--repeats", "1"],
                 ["bench", str(model), "--runtime", "openvino", "--repeats", "1", "--warmup", "0", "--no-heap"]):
        res = CliRunner().invoke(main, args)
        if res.exit_code == 0:  # a later OpenVINO may compile it: then nothing to say
            continue
        _one_line_error(res)
        if old_onnx and "invalid ONNX model" in res.output:
            continue
        reason = res.output.partition("OpenVINO cannot compile")[2].partition(" on CPU: ")[2]
        assert reason.strip(), res.output  # OpenVINO's own words (2026.4: "... not implemented for op ...")


def test_a_tensor_larger_than_any_memory_is_one_line(tmp_path) -> None:
    """A declared shape of 2^65 bytes (int64 sizes cannot hold it): one line naming the tensor, not an overflow."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**31, 2**31, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**31, 2**31, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save(model, tmp_path / "huge.onnx")
    res = CliRunner().invoke(main, ["optimize", str(tmp_path / "huge.onnx"), "-o", str(tmp_path / "o.onnx")])
    _one_line_error(res, "tensor 'x'", "more than any memory")
