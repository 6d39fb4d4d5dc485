"""One process per device: a two-device schedule's measured heap peaks against the predicted ones.

The model (1 MiB tensors, ``S`` floats): ``a = Exp(x)`` on CPU, ``a`` to GPU,
``b = Exp(a)`` and ``c = Concat(a, b)`` (2 MiB) on GPU, ``c`` back to CPU,
``y = Concat(c, x)`` (3 MiB, the graph output) on CPU.  Predicted, the caller's
``x`` apart: CPU 5 MiB (``c`` received, then ``y`` while ``c`` is live), GPU 4 MiB
(``a``, ``b``, ``c`` live when Concat runs).  A runtime that kept a tensor after its
last reader, or copied a tensor on send or receive, would be 1-2 MiB above.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_sched.bench.runtimes.device_plan import PlacedSchedule, Recv, RunOp, Send, device_plans, single_device
from onnx_sched.cost import device_memory as dm
from onnx_sched.importers.onnx import import_onnx

S = 1 << 18  # float32 elements: 1 MiB
MIB = 1 << 20
#: allowed excess of the measured heap peak: ORT's per-run bookkeeping and Python objects (measured: about 3 KB)
SLACK = 64 * 1024


def _vi(name: str, k: int = 1) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [k * S])


def _model() -> onnx.ModelProto:
    nodes = [helper.make_node("Exp", ["x"], ["a"], name="A"),
             helper.make_node("Exp", ["a"], ["b"], name="B"),
             helper.make_node("Concat", ["a", "b"], ["c"], name="C", axis=0),
             helper.make_node("Concat", ["c", "x"], ["y"], name="Y", axis=0)]
    g = helper.make_graph(nodes, "two_devices", [_vi("x")], [_vi("y", 3)], value_info=[_vi("a"), _vi("b"), _vi("c", 2)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def _split() -> PlacedSchedule:
    imported = import_onnx(_model())
    problem = dm.DeviceMemoryProblem.build(imported.graph, ("CPU", "GPU"))
    t = {n: i for i, n in enumerate(imported.graph.tensor_names)}
    steps = (dm.Step("op", 0, 0), dm.Step("transfer", t["a"], 1, 0), dm.Step("op", 1, 1), dm.Step("op", 2, 1),
             dm.Step("transfer", t["c"], 0, 1), dm.Step("op", 3, 0))
    return PlacedSchedule(imported, problem, steps)


def test_plan_frees_what_the_model_frees():
    cpu, gpu = device_plans(_split())
    assert cpu.predicted_peak_bytes == 5 * MIB and gpu.predicted_peak_bytes == 4 * MIB
    assert [type(a) for a in cpu.actions] == [RunOp, Send, Recv, RunOp]
    assert cpu.actions[1] == Send("a", 1, free=True)  # its only use on CPU was the transfer
    assert cpu.actions[3].frees == ("c",) and cpu.outputs == ("y",)  # y (graph output) and x (input) stay
    assert [a.frees for a in gpu.actions if isinstance(a, RunOp)] == [(), ("a", "b")]
    assert gpu.actions[-1] == Send("c", 0, free=True) and gpu.outputs == ()


def test_an_op_model_names_a_splits_omitted_output():
    """A ``Split`` whose second output is omitted runs as its own one-node model in a device process: ONNX Runtime
    kills the process on the omitted output (its issue 18601), so the op model names it."""
    nodes = [helper.make_node("Split", ["x", "halves"], ["a", ""], name="S", axis=0),
             helper.make_node("Exp", ["a"], ["y"], name="E")]
    halves = onnx.numpy_helper.from_array(np.array([S // 2, S // 2], np.int64), "halves")
    half = helper.make_tensor_value_info("a", TensorProto.FLOAT, [S // 2])
    g = helper.make_graph(nodes, "split_omit", [_vi("x")], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                          [S // 2])], [halves], value_info=[half])
    imported = import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    problem = dm.DeviceMemoryProblem.build(imported.graph, ("CPU", "GPU"))
    (plan,) = [p for p in device_plans(PlacedSchedule(imported, problem, (dm.Step("op", 0, 0), dm.Step("op", 1, 0))))
               if p.op_models]
    split = [n for m in plan.op_models.values() for n in onnx.load_from_string(m).graph.node if n.op_type == "Split"]
    assert len(split) == 1 and "" not in split[0].output and split[0].output[0] == "a"


def test_measured_per_device_heap_peaks_equal_the_predicted_ones():
    pytest.importorskip("memray")
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    feed = {"x": np.random.default_rng(0).random(S, dtype=np.float32)}
    result = measure_schedule(_split(), feed)
    assert result.outputs_equal and result.max_abs_diff == 0.0
    for d in result.devices:
        assert d.predicted_peak_bytes <= d.heap_peak_bytes <= d.predicted_peak_bytes + SLACK, d
    cpu, gpu = result.devices
    assert cpu.heap_end_bytes >= 3 * MIB and gpu.heap_end_bytes < SLACK  # y stays on CPU; GPU ends empty


def test_graph_outputs_no_op_computes_come_back_too():
    """Graph outputs that are a weight (also when an op reads it), or a constant subgraph's tensor (which the importer
    folds into weights), are computed by no device process: the measurement still returns them, equal to ONNX
    Runtime's; a graph input that is also an output comes back from the host."""
    pytest.importorskip("memray")
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    w = onnx.numpy_helper.from_array(np.arange(S, dtype=np.float32), "w")
    nodes = [helper.make_node("Exp", ["x"], ["a"], name="A"), helper.make_node("Add", ["a", "w"], ["y"], name="B"),
             helper.make_node("Neg", ["w"], ["folded"], name="W")]  # reads only a weight: a weight node
    g = helper.make_graph(nodes, "weights_out", [_vi("x")], [_vi("y"), _vi("w"), _vi("folded"), _vi("x")], [w])
    imported = import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    problem = dm.DeviceMemoryProblem.build(imported.graph, ("CPU", "GPU"))
    t = {n: i for i, n in enumerate(imported.graph.tensor_names)}
    assert "w" in t  # the op B reads it, so it is a tensor of the graph (and no device holds it)
    steps = (dm.Step("op", 0, 0), dm.Step("transfer", t["a"], 1, 0), dm.Step("op", 1, 1))
    result = measure_schedule(PlacedSchedule(imported, problem, steps), {"x": np.ones(S, np.float32)})
    assert result.outputs_equal and result.max_abs_diff == 0.0


def test_single_device_baseline_runs_in_one_process():
    pytest.importorskip("memray")
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    sched = single_device(import_onnx(_model()), ("CPU", "GPU"))
    assert sched.predicted_peaks() == [5 * MIB, 0]  # a, b, c (4 MiB) at C; then c, y (5 MiB) at Y
    result = measure_schedule(sched, {"x": np.ones(S, np.float32)})
    cpu, gpu = result.devices
    assert result.outputs_equal and gpu.ops == 0
    assert 5 * MIB <= cpu.heap_peak_bytes <= 5 * MIB + SLACK


def _torch_runner_or_skip() -> object:
    torch = pytest.importorskip("torch", reason="torch devices need torch (the [gpu] or [train] extra)")
    pytest.importorskip("memray")
    try:
        from onnx_sched.bench.runtimes.torch_parts import onnx2torch_module

        onnx2torch_module()
    except ImportError:
        pytest.skip("torch devices need onnx2torch (the [gpu] extra)")
    return torch


def test_a_torch_device_runs_its_ops_and_holds_what_the_model_predicts():
    """GPU's ops on torch's CPU device (CI's stand-in for cuda:N): same outputs, and no tensor beyond the
    model's (onnx2torch's Identity would clone every op output: 2 MiB more at Concat)."""
    _torch_runner_or_skip()
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    feed = {"x": np.random.default_rng(0).random(S, dtype=np.float32)}
    result = measure_schedule(_split(), feed, {"GPU": "torch:cpu"})
    cpu, gpu = result.devices
    assert result.outputs_equal and (cpu.runtime, gpu.runtime) == ("onnxruntime", "cpu")
    assert gpu.measured_by == "memray heap"
    for d in result.devices:
        assert d.predicted_peak_bytes <= d.heap_peak_bytes <= d.predicted_peak_bytes + SLACK, d


def test_torch_devices_must_name_a_device_of_the_schedule_and_a_torch_device():
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    feed = {"x": np.ones(S, np.float32)}
    with pytest.raises(ValueError, match=r"\['NPU'\], which the schedule does not have \(its devices: CPU, GPU\)"):
        measure_schedule(_split(), feed, {"NPU": "cuda:0"})
    with pytest.raises(ValueError, match="GPU=CPUExecutionProvider: not a torch device"):
        measure_schedule(_split(), feed, {"GPU": "CPUExecutionProvider"})


def test_a_cuda_device_peak_is_the_allocators_high_water_mark():
    """On a real GPU the device's peak is read from the CUDA caching allocator: a, b and c live at once."""
    torch = _torch_runner_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    feed = {"x": np.random.default_rng(0).random(S, dtype=np.float32)}
    result = measure_schedule(_split(), feed, {"GPU": "cuda:0"})
    cpu, gpu = result.devices
    assert result.outputs_equal and gpu.runtime == "cuda:0" and gpu.measured_by == "CUDA allocator"
    assert gpu.predicted_peak_bytes == 4 * MIB <= gpu.heap_peak_bytes <= 4 * MIB + SLACK, gpu
    assert gpu.heap_end_bytes == 0  # c left for the CPU and nothing else stays
    assert cpu.predicted_peak_bytes <= cpu.heap_peak_bytes <= cpu.predicted_peak_bytes + SLACK


@pytest.mark.parametrize("recorded", [True, False])
def test_bench_placement_memory_measures_each_device_of_a_placed_model(tmp_path, recorded):
    """``bench-placement M --runtime ort --memory``: one process per device runs the model's own placement (its
    transfers where it records them, else as early as possible) and reports each device's heap peak next to the
    predicted one."""
    pytest.importorskip("memray")
    import json

    from click.testing import CliRunner

    from onnx_sched.cli import main
    from onnx_sched.exporters.onnx import DEVICE_KEY, DEVICES_KEY, TRANSFER_STEPS_KEY

    model = _model()
    for node, device in zip(model.graph.node, ("CPU", "GPU", "GPU", "CPU")):
        node.metadata_props.add(key=DEVICE_KEY, value=device)
    model.metadata_props.add(key=DEVICES_KEY, value='["CPU", "GPU"]')
    if recorded:
        model.metadata_props.add(key=TRANSFER_STEPS_KEY, value='[["a","CPU","GPU",1],["c","GPU","CPU",3]]')
    path = tmp_path / "placed.onnx"
    onnx.save(model, str(path))
    res = CliRunner().invoke(main, ["bench-placement", str(path), "--runtime", "ort",  # its own placement, unasked
                                    "--devices", "CPU,GPU", "--memory", "--repeats", "2", "--warmup", "1",
                                    "--report", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    measured = json.loads((tmp_path / "r.json").read_text())["device_memory"]
    assert measured["outputs_equal"]
    assert measured["transfer_timing"] == ("where the model records them" if recorded else "each as early as it can")
    assert [d["predicted_peak_bytes"] for d in measured["devices"]] == [5 * MIB, 4 * MIB]
    assert measured["graph_input_bytes"] == MIB
    assert "leave out the caller's graph inputs (1.00 MiB on CPU)" in res.output
    for d in measured["devices"]:
        assert d["predicted_peak_bytes"] <= d["heap_peak_bytes"] <= d["predicted_peak_bytes"] + SLACK, d
    saved = tmp_path / "p.json"  # a placement file keeps the devices, not positions counted in this file's order
    res = CliRunner().invoke(main, ["bench-placement", str(path), "--placement", str(path), "--runtime", "ort",
                                    "--devices", "CPU,GPU", "--repeats", "1", "--save-placement", str(saved)])
    assert res.exit_code == 0, res.output
    assert "transfer_steps" not in json.loads(saved.read_text())
    refused = CliRunner().invoke(main, ["bench-placement", str(path), "--placement", str(path), "--memory"])
    assert refused.exit_code != 0 and "--memory runs each device as an ONNX Runtime process" in refused.output
    unnamed = tmp_path / "placed_model"  # an ONNX model whose name does not say so is still its own placement
    unnamed.write_bytes(path.read_bytes())
    res = CliRunner().invoke(main, ["bench-placement", str(unnamed), "--runtime", "ort", "--devices", "CPU,GPU",
                                    "--repeats", "1", "--warmup", "0"])
    assert res.exit_code == 0 and "outputs equal" in res.output, res.output
    for unread in (["--profiles", "p.json"], ["--profile-devices", "CPU,GPU"], ["--mode", "concurrent"]):
        res = CliRunner().invoke(main, ["bench-placement", str(path), "--runtime", "ort", *unread])
        assert res.exit_code == 2 and "are read only with --method NAME" in res.output, res.output
    for ort_only in (["--threads", "2"], ["--no-pin"], ["--sequential"]):
        res = CliRunner().invoke(main, ["bench-placement", str(path), *ort_only])  # OpenVINO, the default runtime
        assert res.exit_code == 2 and "ONNX Runtime option(s), not for --runtime openvino" in res.output, res.output


def test_a_contrib_op_whose_type_onnx_cannot_infer_runs_in_its_device_process():
    """``com.microsoft.Gelu``: onnx's shape inference gives its output no type, the import does; each op's
    session is built with the import's types (it was a one-line refusal: no type known)."""
    pytest.importorskip("memray")
    from onnx_sched.bench.runtimes.device_plan import placed_schedule
    from onnx_sched.bench.runtimes.device_processes import measure_schedule

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="A"),
             helper.make_node("Gelu", ["a"], ["g"], name="G", domain="com.microsoft"),
             helper.make_node("Add", ["g", "x"], ["y"], name="Y")]
    g = helper.make_graph(nodes, "contrib", [_vi("x")], [_vi("y")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=10)
    imported = import_onnx(model)
    sched, _ = placed_schedule(imported, np.array([0, 1, 0]), ("CPU", "GPU"))
    result = measure_schedule(sched, {"x": np.random.default_rng(0).random(S, dtype=np.float32)})
    assert result.outputs_equal
    for d in result.devices:
        assert d.predicted_peak_bytes <= d.heap_peak_bytes <= d.predicted_peak_bytes + SLACK, d
