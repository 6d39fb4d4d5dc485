"""The Python API and the pipeline passes refuse bad arguments with a ``ValueError`` (or the importers'
``OnnxSchedError``) naming the argument, as the CLI's parsers do for its flags, and a pipeline pass keeps the
model's op names, so profiles measured on the model's file apply to it."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from conftest import CORPUS, branchy_model

from onnx_sched.api import optimize_model
from onnx_sched.errors import OnnxSchedError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kwargs, words", [
    ({"dims": {"N": -2}}, "dims: 'N'"),
    ({"dims": {"N": True}}, "dims: 'N'"),
    ({"input_shapes": {"x": (4.5, 3)}}, "input_shapes: 'x'"),
    ({"input_shapes": {"x": None}}, "input_shapes: 'x'"),
    ({"options": [1]}, "options: expected a mapping"),
    ({"devices": 5}, "give a comma list"),
    ({"devices": "CPU,GPU", "memory_limits": {"CPU": "x"}}, "memory_limits: 'CPU'"),
    ({"latency_mode": "x"}, "latency_mode must be"),
])
def test_bad_arguments_are_value_errors_naming_them(kwargs: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        optimize_model(branchy_model(), time_limit=2, **kwargs)


def test_a_source_of_the_wrong_type_is_named() -> None:
    with pytest.raises(OnnxSchedError, match="got NoneType"):
        optimize_model(None)


def test_one_profile_path_may_come_bare(tmp_path) -> None:
    profiles = ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"
    for given in (str(profiles), profiles):
        result = optimize_model(branchy_model(), "latency", time_limit=2, profiles=given)
        assert result.report["devices"] == ["CPU", "GPU.0", "GPU.1"]


def test_pipeline_passes_check_their_arguments_when_built(tmp_path) -> None:
    from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

    with pytest.raises(ValueError, match="machines .*nope.json: no such file"):
        OnnxSchedPass("makespan", machines=tmp_path / "nope.json")
    with pytest.raises(ValueError, match="dims: 'N'"):
        OnnxSchedPass(dims={"N": 0})
    from onnx_sched.api import checked_arguments

    with pytest.raises(ValueError, match="unknown argument.*foo"):
        checked_arguments("OnnxSchedOpenVINOPass", "peak-mem", "auto", foo=1)


def test_the_onnx_ir_pass_keeps_op_names_so_measured_profiles_apply(tmp_path) -> None:
    """A profile of the model's file (graph named by the file stem) applies to the same model handed over in
    memory by a pipeline (graph named by its proto): the op names are the same, so the times are measured."""
    ir = pytest.importorskip("onnx_ir")
    import onnx_ir.passes

    from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

    src = CORPUS / "onnx" / "light_squeezenet.onnx"
    if not src.is_file():
        pytest.skip("corpus not available")
    model_file = tmp_path / "renamed.onnx"
    shutil.copy(src, model_file)
    from click.testing import CliRunner

    from onnx_sched.cli import main

    res = CliRunner().invoke(main, ["profile", str(model_file), "-o", str(tmp_path / "p.json"), "--repeats", "1",
                                    "--simulate", "dgpu"])
    assert res.exit_code == 0, res.output
    model = ir.load(str(model_file))
    assert model.graph.name != "renamed"  # the proto's own name, not the file's
    names = [node.name for node in model.graph]
    pass_ = OnnxSchedPass("latency", profiles=[tmp_path / "p.json"], time_limit=3)
    onnx_ir.passes.PassManager([pass_])(model)
    n_ops = pass_.last_report["ops"]
    assert set(pass_.last_report["measured_ops"].values()) == {n_ops}
    assert sorted(node.name for node in model.graph) == sorted(names)  # names untouched
    assert not any("onnx_sched.pass_node" in node.metadata_props for node in model.graph)
    onnx.checker.check_model(ir.serde.serialize_model(model))


def test_a_warm_up_out_of_time_does_not_stop_the_run(monkeypatch) -> None:
    """On a loaded machine the learned encoder can miss the warm-up's own tiny budget; the warm-up only compiles,
    so the run goes on (it stopped the command with an error about the 40-op warm-up graph)."""
    import onnx_sched.api as api

    monkeypatch.setattr(api, "WARM_UP_SECONDS", 1e-6)
    result = optimize_model(branchy_model(), "peak-mem", "learned", time_limit=5)
    assert result.report["method_used"] == "learned"


@pytest.mark.parametrize("objective, kwargs", [
    ("peak-mem", {}),
    ("peak-mem-devices", {"devices": "CPU,GPU"}),
    ("latency", {"profiles": Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json"}),
])
def test_a_result_plots_itself_as_the_command_does(tmp_path, objective, kwargs) -> None:
    """``OptimizeResult.plot``: what ``optimize --plot`` draws, for a Python caller (it had no way but the CLI's)."""
    result = optimize_model(branchy_model(), objective, time_limit=2, **kwargs)
    result.plot(tmp_path / "result.png")
    assert (tmp_path / "result.png").stat().st_size > 5000
    with pytest.raises(ValueError, match="must end in"):
        result.plot(tmp_path / "result.nope")
