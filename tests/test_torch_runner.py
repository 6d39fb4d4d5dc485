"""The torch part-runner: placed parts on torch devices (``cuda:N``; ``torch:cpu`` here, so CI runs the
conversion, the copies and the equality checks without a GPU), per-op torch profiles, and the light
install never importing torch for ORT-only devices.  ``pytest -k torch_runner`` selects them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from conftest import BLOCK_TORCH, CORPUS, branchy_model

from onnx_sched.bench.runtimes.torch_parts import TOLERANCE, outputs_close, tolerance, torch_device
from onnx_sched.bench.split_executor import DeviceSpec, device_spec

ROOT = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch", reason="the torch part-runner needs torch (the [gpu] or [train] extra)")
try:
    from onnx_sched.bench.runtimes.torch_parts import onnx2torch_module

    onnx2torch_module()  # imports onnx2torch (torchvision stubbed if it cannot load)
except ImportError:
    pytest.skip("the torch part-runner needs onnx2torch (the [gpu] extra)", allow_module_level=True)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch")
#: Corpus models onnx2torch converts and runs like ONNX Runtime (others: docs/results.md, issue 16).
#: The fastest to run here; the whole corpus's numbers are in docs/results.md.
CONVERTIBLE = ["mobilenet_v2", "randwire_ws", "whisper_tiny_encoder", "segformer_b0", "light_squeezenet",
               "light_shufflenet"]


def _import(name: str):  # noqa: ANN202
    from onnx_sched.bench.weights import with_random_weights
    from onnx_sched.importers.onnx import import_onnx

    path = CORPUS / "onnx" / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"corpus model {path} not found")
    return with_random_weights(import_onnx(path))  # zero weights would make equality trivial


def _ort_outputs(model: onnx.ModelProto, feed: dict) -> dict[str, np.ndarray]:
    names = [o.name for o in model.graph.output]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return dict(zip(names, ort.InferenceSession(model.SerializeToString(), so,
                                                providers=["CPUExecutionProvider"]).run(names, feed)))


def test_torch_runner_device_labels() -> None:
    assert torch_device("cuda:1") == "cuda:1" and torch_device("torch:cuda:0") == "cuda:0"
    assert torch_device("cuda") == "cuda:0" and torch_device("torch:cpu") == "cpu"
    assert [torch_device(x) for x in ("CPU", "CPUB", "A", "GPU.0", "cpu")] == [None] * 5
    assert device_spec("CPU", 2, (0, 1)) == DeviceSpec("CPU", threads=2, cores=(0, 1))
    assert device_spec("cuda:0").torch_device == "cuda:0"
    assert tolerance(["cpu"]) == TOLERANCE["cpu"] and tolerance(["cpu", "cuda:0"]) == TOLERANCE["cuda"]
    assert tolerance([]) == (1e-5, 1e-5)
    a = {"y": np.array([1.0, np.nan], np.float32), "i": np.array([3])}
    assert outputs_close(a, {"y": np.array([1.00005, np.nan], np.float32), "i": np.array([3])}, 1e-4, 1e-4)
    assert not outputs_close(a, {"y": np.array([1.01, np.nan], np.float32), "i": np.array([3])}, 1e-4, 1e-4)
    assert not outputs_close(a, {"y": a["y"], "i": np.array([4])}, 1e-4, 1e-4)


@pytest.mark.parametrize("name", CONVERTIBLE)
def test_torch_runner_whole_corpus_model_equals_ort(name: str) -> None:
    """One part on torch's CPU device: outputs equal one ORT session's within TOLERANCE['cpu']."""
    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.bench.outputs import outputs_informative
    from onnx_sched.bench.split_executor import SplitExecutor, split_model

    imp = _import(name)
    feed = random_inputs(imp.model, 0)
    ref = _ort_outputs(imp.model, feed)
    assert outputs_informative(ref)
    parts = split_model(imp, np.zeros(imp.graph.n_ops, np.int64))
    with SplitExecutor(parts, [device_spec("torch:cpu")], list(ref)) as ex:
        got = ex.run(feed)
        assert set(ex.last_device_seconds) == {"torch:cpu"}
    assert all(isinstance(v, np.ndarray) for v in got.values())
    assert outputs_close(ref, got, *TOLERANCE["cpu"])


def _bench_split(label: str, kind: str) -> None:
    """randwire_ws with every 12th op (many boundaries) on torch device ``label``, the rest on an ORT CPU
    device: outputs equal one ORT session's within TOLERANCE[kind], both devices busy."""
    from onnx_sched.bench.runtimes.ort import bench_ort
    from onnx_sched.dag import kahn_order

    imp = _import("randwire_ws")
    placement = np.zeros(imp.graph.n_ops, np.int64)
    placement[kahn_order(imp.graph)[::12]] = 1
    report = bench_ort(imp, placement, [device_spec("CPU", cores=(0,)), device_spec(label, cores=(1,))],
                       warmup=1, repeats=2)
    assert report["outputs_equal"] and report["outputs_informative"] and report["sub_models"] > 2
    assert report["tolerance"] == {"rtol": TOLERANCE[kind][0], "atol": TOLERANCE[kind][1]}
    assert report["torch_devices"] == [torch_device(label)] and set(report["device_seconds"]) == {"CPU", label}


def _ort_and_torch_cpu(model: onnx.ModelProto, seed: int) -> tuple[dict, dict]:
    """The outputs of one ONNX Runtime session and of the whole model as one part on ``torch:cpu``, same feed."""
    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.bench.split_executor import SplitExecutor, split_model
    from onnx_sched.importers.onnx import import_onnx

    imp = import_onnx(model)
    feed = random_inputs(imp.model, seed)
    ref = _ort_outputs(imp.model, feed)
    with SplitExecutor(split_model(imp, np.zeros(imp.graph.n_ops, np.int64)), [device_spec("torch:cpu")],
                       list(ref)) as ex:
        return ref, ex.run(feed)


def test_torch_runner_split_over_ort_and_torch_equals_one_session() -> None:
    _bench_split("torch:cpu", "cpu")


def test_torch_runner_rewrites_what_onnx2torch_gets_wrong() -> None:
    """CumSum's default direction, Flatten at axis = rank, GreaterOrEqual-16, a Clip whose max (or min, session 37)
    is omitted by an empty name and an opset-7 Dropout with its mask unread run like ONNX Runtime (onnx2torch
    1.5.15 fails or differs on each as it comes)."""
    from onnx import TensorProto, helper

    def run(nodes, outputs, opset: int) -> None:  # noqa: ANN001
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                                  [helper.make_tensor_value_info(o, t, shape) for o, t, shape in outputs],
                                  initializer=[helper.make_tensor("axis", TensorProto.INT64, [], [1]),
                                               helper.make_tensor("low", TensorProto.FLOAT, [], [-0.25])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        ref, got = _ort_and_torch_cpu(model, 1)
        assert outputs_close(ref, got, *TOLERANCE["cpu"]), (ref, got)

    run([helper.make_node("CumSum", ["x", "axis"], ["c"], name="cumsum"),
         helper.make_node("Flatten", ["c"], ["f"], name="flatten", axis=2),
         helper.make_node("GreaterOrEqual", ["f", "f"], ["ge"], name="ge")],
        [("f", TensorProto.FLOAT, [12, 1]), ("ge", TensorProto.BOOL, [12, 1])], 17)
    run([helper.make_node("Clip", ["x", "low", ""], ["y"], name="clip")], [("y", TensorProto.FLOAT, [2, 6])], 13)
    run([helper.make_node("Clip", ["x", "", "low"], ["y"], name="clip")], [("y", TensorProto.FLOAT, [2, 6])], 13)
    run([helper.make_node("Dropout", ["x"], ["d", "mask"], name="dropout"),
         helper.make_node("Relu", ["d"], ["y"], name="relu")], [("y", TensorProto.FLOAT, [2, 6])], 7)


def test_torch_runner_copies_exactly_the_tensors_that_cross_devices() -> None:
    """A torch part hands the host only what another device or the caller reads; a tensor its own
    device reads next stays a torch tensor on that device."""
    from onnx import TensorProto, helper

    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.bench.split_executor import SplitExecutor, split_model
    from onnx_sched.importers.onnx import import_onnx

    # x -> a (torch) -> b (ORT) -> c (torch, reads a and b) -> y: a crosses only to c's part (same device)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"), helper.make_node("Sigmoid", ["a"], ["b"], name="b"),
             helper.make_node("Add", ["a", "b"], ["y"], name="c")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    imp = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    placement = np.array([1 if n != "b" else 0 for n in imp.graph.op_names])
    parts = split_model(imp, placement)
    feed = random_inputs(imp.model, 0)
    with SplitExecutor(parts, [device_spec("CPU"), device_spec("torch:cpu")], ["y"]) as ex:
        by_nodes = {tuple(imp.graph.op_names[list(imp.op_node).index(i)] for i in p.nodes): k
                    for k, p in enumerate(parts)}
        assert ex.host_outputs[by_nodes[("a",)]] == ("a",)  # b (ORT) reads it: copied; c reads the device tensor
        assert ex.host_outputs[by_nodes[("c",)]] == ("y",)
        got = ex.run(feed)
    x = feed["x"]
    a = np.maximum(x, 0)
    np.testing.assert_allclose(got["y"], a + 1 / (1 + np.exp(-a)), rtol=1e-5, atol=1e-6)


def test_torch_runner_passes_scalars_between_devices_as_scalars() -> None:
    """A 0-d tensor (a Gather of a Shape, as every attention block's reshape computes) crossing from ONNX Runtime to
    a torch part and back stays 0-d: ``np.ascontiguousarray`` made it 1-d, and the Concat after its Unsqueeze
    failed (yolos_tiny and swin_tiny split over a CPU core and cuda:0, docs/results.md 17.5)."""
    from onnx import TensorProto, helper

    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.bench.split_executor import SplitExecutor, split_model
    from onnx_sched.importers.onnx import import_onnx

    # x[2, 6] -> Shape -> Gather(0) = s (0-d) -> Unsqueeze -> Concat([s, -1]) -> Reshape(x) -> y[2, 6]
    nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "zero"], ["s"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["s", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("Concat", ["u", "minus_one"], ["new_shape"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "new_shape"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
                              initializer=[helper.make_tensor("zero", TensorProto.INT64, [], [0]),
                                           helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
                                           helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])])
    imp = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    feed = random_inputs(imp.model, 0)
    devices = [device_spec("CPU"), device_spec("torch:cpu")]
    for torch_ops in ({"unsqueeze", "concat", "reshape"}, {"shape", "gather"}):  # s crosses ORT -> torch, torch -> ORT
        placement = np.array([1 if n in torch_ops else 0 for n in imp.graph.op_names])
        with SplitExecutor(split_model(imp, placement), devices, ["y"]) as ex:
            np.testing.assert_array_equal(ex.run(feed)["y"], feed["x"])


@pytest.mark.parametrize("opset", [9, 17])
def test_torch_runner_same_auto_pad_and_asymmetric_average_pooling_run_like_ort(opset: int) -> None:
    """``auto_pad = SAME_UPPER / SAME_LOWER`` (stride 2 on odd and even sizes: asymmetric pads) on Conv, MaxPool and
    AveragePool, and AveragePool with explicit asymmetric pads with and without ``count_include_pad``, which
    onnx2torch refuses as they come (EfficientNet-B0, Inception-v1), run on a torch device like ONNX Runtime."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c_up"], name="conv_up", auto_pad="SAME_UPPER", strides=[2, 2]),
             helper.make_node("Conv", ["x", "w"], ["c_low"], name="conv_low", auto_pad="SAME_LOWER", strides=[2, 2]),
             helper.make_node("MaxPool", ["x"], ["m"], name="max", auto_pad="SAME_UPPER", kernel_shape=[3, 3],
                              strides=[2, 2]),
             helper.make_node("AveragePool", ["x"], ["a_same"], name="avg_same", auto_pad="SAME_LOWER",
                              kernel_shape=[2, 3], strides=[2, 2]),
             helper.make_node("AveragePool", ["x"], ["a_ex"], name="avg_ex", kernel_shape=[3, 3], pads=[0, 0, 1, 2]),
             helper.make_node("AveragePool", ["x"], ["a_in"], name="avg_in", kernel_shape=[3, 3], pads=[1, 0, 0, 2],
                              count_include_pad=1)]
    outputs = {"c_up": [1, 3, 4, 4], "c_low": [1, 3, 4, 4], "m": [1, 2, 4, 4], "a_same": [1, 2, 4, 4],
               "a_ex": [1, 2, 6, 8], "a_in": [1, 2, 6, 8]}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 7, 8])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, shape) for o, shape in outputs.items()],
                              initializer=[weight])
    ref, got = _ort_and_torch_cpu(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                                    ir_version=7), 3)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_torch_runner_cli_bench_placement_and_profile(tmp_path) -> None:
    """bench-placement --devices CPU,torch:cpu, profile --device torch:cpu (a valid profile file with
    measured transfers), and a latency placement planned from an ORT CPU profile plus that one."""
    from onnx_sched.bench.placement_file import save_placement
    from onnx_sched.cli import main
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.profiling import load_profiles

    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    graph = import_onnx(model).graph
    save_placement(tmp_path / "p.json", graph, np.arange(graph.n_ops) % 2, ["CPU", "torch:cpu"])
    runner = CliRunner()
    res = runner.invoke(main, ["bench-placement", str(model), "--placement", str(tmp_path / "p.json"), "--runtime",
                               "ort", "--devices", "CPU,torch:cpu", "--repeats", "2", "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 0, (res.output, res.exception)
    assert "outputs equal" in res.output and "torch tolerance" in res.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["torch_devices"] == ["cpu"] and report["sub_models"] >= 2
    res = runner.invoke(main, ["profile", str(model), "--device", "torch:cpu", "--repeats", "2",
                               "-o", str(tmp_path / "torch.json")])
    assert res.exit_code == 0, (res.output, res.exception)
    res = runner.invoke(main, ["profile", str(model), "--runtime", "ort", "--repeats", "2", "--no-transfer",
                               "-o", str(tmp_path / "cpu.json")])
    assert res.exit_code == 0, (res.output, res.exception)
    ps = load_profiles([tmp_path / "cpu.json", tmp_path / "torch.json"])
    dev = ps.devices[1]
    assert (dev.name, dev.backend, dev.kind, dev.simulated) == ("torch:cpu", "torch", "cpu", False)
    assert set(dev.op_seconds) == set(graph.op_names) and sum(v > 0 for v in dev.op_seconds.values()) == graph.n_ops
    assert ps.host == "CPUExecutionProvider"
    assert {("CPUExecutionProvider", "torch:cpu"), ("torch:cpu", "CPUExecutionProvider")} <= set(ps.transfers)
    assert ps.transfer("CPUExecutionProvider", "torch:cpu").latency_s > 0
    res = runner.invoke(main, ["optimize", str(model), "-o", str(tmp_path / "out.onnx"), "--objective", "latency",
                               "--profiles", str(tmp_path / "cpu.json"), "--profiles", str(tmp_path / "torch.json")])
    assert res.exit_code == 0, (res.output, res.exception)


def test_torch_runner_large_sums_are_compared_at_the_outputs_scale(tmp_path) -> None:
    """Two 1024-long MatMuls in torch and in ONNX Runtime round differently by ~1e-3 on outputs of ~1e3 (another
    summation order): the split and the per-device processes are equal within the torch tolerance taken relative to
    each output's scale (per element, elements near zero failed: outputs DIFFER, exit 1)."""
    pytest.importorskip("memray")
    from onnx import TensorProto, helper, numpy_helper

    from onnx_sched.cli import main
    from onnx_sched.exporters.onnx import DEVICE_KEY

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm1"),
             helper.make_node("Relu", ["a"], ["b"], name="r"),
             helper.make_node("MatMul", ["b", "w"], ["c"], name="mm2"),
             helper.make_node("Add", ["c", "a"], ["y"], name="add")]
    for node, device in zip(nodes, ("CPU", "GPU", "GPU", "GPU")):
        node.metadata_props.add(key=DEVICE_KEY, value=device)
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "sums", [vi("x", TensorProto.FLOAT, [64, 1024])],
                          [vi("y", TensorProto.FLOAT, [64, 1024])], [w])
    model = tmp_path / "sums.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), model)
    res = CliRunner().invoke(main, ["bench-placement", str(model), "--placement", str(model), "--runtime", "ort",
                                    "--devices", "CPU,torch:cpu", "--memory", "--repeats", "2",
                                    "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 0, (res.output, res.exception)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["outputs_equal"] and report["device_memory"]["outputs_equal"]
    assert report["max_abs_error"] < 0.1


def test_torch_runner_ort_only_devices_and_devices_command_import_no_torch(tmp_path) -> None:
    """With torch blocked, bench-placement on ORT CPU devices and onnx-sched devices still run."""
    from onnx_sched.bench.placement_file import save_placement
    from onnx_sched.importers.onnx import import_onnx

    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    graph = import_onnx(model).graph
    save_placement(tmp_path / "p.json", graph, np.arange(graph.n_ops) % 2, ["CPU", "CPUB"])
    code = BLOCK_TORCH + textwrap.dedent(f"""
        from click.testing import CliRunner
        from onnx_sched.cli import main
        r = CliRunner().invoke(main, ["bench-placement", {str(model)!r}, "--placement", {str(tmp_path / 'p.json')!r},
                                      "--runtime", "ort", "--devices", "CPU,CPUB", "--repeats", "1"])
        assert r.exit_code == 0, (r.output, r.exception)
        r = CliRunner().invoke(main, ["devices", "--json"])
        assert r.exit_code == 0, (r.output, r.exception)
        assert not [d for d in json.loads(r.output) if d["backend"] == "torch"]
        assert "torch" not in sys.modules and "onnx2torch" not in sys.modules
        print("ok")
        """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]


@needs_cuda
def test_torch_runner_cuda_split_equals_one_session() -> None:
    _bench_split("cuda:0", "cuda")


@needs_cuda
def test_torch_runner_cuda_profile_and_transfer() -> None:
    from onnx_sched.devices import list_devices
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.profiling import measure_torch_transfer, profile_torch_set

    assert any(d.name == "cuda:0" and d.backend == "torch" and d.kind == "dgpu" for d in list_devices())
    h2d, d2h = measure_torch_transfer("cuda:0")
    assert h2d.bandwidth_Bps > 1e8 and d2h.bandwidth_Bps > 1e8
    imp = import_onnx(branchy_model())
    ps = profile_torch_set(imp, "cuda:0", repeats=3)
    dev = ps.devices[0]
    assert dev.name == "cuda:0" and dev.kind == "dgpu" and sum(v > 0 for v in dev.op_seconds.values()) == imp.graph.n_ops
    assert ps.transfer("CPU", "cuda:0").bandwidth_Bps > 1e8 and ps.transfer("cuda:0", "CPU").bandwidth_Bps > 1e8
    # a boundary of the split executor costs the copy and more (synchronisation, hand-off, part start)
    assert ps.transfer("CPU", "cuda:0").latency_s > max(h2d.latency_s, d2h.latency_s)


def test_torch_runner_local_functions_and_ops_onnx2torch_cannot_convert() -> None:
    """A model calling local functions runs and is profiled on a torch device (calls inlined, each call op timed
    as its body); an op onnx2torch has no converter for is one line naming it, not onnx2torch's traceback."""
    from conftest import local_function_model
    from onnx import TensorProto, helper

    from onnx_sched.bench.runtimes.torch_parts import convert_part
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.profiling.cuda import profile_torch

    imp = import_onnx(local_function_model())
    profile = profile_torch(imp, "cpu", repeats=2, warmup=1)
    assert set(profile.op_seconds) == set(imp.graph.op_names)
    assert all(profile.op_seconds[n] > 0 for n in ("swish_a", "swish_b")), profile.op_seconds
    vi = helper.make_tensor_value_info
    seq = helper.make_model(helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),
         helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1)], "seq",
        [vi("x", TensorProto.FLOAT, [1, 4])], [vi("y", TensorProto.FLOAT, [1, 4])]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ValueError, match=r"cannot convert SplitToSequence \(op version \d+\)") as err:
        convert_part(seq)
    assert "\n" not in str(err.value)


def test_torch_runner_profiles_an_ir3_model_whose_initializers_are_graph_inputs() -> None:
    """IR-3 models (the light_* corpus) list initializers as graph inputs; folding constants for onnx2torch must
    neither build an IR-3 graph without them nor leave the folded ones behind as inputs to feed."""
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.profiling.cuda import profile_torch

    path = CORPUS / "onnx" / "light_squeezenet.onnx"
    if not path.exists():
        pytest.skip(f"corpus model {path} not found")
    imp = import_onnx(path)  # as `onnx-sched profile` imports it
    assert imp.model.ir_version == 3
    profile = profile_torch(imp, "cpu", repeats=1, warmup=0)
    assert set(profile.op_seconds) == set(imp.graph.op_names)
    assert sum(s > 0 for s in profile.op_seconds.values()) == imp.graph.n_ops


def test_torch_devices_this_machine_cannot_run_are_one_line(tmp_path) -> None:
    """A CUDA device torch does not see, and any torch device without PyTorch installed (bench-placement, profile):
    one line, exit 2."""
    from onnx_sched.bench.placement_file import save_placement
    from onnx_sched.cli import main
    from onnx_sched.importers.onnx import import_onnx

    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    graph = import_onnx(model).graph
    save_placement(tmp_path / "p.json", graph, np.arange(graph.n_ops) % 2, ["CPU", "GPU"])
    args = ["bench-placement", str(model), "--placement", str(tmp_path / "p.json"), "--runtime", "ort", "--devices"]
    if torch.cuda.device_count() < 8:
        res = CliRunner().invoke(main, [*args, "CPU,cuda:7"])
        assert res.exit_code == 2 and "torch sees" in res.output and "Traceback" not in res.output
    code = BLOCK_TORCH + textwrap.dedent(f"""
        from click.testing import CliRunner
        from onnx_sched.cli import main
        r = CliRunner().invoke(main, {[*args, "CPU,torch:cpu"]!r})
        assert r.exit_code == 2 and "onnx-sched[gpu]" in r.output, (r.exit_code, r.output)
        r = CliRunner().invoke(main, ["profile", {str(model)!r}, "--device", "torch:cpu",
                                      "-o", {str(tmp_path / "t.json")!r}])
        assert r.exit_code == 2 and "onnx-sched[gpu]" in r.output, (r.exit_code, r.output)
        print("ok")
        """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), (res.stdout[-1000:], res.stderr[-2000:])
