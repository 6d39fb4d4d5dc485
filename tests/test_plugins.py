"""Plugin entry points: the onnx_ir pass in a PassManager, the Olive pass guard, the examples."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
import onnx_ir.passes
import pytest
from conftest import assert_bitwise_equal, branchy_model, run_ort

from onnx_sched.cost import memory
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes import available
from onnx_sched.plugins import olive_pass
from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

ROOT = Path(__file__).resolve().parents[1]
METHOD = "auto" if "auto" in available("peak-mem") else "greedy"


def _file_peak(model: onnx.ModelProto) -> int:
    g = import_onnx(model).graph
    return int(memory.peak_memory(g, list(range(g.n_ops)), False))


def test_pass_manager_reorders_branchy_model_in_place() -> None:
    proto = branchy_model(branches=3, n=256)
    model = ir.serde.deserialize_model(proto)
    nodes_before = list(model.graph)
    sched_pass = OnnxSchedPass("peak-mem", method=METHOD, time_limit=5.0)
    result = onnx_ir.passes.PassManager([sched_pass])(model)

    assert result.modified is True
    assert result.model is model  # in place
    nodes_after = list(model.graph)
    assert {id(n) for n in nodes_after} == {id(n) for n in nodes_before}  # same ir.Node objects
    assert [n.name for n in nodes_after] != [n.name for n in nodes_before]
    out = ir.serde.serialize_model(model)
    onnx.checker.check_model(out)
    assert _file_peak(out) < _file_peak(proto)
    assert model.metadata_props["onnx_sched.objective"] == "peak-mem"
    report = sched_pass.last_report
    assert report is not None and report["peak_bytes"]["output"] < report["peak_bytes"]["input"]
    # The reordered model runs in ORT (file order) with bitwise-equal outputs.
    assert_bitwise_equal(run_ort(proto), run_ort(out))


def test_pass_keeps_an_already_good_order() -> None:
    chain = branchy_model(branches=1, n=64)
    model = ir.serde.deserialize_model(chain)
    names = [n.name for n in model.graph]
    result = OnnxSchedPass(method=METHOD, time_limit=2.0)(model)
    assert result.modified is False
    assert [n.name for n in model.graph] == names


def test_pass_on_a_dynamic_model_names_the_dims_left_and_its_own_dims_argument() -> None:
    """The unknown-size error of a model with symbolic dims names the dims still unpinned, and the Python
    arguments beside the CLI flags; with every dim pinned the pass runs."""
    vi = onnx.helper.make_tensor_value_info
    proto = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["a"]), onnx.helper.make_node("Neg", ["a"], ["y"])], "dyn",
        [vi("x", onnx.TensorProto.FLOAT, ["n", "k"])], [vi("y", onnx.TensorProto.FLOAT, ["n", "k"])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    proto.ir_version = 10

    def error(dims: dict | None) -> str:
        with pytest.raises(onnx_ir.passes.PassError) as info:
            sched = OnnxSchedPass(method=METHOD, time_limit=2.0, dims=dims)
            onnx_ir.passes.PassManager([sched])(ir.serde.deserialize_model(proto))
        cause = info.value
        while cause.__cause__ is not None:
            cause = cause.__cause__
        return str(cause)

    assert "--dim (k, n)" in error(None) and "dims=" in error(None)
    assert "--dim (k)" in error({"n": 4})
    sched = OnnxSchedPass(method=METHOD, time_limit=2.0, dims={"n": 4, "k": 8})
    onnx_ir.passes.PassManager([sched])(ir.serde.deserialize_model(proto))
    assert sched.last_report["peak_bytes"]["output"] == 3 * 4 * 8 * 4  # x (caller-owned), a and y at Neg


@pytest.mark.parametrize("kwargs, message", [
    ({"time_limit": 0}, "time_limit 0: expected a positive, finite number"),
    ({"time_limit": float("nan")}, "time_limit nan: expected a positive, finite number"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"devices": "CPU,cpu"}, "'cpu' names the same device as 'CPU'"),
    ({"objective": "peakmem"}, "unknown objective 'peakmem'"),
    ({"method": "nope"}, "no method 'nope' for objective 'peak-mem'"),
])
def test_pass_rejects_bad_arguments_when_built(kwargs: dict, message: str) -> None:
    """A pipeline pass checks its arguments when it is built (not inside onnx_ir's generic error at run time; a NaN
    time limit used to hang a split)."""
    with pytest.raises(ValueError, match=message):
        OnnxSchedPass(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"time_limit": -5}, "time_limit -5: expected a positive, finite number"),
    ({"time_limit": "soon"}, "time_limit 'soon' is not a number of seconds"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"devices": ""}, "no device names"),
])
def test_api_rejects_bad_arguments_before_any_work(kwargs: dict, message: str) -> None:
    from onnx_sched.api import optimize_model

    with pytest.raises(ValueError, match=message):
        optimize_model(branchy_model(branches=2, n=16), **kwargs)


def test_api_takes_devices_as_a_comma_list() -> None:
    """``devices="CPU,GPU"`` is two devices (it was split into characters: C, P, U, ...), ``"CPU"`` one."""
    from onnx_sched.api import optimize_model

    model = branchy_model(branches=2, n=16)
    assert optimize_model(model, devices="CPU,GPU", time_limit=2).report["devices"] == ["CPU", "GPU"]
    assert optimize_model(model, devices=" CPU ", time_limit=2).report["objective"] == "peak-mem"


def test_reoptimizing_replaces_the_earlier_result_and_placement() -> None:
    """A split model optimized again for one device keeps none of the split: no per-node devices, no per-device
    peaks or transfers in its metadata (tools that read them would act on a stale placement); the onnx_ir pass
    the same."""
    from onnx_sched.api import optimize_model
    from onnx_sched.exporters.onnx import DEVICE_KEY

    split = optimize_model(branchy_model(branches=2, n=16), devices="CPU,GPU", time_limit=2).model
    assert any(p.key == DEVICE_KEY for n in split.graph.node for p in n.metadata_props)
    assert "onnx_sched.per_device_peak_bytes" in {p.key for p in split.metadata_props}
    again = optimize_model(split, time_limit=2).model
    assert not any(p.key == DEVICE_KEY for n in again.graph.node for p in n.metadata_props)
    keys = {p.key: p.value for p in again.metadata_props}
    assert keys["onnx_sched.objective"] == "peak-mem"
    assert not {"onnx_sched.per_device_peak_bytes", "onnx_sched.transfers"} & set(keys)

    model = ir.serde.deserialize_model(split)
    onnx_ir.passes.PassManager([OnnxSchedPass(time_limit=2.0)])(model)
    assert not any(DEVICE_KEY in n.metadata_props for n in model.graph)
    assert model.metadata_props["onnx_sched.objective"] == "peak-mem"
    assert "onnx_sched.transfers" not in model.metadata_props


@pytest.mark.skipif(olive_pass.HAVE_OLIVE, reason="olive-ai is installed; the guard is not active")
def test_olive_pass_without_olive_raises_clear_import_error() -> None:
    with pytest.raises(ImportError, match="pip install olive-ai"):
        olive_pass.OnnxSchedOlivePass()
    with pytest.raises(ImportError, match="olive-ai"):
        olive_pass.require_olive()
    with pytest.raises(ImportError, match="olive-ai"):

        class _Sub(olive_pass.OnnxSchedOlivePass):  # noqa: F841
            pass


@pytest.mark.parametrize("script", ["optimize_api.py", "onnx_ir_pipeline.py", "olive_pass.py"])
def test_examples_run(script: str, tmp_path: Path) -> None:
    model = tmp_path / "branchy.onnx"
    onnx.save(branchy_model(branches=3, n=128), model)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), str(model), "--method", METHOD, "--time-limit", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "peak" in proc.stdout or "olive-ai" in proc.stdout


# Runs a script (or a module) with Olive importable where this machine's torchvision is not: the torchvision wheel
# here is built for CUDA torch and cannot load beside the CPU torch, and torchmetrics (which Olive imports) imports
# torchvision whenever pip's metadata lists it.  So when torchvision fails to import, the script sees it as not
# installed.
_OLIVE_BOOT = """
import importlib.metadata as md, runpy, sys
try:
    import torchvision  # noqa: F401
except Exception:
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    sys.modules["torchvision"] = None
    _version = md.version
    def version(name):
        if name.lower() == "torchvision":
            raise md.PackageNotFoundError(name)
        return _version(name)
    md.version = version
sys.argv = sys.argv[1:]  # a script path, or a module name
(runpy.run_path if sys.argv[0].endswith(".py") else runpy.run_module)(sys.argv[0], run_name="__main__")
"""

_OLIVE_ENV = {**os.environ, "OLIVE_DISABLE_TELEMETRY": "1"}  # Olive would send usage events from the tests


@pytest.mark.skipif(importlib.util.find_spec("olive") is None, reason="olive-ai is not installed")
def test_an_olive_workflow_runs_the_pass_and_writes_the_reordered_model(tmp_path: Path) -> None:
    """The example's workflow through Olive's own engine: Olive loads the pass from the package config, runs it and
    saves the model; the saved model is onnx-sched's, with a lower peak and the same outputs."""
    model = tmp_path / "branchy.onnx"
    proto = branchy_model(branches=3, n=128)
    onnx.save(proto, model)
    proc = subprocess.run(
        [sys.executable, "-c", _OLIVE_BOOT, str(ROOT / "examples" / "olive_pass.py"), str(model), "--method", METHOD,
         "--time-limit", "2"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_OLIVE_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = onnx.load(tmp_path / "olive_out" / "model.onnx")
    onnx.checker.check_model(out, full_check=True)
    assert {p.key: p.value for p in out.metadata_props}["onnx_sched.objective"] == "peak-mem"
    assert _file_peak(out) < _file_peak(proto)
    assert_bitwise_equal(run_ort(proto), run_ort(out))


def test_the_olive_package_config_command_writes_olive_passes_and_this_one(tmp_path: Path) -> None:
    """``python -m onnx_sched.plugins.olive_pass PKG.json``: with Olive, its package config plus this pass; without
    it (or with an Olive that cannot be imported), one line on stderr and exit 1."""
    out = tmp_path / "pkg.json"
    proc = subprocess.run([sys.executable, "-c", _OLIVE_BOOT, "onnx_sched.plugins.olive_pass", str(out)],
                          capture_output=True, text=True, timeout=300, env=_OLIVE_ENV)
    if importlib.util.find_spec("olive") is None:
        assert proc.returncode == 1 and not out.exists()
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "pip install olive-ai" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr[-3000:]
    passes = json.loads(out.read_text())["passes"]
    assert passes["OnnxSchedOlivePass"] == olive_pass.PASS_MODULE_CONFIG
    assert "OnnxPeepholeOptimizer" in passes  # Olive's own passes stay usable beside it


@pytest.mark.parametrize("objective, method, problem", [  # deterministic methods, so the two runs agree
    ("latency", "heft-place", {"profiles": [str(ROOT / "examples" / "profiles_cpu_igpu_dgpu.json")]}),
    ("makespan", "heft", {"machines": str(ROOT / "examples" / "machines_cpu_igpu_dgpu.json")}),
    ("peak-mem", "partition-dfs", {"devices": "CPU, GPU"}),  # a comma list as a user types it
])
def test_pass_places_nodes_like_the_api_for_objectives_that_place(objective: str, method: str, problem: dict) -> None:
    from onnx_sched.api import optimize_model
    from onnx_sched.devices import device_names
    from onnx_sched.exporters.onnx import DEVICE_KEY

    proto = branchy_model(branches=3, n=64)
    model = ir.serde.deserialize_model(proto)
    sched_pass = OnnxSchedPass(objective, method, time_limit=5.0, **problem)
    result = onnx_ir.passes.PassManager([sched_pass])(model)
    out = ir.serde.serialize_model(result.model)
    onnx.checker.check_model(out)
    assert out.ir_version >= 10
    devices = [{p.key: p.value for p in n.metadata_props}.get(DEVICE_KEY) for n in out.graph.node]
    assert None not in devices and " GPU" not in devices
    direct = optimize_model(proto, objective, method, time_limit=5.0, **{k: (device_names(v) if k == "devices" else v)
                                                                 for k, v in problem.items()})
    assert devices == [{p.key: p.value for p in n.metadata_props}.get(DEVICE_KEY) for n in direct.model.graph.node]
    assert_bitwise_equal(run_ort(proto), run_ort(out))


def test_olive_config_carries_the_objectives_problem_to_optimize() -> None:
    """Without Olive installed, the config-to-arguments glue of the Olive pass, run through ``optimize``."""
    from onnx_sched.api import optimize
    from onnx_sched.exporters.onnx import DEVICE_KEY

    unset = {"machines": None, "profiles": None, "devices": None, "memory_limits": None, "latency_mode": "sequential"}
    assert olive_pass.problem_arguments(unset) == {"machines": None, "profiles": (), "devices": None,
                                                   "memory_limits": None, "latency_mode": "sequential"}
    config = {**unset, "profiles": str(ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"), "devices": "CPU, GPU.1"}
    out = optimize(branchy_model(branches=3, n=64), "latency", "heft-place", time_limit=5.0,
                   **olive_pass.problem_arguments(config))
    placed = {p.value for n in out.graph.node for p in n.metadata_props if p.key == DEVICE_KEY}
    assert placed and placed <= {"CPU", "GPU.1"}
    split = {**unset, "devices": "CPU,GPU", "memory_limits": "GPU=1GiB, CPU=2GiB"}
    assert olive_pass.problem_arguments(split)["memory_limits"] == {"GPU": 2**30, "CPU": 2**31}
    out = optimize(branchy_model(branches=3, n=64), "peak-mem", "partition-dfs", time_limit=5.0,
                   **olive_pass.problem_arguments(split))
    meta = {p.key: p.value for p in out.metadata_props}
    assert meta["onnx_sched.objective"] == "peak-mem-devices"
    with pytest.raises(ValueError, match="memory_limits expects DEVICE=SIZE"):
        olive_pass.problem_arguments({**split, "memory_limits": "GPU:1GiB"})
