"""OpenVINO IR end to end: optimize / inspect / profile / bench-placement on IR, the IR writer, the plugins.

Every corpus IR model goes through ``onnx-sched optimize m.xml -o out.xml`` for each
objective, and out.xml must load in OpenVINO with the input's outputs (CPU, f32, seeded
inputs, rtol = atol = 1e-5).  The measured limits of an IR (per-op affinity and layer
order do not survive; ``onnx_sched.exporters.openvino_ir``) are pinned too, so a change
in OpenVINO shows up here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

ov = pytest.importorskip("openvino")
ops = pytest.importorskip("openvino.opset13")

from onnx_sched.bench.outputs import compare_outputs, outputs_informative  # noqa: E402
from onnx_sched.bench.runtimes.openvino import ov_inputs  # noqa: E402
from onnx_sched.bench.runtimes.openvino_inputs import output_names, seeded_inputs  # noqa: E402
from onnx_sched.cli import main  # noqa: E402
from onnx_sched.devices import openvino_core, register_cpu_alias  # noqa: E402
from onnx_sched.exporters.openvino import placement_from_rt_info  # noqa: E402
from onnx_sched.exporters.openvino_ir import ORDER_NOTE, order_from_rt_info  # noqa: E402
from onnx_sched.importers.dispatch import import_model  # noqa: E402
from onnx_sched.importers.openvino import ImportedOpenVINO, import_openvino  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "openvino"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpus/openvino")
XMLS = sorted(CORPUS.glob("*.xml")) if CORPUS.is_dir() else []
PROFILES = ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"  # CPU measured, GPU.0 / GPU.1 simulated
MACHINES = ROOT / "examples" / "machines_3types.json"
OBJECTIVE_ARGS = {
    "peak-mem": [],
    "makespan": ["--machines", str(MACHINES)],
    "latency": ["--profiles", str(PROFILES), "--devices", "CPU,GPU.1"],
}
needs_corpus = pytest.mark.skipif(not XMLS, reason="OpenVINO IR corpus not present")
_REFERENCE: dict[str, dict[str, np.ndarray]] = {}


def _cli(*args: str):  # noqa: ANN202
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_error_line(result) -> str:  # noqa: ANN001
    """The run failed with exit 2 and exactly one ``onnx-sched: error:`` line, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnx-sched: error:"), result.stderr
    return lines[0]


def _outputs(xml: Path, feed_from: Path | None = None) -> dict[str, np.ndarray]:
    """Outputs of an IR on the CPU plugin, f32, seeded inputs of ``feed_from`` (default the IR itself)."""
    core = openvino_core()
    imp = import_openvino(feed_from or xml)
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled.create_infer_request().infer(ov_inputs(compiled, seeded_inputs(imp, 0)))
    return {k: np.array(res[p]) for k, p in zip(output_names(imp), compiled.outputs)}


def _reference(xml: Path) -> dict[str, np.ndarray]:
    if str(xml) not in _REFERENCE:
        _REFERENCE[str(xml)] = _outputs(xml)
    return _REFERENCE[str(xml)]


# ------------------------------------------------------------ optimize on every corpus IR
@needs_corpus
@pytest.mark.parametrize("objective", list(OBJECTIVE_ARGS))
@pytest.mark.parametrize("xml", XMLS, ids=lambda p: p.stem)
def test_optimize_ir_writes_an_ir_with_the_same_outputs(tmp_path: Path, xml: Path, objective: str) -> None:
    out, report = tmp_path / "out.xml", tmp_path / "r.json"
    r = _cli("optimize", xml, "-o", out, "--objective", objective, "--time-limit", "2", "--report", report,
             *OBJECTIVE_ARGS[objective])
    assert r.exit_code == 0, (r.output, r.exception)
    assert "Note: OpenVINO plans its own" in r.output  # the report does not claim the order applies
    rep = json.loads(report.read_text())
    assert rep["output_format"] == "openvino" and ORDER_NOTE in rep["notes"]
    others = [n for n in rep["notes"] if n != ORDER_NOTE]  # latency: profiles measured on the ONNX model's op names
    assert not others or (objective == "latency" and all("per-op-type rates" in n for n in others)), others
    assert out.is_file() and out.with_suffix(".bin").is_file()
    assert not list(tmp_path.glob(".out.xml.*"))  # no temporary left behind
    loaded = openvino_core().read_model(str(out))
    order = order_from_rt_info(loaded)
    imp = import_openvino(xml)
    assert sorted(order) == sorted(imp.op_index)  # the scheduled order, recorded
    assert loaded.get_rt_info(["onnx_sched", "objective"]).astype(str) == objective
    placed = placement_from_rt_info(loaded)
    sidecar = tmp_path / "out.placement.json"
    if objective == "peak-mem":
        assert placed is None and not sidecar.exists()
    else:  # makespan (machine types) and latency (devices) place ops: rt_info + sidecar agree
        side = json.loads(sidecar.read_text())
        assert side["format"] == "onnx-sched-placement/1"
        assert side["placement"] == placed["affinity"] and side["devices"] == placed["devices"]
    ok, err = compare_outputs(_reference(xml), _outputs(out, feed_from=xml))
    assert ok, f"max abs error {err}"


def _branchy_ir(path: Path, branches: int = 4, n: int = 64) -> Path:
    """An IR with random (non-zero) weights: ``branches`` parallel MatMul -> Tanh -> ReduceMean
    branches from one input, concatenated."""
    rng = np.random.default_rng(0)
    x = ops.parameter([1, n], np.float32, name="x")
    big = []
    for b in range(branches):
        w = ops.constant((rng.standard_normal((n, 16 * n)) / np.sqrt(n)).astype(np.float32))
        mm = ops.matmul(x, w, False, False)
        mm.set_friendly_name(f"up{b}")
        big.append(mm)
    small = []
    for b, mm in enumerate(big):
        act = ops.tanh(mm)
        act.set_friendly_name(f"act{b}")
        red = ops.reduce_mean(act, ops.constant(np.array([1], np.int64)), True)
        red.set_friendly_name(f"mean{b}")
        small.append(red)
    out = ops.concat(small, 1)
    out.set_friendly_name("out")
    ov.save_model(ov.Model([out], [x], "branchy"), str(path), compress_to_fp16=False)
    return path


def test_reoptimizing_a_placed_ir_for_one_device_drops_the_placement(tmp_path: Path) -> None:
    """The second run's IR has no placement in its rt_info and no sidecar file, so bench-placement does not run
    the first run's split."""
    from onnx_sched.bench.placement_file import sidecar_path
    from onnx_sched.exporters.openvino import placement_from_rt_info

    src = _branchy_ir(tmp_path / "b.xml")
    split, single = tmp_path / "split.xml", tmp_path / "single.xml"
    assert _cli("optimize", src, "-o", split, "--devices", "CPU,GPU", "--time-limit", "2").exit_code == 0
    assert placement_from_rt_info(ov.Core().read_model(str(split))) is not None and sidecar_path(split).is_file()
    assert _cli("optimize", split, "-o", single, "--time-limit", "2").exit_code == 0
    model = ov.Core().read_model(str(single))
    assert placement_from_rt_info(model) is None and not sidecar_path(single).exists()
    assert model.get_rt_info(["onnx_sched", "objective"]).astype(str) == "peak-mem"
    assert not model.has_rt_info(["onnx_sched", "transfers"])


def test_optimize_ir_with_real_weights_keeps_outputs(tmp_path: Path) -> None:
    src = _branchy_ir(tmp_path / "branchy.xml")
    out, report = tmp_path / "opt.xml", tmp_path / "r.json"
    r = _cli("optimize", src, "-o", out, "--method", "bfs", "--time-limit", "2", "--report", report)
    assert r.exit_code == 0, (r.output, r.exception)
    rep = json.loads(report.read_text())
    assert rep["peak_bytes"]["output"] <= rep["peak_bytes"]["input"]
    ref, got = _outputs(src), _outputs(out, feed_from=src)
    assert outputs_informative(ref)
    assert compare_outputs(ref, got)[0]


# ----------------------------------------------------------------------------- the API
def test_api_optimize_takes_an_in_memory_model_and_leaves_it_unchanged(tmp_path: Path) -> None:
    import onnx_sched

    model = ov.Core().read_model(str(_branchy_ir(tmp_path / "m.xml")))
    out = onnx_sched.optimize(model, objective="peak-mem", method="greedy", time_limit=1)
    assert isinstance(out, ov.Model) and out is not model
    assert order_from_rt_info(out) is not None and order_from_rt_info(model) is None
    assert out.get_rt_info(["onnx_sched", "method"]).astype(str) == "greedy"
    with pytest.raises(TypeError, match="openvino.Model"):
        onnx_sched.optimize(42)


def test_import_model_dispatches_and_reshapes(tmp_path: Path) -> None:
    src = _branchy_ir(tmp_path / "b.xml", n=32)
    imp = import_model(src)
    assert isinstance(imp, ImportedOpenVINO) and imp.path == src
    bigger = import_model(src, input_shapes={"x": (4, 32)})
    assert bigger.graph.summary()["activation_bytes"] == 4 * imp.graph.summary()["activation_bytes"]
    assert list(imp.model.inputs[0].get_partial_shape().to_shape()) == [1, 32]  # the file's model is untouched
    with pytest.raises(Exception, match="not inputs of the model"):
        import_model(src, input_shapes={"nope": (1, 32)})
    with pytest.raises(Exception, match="--input-shape"):
        import_model(src, dims={"batch": 2})


# ------------------------------------------------------------- inspect / profile / bench-placement
@needs_corpus
def test_inspect_ir(tmp_path: Path) -> None:
    xml = CORPUS / "resnet50.xml"
    report = tmp_path / "i.json"
    r = _cli("inspect", xml, "--report", report)
    assert r.exit_code == 0, (r.output, r.exception)
    stats = json.loads(report.read_text())
    assert stats["ops"] == import_openvino(xml).graph.n_ops
    assert stats["lower_bound_bytes"] > 0 and "Convolution" in stats["op_types"]


@needs_corpus
def test_profile_optimize_and_bench_placement_on_ir(tmp_path: Path) -> None:
    xml = CORPUS / "resnet50.xml"
    prof = tmp_path / "p.json"
    r = _cli("profile", xml, "--repeats", "2", "--no-transfer", "--simulate", "dgpu", "-o", prof)
    assert r.exit_code == 0, (r.output, r.exception)
    out = tmp_path / "placed.xml"
    r = _cli("optimize", xml, "-o", out, "--objective", "latency", "--profiles", prof, "--method", "random-place",
             "--time-limit", "2")
    assert r.exit_code == 0, (r.output, r.exception)
    assert (tmp_path / "placed.placement.json").is_file()
    report = tmp_path / "b.json"
    r = _cli("bench-placement", out, "--repeats", "2", "--warmup", "1", "--report", report)  # sidecar applied
    assert r.exit_code == 0, (r.output, r.exception)
    data = json.loads(report.read_text())
    assert data["outputs_equal"] and data["source"] == "openvino-ir"
    sidecar = tmp_path / "placed.placement.json"  # the placement read is an input: never written over
    assert "is an input file" in _one_error_line(_cli("bench-placement", out, "--save-placement", sidecar))
    r = _cli("bench-placement", out, "--placement", out, "--repeats", "2", "--warmup", "1")  # the IR's rt_info
    assert r.exit_code == 0 and "outputs equal" in r.output, (r.output, r.exception)
    assert "ONNX Runtime cannot run" in _one_error_line(_cli("bench-placement", out, "--runtime", "ort"))
    assert "ONNX Runtime cannot run" in _one_error_line(_cli("profile", xml, "--runtime", "ort", "-o", prof))


def test_measured_target_on_an_ir_is_refused_in_one_line(tmp_path: Path) -> None:
    xml = _branchy_ir(tmp_path / "m.xml")
    r = _cli("optimize", xml, "-o", tmp_path / "o.xml", "--objective", "latency", "--profiles", PROFILES,
             "--method", "mincut", "--devices", "CPU,GPU.1", "--target", "measured", "--time-limit", "2")
    assert "give an ONNX model" in _one_error_line(r) and "bench-placement --runtime openvino" in _one_error_line(r)
    assert not (tmp_path / "o.xml").exists()


# ----------------------------------------------------------------------------- plugins
def test_openvino_pass_records_and_applies_a_placement(tmp_path: Path) -> None:
    from openvino.passes import Manager

    from onnx_sched.plugins.openvino_affinity import hetero_device_string
    from onnx_sched.plugins.openvino_pass import OnnxSchedOpenVINOPass

    model = ov.Core().read_model(str(_branchy_ir(tmp_path / "m.xml")))
    p = OnnxSchedOpenVINOPass("latency", method="random-place", profiles=[PROFILES], devices=["CPU", "GPU.1"],
                              time_limit=1)
    mgr = Manager()
    mgr.register_pass(p)
    mgr.run_passes(model)
    assert p.last_report["objective"] == "latency" and order_from_rt_info(model) is not None
    assert all("affinity" in op.get_rt_info() for op in model.get_ordered_ops())
    assert hetero_device_string(model).startswith("HETERO:")


def test_openvino_pass_places_a_model_with_a_loop(tmp_path: Path) -> None:
    """A Constant read both by a Loop and inside the Loop's body (OpenVINO shares the node) is not a reader
    on two devices of the main graph: the placement applies without touching the body."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from openvino.passes import Manager

    from onnx_sched.plugins.openvino_pass import OnnxSchedOpenVINOPass

    f = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "one"], ["acc_out"])],
        "body", [f("i", TensorProto.INT64, []), f("cond_in", TensorProto.BOOL, []), f("acc_in", TensorProto.FLOAT, [1, 8])],
        [f("cond_out", TensorProto.BOOL, []), f("acc_out", TensorProto.FLOAT, [1, 8])])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Loop", ["trip", "", "r"], ["y"], body=body),
         helper.make_node("Sigmoid", ["y"], ["z"])], "loop", [f("x", TensorProto.FLOAT, [1, 8])],
        [f("z", TensorProto.FLOAT, [1, 8])],
        initializer=[numpy_helper.from_array(np.array(3, np.int64), "trip"),
                     numpy_helper.from_array(np.ones((1, 8), np.float32), "one")])
    path = tmp_path / "loop.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    model = ov.Core().read_model(str(path))
    p = OnnxSchedOpenVINOPass("peak-mem", method="partition-dfs", devices=["CPU", "GPU"], time_limit=2)
    mgr = Manager()
    mgr.register_pass(p)
    mgr.run_passes(model)
    assert all("affinity" in op.get_rt_info() for op in model.get_ordered_ops())
    ov.Core().compile_model(model, "CPU")


def test_read_placed_model_applies_the_sidecar_and_runs_hetero(tmp_path: Path) -> None:
    from onnx_sched.bench.placement_file import save_placement
    from onnx_sched.plugins.openvino_affinity import read_placed_model

    src = _branchy_ir(tmp_path / "m.xml")
    imp = import_openvino(src)
    g = imp.graph
    placement = np.array([1 if name in ("up1", "act1", "mean1", "out") else 0 for name in g.op_names])
    save_placement(tmp_path / "m.placement.json", g, placement, ["CPU", "CPUB"])
    core = openvino_core()
    register_cpu_alias(core)
    for d in ("CPU", "CPUB"):
        core.set_property(d, {"INFERENCE_PRECISION_HINT": "f32"})
    model, target = read_placed_model(src)
    assert target == "HETERO:CPU,CPUB"
    compiled = core.compile_model(model, target)
    assert int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")) >= 2
    res = compiled.create_infer_request().infer(ov_inputs(compiled, seeded_inputs(imp, 0)))
    got = {k: np.array(res[p]) for k, p in zip(output_names(imp), compiled.outputs)}
    assert compare_outputs(_outputs(src), got)[0]


# ----------------------------------------------------------------------- measured limits
def test_per_op_affinity_does_not_survive_an_ir_save_and_read(tmp_path: Path) -> None:
    """Why the placement goes into model-level rt_info and a sidecar (exporters/openvino_ir.py)."""
    model = ov.Core().read_model(str(_branchy_ir(tmp_path / "m.xml")))
    for op in model.get_ordered_ops():
        op.get_rt_info()["affinity"] = "CPU"
    model.set_rt_info("kept", ["onnx_sched", "probe"])
    ov.save_model(model, str(tmp_path / "saved.xml"), compress_to_fp16=False)
    back = ov.Core().read_model(str(tmp_path / "saved.xml"))
    assert not any("affinity" in op.get_rt_info() for op in back.get_ordered_ops())
    assert back.get_rt_info(["onnx_sched", "probe"]).astype(str) == "kept"


# ----------------------------------------------------------------------------- bad input
@needs_corpus
def test_ir_output_paths_that_are_refused(tmp_path: Path) -> None:
    xml = CORPUS / "resnet50.xml"
    before = xml.read_bytes()
    assert "is an input file" in _one_error_line(_cli("optimize", xml, "-o", xml))
    assert xml.read_bytes() == before
    assert "written back as an IR" in _one_error_line(_cli("optimize", xml, "-o", tmp_path / "out.onnx"))
    onnx_src = ROOT / "examples" / "randwire_ws.onnx"
    assert "written back as ONNX" in _one_error_line(_cli("optimize", onnx_src, "-o", tmp_path / "out.xml"))
    assert "--ort-graph" in _one_error_line(_cli("optimize", xml, "-o", tmp_path / "o.xml", "--ort-graph", "basic"))
    assert not list(tmp_path.iterdir())


def _bad_irs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    garbage = tmp_path / "garbage.xml"
    garbage.write_bytes(b"\x00\x01 not xml at all")
    truncated = tmp_path / "truncated.xml"
    truncated.write_text('<?xml version="1.0"?>\n<net name="x" version="11"><layers><layer id="0"')
    no_bin = tmp_path / "no_bin.xml"
    _branchy_ir(tmp_path / "src.xml")
    no_bin.write_text((tmp_path / "src.xml").read_text())
    dynamic = tmp_path / "dynamic.xml"
    y = ops.parameter(ov.PartialShape([-1, 8]), np.float32, name="y")
    ov.save_model(ov.Model([ops.relu(y)], [y], "dyn"), str(dynamic))
    return {"missing": (tmp_path / "missing.xml", "not found"), "garbage": (garbage, "not an IR"),
            "truncated": (truncated, "cannot read OpenVINO model"), "no_bin": (no_bin, "cannot read OpenVINO model"),
            "dynamic": (dynamic, "--input-shape")}


@pytest.mark.parametrize("case", ["missing", "garbage", "truncated", "no_bin", "dynamic"])
def test_bad_ir_gives_one_line(tmp_path: Path, case: str) -> None:
    path, expected = _bad_irs(tmp_path)[case]
    line = _one_error_line(_cli("optimize", path, "-o", tmp_path / "out.xml"))
    assert expected in line, line
    assert not (tmp_path / "out.xml").exists()
    assert expected in _one_error_line(_cli("inspect", path))


def test_console_script_bad_ir_has_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<net>")
    res = subprocess.run([sys.executable, "-m", "onnx_sched.cli.__main__", "optimize", str(bad), "-o",
                          str(tmp_path / "o.xml")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "cannot read OpenVINO model" in res.stderr


def test_an_openvino_input_the_feed_lacks_is_refused_naming_it() -> None:
    import openvino as ov

    a, b = (ov.op.Parameter(ov.Type.f32, ov.Shape([2])) for _ in range(2))
    a.output(0).set_names({"a"})
    b.output(0).set_names({"out"})  # as OpenVINO 2026.4 reads onnx's test_sequence_model3: an output as an input
    compiled = ov.Core().compile_model(ov.Model([ov.opset13.add(a, b)], [a, b]), "CPU")
    with pytest.raises(ValueError, match=r"an input \['out'\] that it does not have \(its inputs: \['a'\]\)"):
        ov_inputs(compiled, {"a": np.ones(2, np.float32)})
    assert len(ov_inputs(compiled, {"a": np.ones(2, np.float32), "out": np.ones(2, np.float32)})) == 2
