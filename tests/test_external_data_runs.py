"""Commands that run a model -- the measured target, bench-placement, profile -- read its external weights.

The import never reads weight bytes (onnx_sched.importers.onnx), and an ONNX Runtime session or an OpenVINO
model built from serialized bytes cannot find a file beside the model: ``with_weights`` reads them in for
those runs, while the exporter keeps writing the external references.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import CORPUS, assert_bitwise_equal, branchy_model, external_data_model, local_function_model, run_ort
from onnx import helper

from onnx_sched.importers.onnx import import_onnx
from onnx_sched.importers.onnx_weights import with_weights
from onnx_sched.profiling.runtimes import profile_ort

EXE = [sys.executable, "-m", "onnx_sched.cli.__main__"]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([*EXE, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_with_weights_reads_the_data_once_and_leaves_the_import_external(tmp_path):
    imported = import_onnx(external_data_model(tmp_path))
    full = with_weights(imported)
    assert all(t.HasField("raw_data") and not t.external_data for t in full.graph.initializer)
    assert all(t.external_data for t in imported.model.graph.initializer)  # what the exporter writes back
    assert with_weights(imported) is full
    inline = import_onnx(branchy_model())
    assert with_weights(inline) is inline.model


def test_measured_target_and_bench_placement_run_a_model_with_external_data(tmp_path):
    src = external_data_model(tmp_path / "in")
    out = tmp_path / "out" / "m.sched.onnx"
    res = run_cli("optimize", src, "-o", out, "--objective", "makespan", "--machines",
                  EXAMPLES / "machines_cpu_igpu_dgpu.json", "--method", "brkga", "--candidates", 5, "--top-k", 3,
                  "--target", "measured")
    assert res.returncode == 0, res.stderr
    assert (out.parent / "m.weights").read_bytes() == (src.parent / "m.weights").read_bytes()
    onnx.checker.check_model(str(out))
    assert_bitwise_equal(run_ort(str(src)), run_ort(str(out)))
    for runtime in ("ort", "openvino"):
        res = run_cli("bench-placement", src, "--placement", out, "--runtime", runtime)
        assert res.returncode == 0, (runtime, res.stderr)
        assert "outputs equal" in res.stdout, res.stdout


def test_ort_profile_times_nodes_without_names(tmp_path):
    """ONNX Runtime names profile events by node name: unnamed nodes are profiled under their stable names."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Exp", ["x"], ["b"]),
                               helper.make_node("Add", ["a", "b"], ["y"])], "unnamed",
                              [vi("x", onnx.TensorProto.FLOAT, [64, 64])], [vi("y", onnx.TensorProto.FLOAT, [64, 64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    profile = profile_ort(import_onnx(model), repeats=3, warmup=1)
    assert set(profile.op_seconds) == {"Relu:a", "Exp:b", "Add:y"}
    assert all(s > 0 for s in profile.op_seconds.values()), profile.op_seconds


def test_ort_profile_times_calls_of_local_functions():
    """ONNX Runtime inlines a local function's calls and times the body under names of its own: the calls are
    inlined first, named after their call, so every call op gets the time of its body."""
    imp = import_onnx(local_function_model())
    profile = profile_ort(imp, repeats=3, warmup=1)
    assert set(profile.op_seconds) == set(imp.graph.op_names)
    assert all(profile.op_seconds[n] > 0 for n in ("swish_a", "swish_b")), profile.op_seconds


def test_onnx_ir_pass_schedules_a_model_whose_weights_stay_beside_its_file(tmp_path):
    """ir.load keeps external tensors lazy; the pass checks the model's structure without looking for their
    files in the working directory."""
    import onnx_ir as ir

    from onnx_sched.plugins.onnx_ir_pass import OnnxSchedPass

    src = external_data_model(tmp_path / "elsewhere")
    model = ir.load(str(src))
    nodes = list(model.graph)
    result = OnnxSchedPass("peak-mem", devices=("CPU", "GPU"), time_limit=3)(model)
    assert sorted(map(id, result.model.graph)) == sorted(map(id, nodes))
    assert {n.metadata_props.get("pkg.onnx_sched.device") for n in result.model.graph} <= {"CPU", "GPU"}
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    ir.save(result.model, str(out), external_data="m.weights")
    assert_bitwise_equal(run_ort(str(src)), run_ort(str(out)))


def test_the_export_time_kept_back_grows_with_the_bytes_the_output_writes(tmp_path):
    from onnx_sched.api import export_seconds, source_bytes
    from onnx_sched.importers.openvino import import_openvino

    src = external_data_model(tmp_path / "in")
    imported = import_onnx(src)
    assert source_bytes(imported) == src.stat().st_size + (src.parent / "m.weights").stat().st_size
    assert source_bytes(import_onnx(branchy_model())) == 0  # given in memory: nothing read from files
    ir = CORPUS / "openvino" / "resnet50.xml"
    assert source_bytes(import_openvino(ir)) == ir.stat().st_size + ir.with_suffix(".bin").stat().st_size
    g = imported.graph
    assert export_seconds(g, 10**9) - export_seconds(g) == pytest.approx(2.0)  # 2 ns per byte
