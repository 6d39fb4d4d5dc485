"""A measured target inside a time limit: each placement is run once however often it is scored, and the time the
runs take is held back from the search (``Objective.target_seconds``, ``PassContext.measure_deadline``)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import branchy_model

from onnx_sched.api import optimize_model
from onnx_sched.bench.runtimes import placement_timing
from onnx_sched.passes import get_pass

TWO_CORES = {"devices": [{"name": "CPU", "peak_flops": 1e10, "mem_bandwidth": 1e10},
                         {"name": "CPUB", "peak_flops": 1e10, "mem_bandwidth": 1e10}],
             "links": [{"from": "CPU", "to": "CPUB", "latency": 0, "bandwidth": 1e10}]}


@pytest.fixture(autouse=True)
def released():
    """Each test starts and ends with no executor or measurement kept from another."""
    placement_timing.release()
    yield
    placement_timing.release()


@pytest.fixture()
def runs(monkeypatch) -> list[int]:
    """The number of placements each interleaved run timed, in call order (the runs themselves are real)."""
    calls: list[int] = []
    real = placement_timing.interleaved_seconds

    def counted(imported, placements, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        calls.append(len(np.atleast_2d(placements)))
        return real(imported, placements, *args, **kwargs)

    monkeypatch.setattr(placement_timing, "interleaved_seconds", counted)
    return calls


def test_a_single_schedule_method_is_run_once_for_its_score_its_baseline_and_its_report(tmp_path, runs) -> None:
    """list-cp's result is its own baseline: before the memo, scoring, the baseline check and the report each ran
    it beside the reference (three runs); now one run times it, and the report says what was held back."""
    machines = tmp_path / "two_cores.json"
    machines.write_text(json.dumps(TWO_CORES))
    result = optimize_model(branchy_model(branches=2, n=64), "makespan", "list-cp", time_limit=30, seed=0,
                            machines=machines, options={"target": "measured", "repeats": 3})
    assert runs == [2]  # the reference and list-cp's placement, once
    assert result.report["target"]["model"] == "measured" and result.report["target"]["speedup"] > 0
    assert result.report["measure_seconds"] > 0


def test_the_pass_gets_the_time_limit_less_the_measured_runs(tmp_path, monkeypatch) -> None:
    """The caller times one run of the model first, holds back what the target's runs will take, and hands the
    pass its deadline for them: the pass's ``time_limit`` is shorter by about that, the runs end by the limit."""
    machines = tmp_path / "two_cores.json"
    machines.write_text(json.dumps(TWO_CORES))
    seen = {}
    real = get_pass("list-cp", "makespan")

    def spy(graph, ctx):  # noqa: ANN001
        seen["ctx"] = ctx
        return real(graph, ctx)

    monkeypatch.setattr("onnx_sched.api.get_pass", lambda name, objective: spy)
    model = branchy_model(branches=2, n=64)
    result = optimize_model(model, "makespan", "list-cp", time_limit=30, machines=machines,
                            options={"target": "measured", "repeats": 3})
    ctx, measure = seen["ctx"], result.report["measure_seconds"]
    assert not placement_timing._READY  # the estimate's executors no run took over are closed
    assert ctx.measure_deadline is not None and ctx.time_limit < 30 - measure + 1e-9
    assert ctx.time_limit < ctx.measure_deadline.seconds <= 30
    plain = optimize_model(model, "makespan", "list-cp", time_limit=30, machines=machines)
    assert "measure_seconds" not in plain.report and seen["ctx"].measure_deadline is None


def test_measuring_seconds_grows_with_placements_and_repeats() -> None:
    """The estimate comes from timed runs of the whole model on each device (memoised per model and devices): each
    placement costs ``warmup + repeats`` runs and, unless it is one of those single-device ones, a setup."""
    from onnx_sched.importers.onnx import import_onnx

    imported = import_onnx(branchy_model(branches=2, n=64))
    cost = placement_timing.run_cost(imported, ["CPU", "CPUB"])
    assert cost.setup_s > 0 and cost.run_s > 0
    assert placement_timing.run_cost(imported, ["CPU", "CPUB"]) is cost
    one = placement_timing.measuring_seconds(imported, ["CPU", "CPUB"], rows=1, singles=1, repeats=3, warmup=0)
    assert one == pytest.approx(cost.setup_s + 2 * 3 * cost.run_s)  # the single-device placement is built already
    assert placement_timing.measuring_seconds(imported, ["CPU", "CPUB"], rows=3, repeats=10) > 2 * one


def test_memo_speedups_times_each_placement_once_per_model(runs) -> None:
    """A placement asked for again (in the same call or a later one) is not run again; a new one is; the reference
    is 1 without a run; another model starts afresh."""
    from onnx_sched.importers.onnx import import_onnx

    imported = import_onnx(branchy_model(branches=2, n=64))
    n = imported.graph.n_ops
    ref, split = np.zeros(n, np.int64), np.arange(n, dtype=np.int64) % 2
    first = placement_timing.memo_speedups(imported, ref, np.stack([split, split, ref]), ["CPU", "CPUB"], repeats=3)
    assert runs == [2] and first[0] == first[1] > 0 and first[2] == 1.0
    again = placement_timing.memo_speedups(imported, ref, split[None], ["CPU", "CPUB"], repeats=3)
    assert runs == [2] and again[0] == first[0]
    placement_timing.memo_speedups(imported, ref, (1 - split)[None], ["CPU", "CPUB"], repeats=3)
    assert runs == [2, 2]
    other = import_onnx(onnx.load_from_string(branchy_model(branches=2, n=64).SerializeToString()))
    placement_timing.memo_speedups(other, ref, split[None], ["CPU", "CPUB"], repeats=3)
    assert runs == [2, 2, 2]


def test_the_single_device_executors_timed_for_the_estimate_are_not_built_again(monkeypatch) -> None:
    """run_cost builds and runs the whole model on each device; the run that then times those placements takes them
    over with their first outputs (a torch device's conversion and CUDA start are paid once, the check run too),
    and builds only the split."""
    from onnx_sched.bench import split_executor
    from onnx_sched.importers.onnx import import_onnx

    built: list[int] = []
    runs: list[int] = []  # per executor built, its runs

    class Counted(split_executor.SplitExecutor):
        def __init__(self, parts, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
            self.index = len(runs)
            runs.append(0)
            super().__init__(parts, *args, **kwargs)
            built.append(self.n_parts)

        def run(self, feed):  # noqa: ANN001, ANN201
            runs[self.index] += 1
            return super().run(feed)

    monkeypatch.setattr(split_executor, "SplitExecutor", Counted)
    imported = import_onnx(branchy_model(branches=2, n=64))
    n = imported.graph.n_ops
    placement_timing.run_cost(imported, ["CPU", "CPUB"])
    assert built == [1, 1]
    split = np.arange(n, dtype=np.int64) % 2
    speed = placement_timing.memo_speedups(imported, np.zeros(n, np.int64), np.stack([np.ones(n, np.int64), split]),
                                           ["CPU", "CPUB"], repeats=3)
    assert len(built) == 3 and built[2] > 1 and np.isfinite(speed).all()
    # the estimate's two runs, then 2 warm-up and 3 timed rounds: the first run already checked its outputs
    assert runs == [2 + 5, 2 + 5, 1 + 5]


def test_a_torch_device_is_started_before_its_build_is_timed() -> None:
    """Starting torch (on a GPU: CUDA's context and libraries, seconds once per process) is timed apart and left
    out of the estimate, which counts builds and runs: on an H200 the start was most of an 11 s first build."""
    pytest.importorskip("torch")
    from onnx_sched.bench.runtimes.torch_parts import onnx2torch_module
    from onnx_sched.importers.onnx import import_onnx

    try:
        onnx2torch_module()  # torchvision stubbed where it cannot load
    except ImportError:
        pytest.skip("the torch part-runner needs onnx2torch (the [gpu] extra)")

    imported = import_onnx(branchy_model(branches=2, n=64))
    cost = placement_timing.run_cost(imported, ["CPU", "torch:cpu"])
    assert cost.start_s > 0 and cost.setup_s > 0 and cost.run_s > 0
    estimate = placement_timing.measuring_seconds(imported, ["CPU", "torch:cpu"], rows=1, singles=2, repeats=3,
                                                  warmup=0)
    assert estimate == pytest.approx(cost.setup_s + 3 * 3 * cost.run_s)


def test_the_estimate_keeps_only_the_executors_a_run_takes_over_and_skips_a_device_that_cannot_run_it() -> None:
    """makespan's runs reuse the first device's whole-model executor only: the others are closed at once.  A device
    that cannot run the whole model (here a torch device and an op onnx2torch cannot convert) is left out of the
    estimate instead of failing the command: a split may still keep that op elsewhere."""
    from onnx import TensorProto, helper

    from onnx_sched.importers.onnx import import_onnx

    imported = import_onnx(branchy_model(branches=2, n=64))
    placement_timing.measuring_seconds(imported, ["CPU", "CPUB"], rows=2, singles=1, keep=[0])
    assert len(placement_timing._READY["executors"]) == 1
    pytest.importorskip("torch")
    from onnx_sched.bench.runtimes.torch_parts import onnx2torch_module

    try:
        onnx2torch_module()
    except ImportError:
        pytest.skip("the torch part-runner needs onnx2torch (the [gpu] extra)")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("SplitToSequence", ["r"], ["s"], name="split", axis=1),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], name="concat", axis=1)]
    graph = helper.make_graph(nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    seq = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    cost = placement_timing.run_cost(seq, ["CPU", "torch:cpu"])
    assert cost.setup_s > 0 and list(placement_timing._READY["executors"]) == [(("CPU", "torch:cpu"),
                                                                               bytes(np.zeros(3, np.int64)), 0)]
    with pytest.raises(ValueError):  # the first device is the reference: it must run the model
        placement_timing.run_cost(seq, ["torch:cpu", "CPU"])


def _shape_input_model(op: str, data: list[int], shape_len: int, out: list[int]) -> onnx.ModelProto:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node(op, ["x", "shape"], ["y"], name=op.lower())], op,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, data),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [shape_len])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_an_expand_shape_given_as_an_input_is_fed_ones_and_a_model_seeded_inputs_break_is_one_line() -> None:
    """Seeded integer inputs are 0 or 1, which breaks an Expand of a dimension above 1 at 0: its shape operand is fed
    ones.  What still cannot run on seeded inputs (a Reshape to a shape the data does not have) is refused in one
    line by both timers, before any search: ONNX Runtime's (the measured target) and OpenVINO's (reward=measured,
    openvino-auto-*; OpenVINO sizes this Reshape from its declared output, so the old Expand feed stands in)."""
    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.bench.runtimes.openvino import PlacementTimer
    from onnx_sched.errors import OnnxSchedError
    from onnx_sched.importers.onnx import import_onnx

    expand = import_onnx(_shape_input_model("Expand", [1, 3, 1], 2, [1, 3, 1]))
    assert random_inputs(expand.model)["shape"].tolist() == [1, 1]
    assert placement_timing.run_cost(expand, ["CPU", "CPUB"]).run_s > 0
    reshape = import_onnx(_shape_input_model("Reshape", [2, 3], 1, [6]))
    with pytest.raises(ValueError, match=r"^the model does not run on CPU with seeded inputs .*Reshape") as err:
        placement_timing.run_cost(reshape, ["CPU", "CPUB"])
    assert "\n" not in str(err.value)
    timer = PlacementTimer(expand, ["CPU", "CPUB", "CPU2"])
    timer.feed["shape"] = np.zeros(2, np.int64)  # what the shape operand got before: [0, 0] cannot take dim 3
    with pytest.raises(OnnxSchedError, match=r"^OpenVINO cannot run the model on CPU with seeded inputs") as err:
        timer.time_device("AUTO:CPU,CPUB,CPU2")  # before AUTO runs it: a failing inference there crashed OpenVINO
    assert "\n" not in str(err.value)
