"""Heap-tracked peaks in ``onnx-sched bench``: real ORT / OpenVINO runs under memray, set
beside the memory model's prediction for the file order."""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h

from onnx_sched.bench.heap import heap_tracker_available, live_bytes_curve, trace_heap
from onnx_sched.bench.measure import bench_models
from onnx_sched.cli import main
from onnx_sched.errors import OnnxSchedError

pytestmark = pytest.mark.skipif(not heap_tracker_available(), reason="memray (the [bench] extra) is not installed")

ROWS, COLS = 512, 1024  # one float32 branch tensor: 2 MiB
BRANCH = ROWS * COLS * 4


def two_branch_model(depth_first: bool, op: str = "Exp") -> onnx.ModelProto:
    """x -> Expand (2 MiB) -> ``op`` -> ReduceSum, twice; the sums are added.

    Breadth-first keeps both Expand outputs alive at once; depth-first frees the
    first branch's before the second's is made, so the two orders differ by one
    2 MiB tensor under either memory model.  ORT runs Relu in place, Exp not.
    """
    inits = [h.make_tensor("shape", T.INT64, [2], [ROWS, COLS]), h.make_tensor("axes", T.INT64, [1], [0])]
    chains = [[h.make_node("Expand", ["x", "shape"], [f"e{b}"], name=f"expand{b}"),
               h.make_node(op, [f"e{b}"], [f"x{b}"], name=f"op{b}"),
               h.make_node("ReduceSum", [f"x{b}", "axes"], [f"s{b}"], keepdims=0, name=f"sum{b}")] for b in range(2)]
    nodes = [n for c in chains for n in c] if depth_first else [c[i] for i in range(3) for c in chains]
    nodes.append(h.make_node("Add", ["s0", "s1"], ["y"], name="add"))
    graph = h.make_graph(nodes, "two_branch", [h.make_tensor_value_info("x", T.FLOAT, [COLS])],
                         [h.make_tensor_value_info("y", T.FLOAT, [COLS])], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model)
    return model


def _save_orders(d, op: str = "Exp"):
    bf, df = d / f"breadth_first_{op}.onnx", d / f"depth_first_{op}.onnx"
    onnx.save(two_branch_model(False, op), bf)
    onnx.save(two_branch_model(True, op), df)
    return bf, df


@pytest.fixture(scope="module")
def two_orders(tmp_path_factory):
    return _save_orders(tmp_path_factory.mktemp("heap"))


def test_live_bytes_follow_allocs_frees_reallocs_and_partial_unmaps() -> None:
    curve, end = live_bytes_curve([
        ("alloc", 10, 100), ("alloc", 20, 50),
        ("free", 10, 0), ("alloc", 10, 30),  # a realloc: free of the old block, then the new one
        ("alloc", 99, 4096), ("free", 99, 1024),  # munmap of the first 1 KiB of a 4 KiB mapping
        ("free", 99 + 1024, 3072), ("free", 5, 0),  # the rest; an address from before the window
    ])
    assert curve.tolist() == [100, 150, 50, 80, 4176, 3152, 80, 80]
    assert end == 80


def test_trace_heap_sees_a_native_allocation_and_its_free() -> None:
    def work() -> int:
        a = np.ones(3 * 2**20, dtype=np.uint8)  # 3 MiB through malloc
        return int(a[0])

    result, trace = trace_heap(work)
    assert result == 1
    assert 3 * 2**20 <= trace.peak_bytes < 3 * 2**20 + 2**20
    assert trace.end_bytes < 2**20  # the array was freed inside the window
    assert max(trace.curve) == trace.peak_bytes


@pytest.mark.parametrize("op", ["Exp", "Relu"])
def test_measured_saving_of_two_orders_equals_the_predicted_one(op, tmp_path) -> None:
    """The acceptance check: known tensor sizes, two orders, heap-measured difference =
    predicted difference within 1% (kernel scratch and the returned output are the same in both)."""
    bf, df = _save_orders(tmp_path, op)
    rep = bench_models(bf, df, ort_opt=False, arenas=(False,), repeats=1, warmup=1, heap=True)
    assert rep.outputs_equal
    pred_in, pred_out = rep.predictions["in"], rep.predictions["out"]
    assert pred_in.graph_is_run and pred_out.graph_is_run
    assert pred_in.inputs_bytes == COLS * 4
    s = rep.savings
    assert s is not None
    # breadth-first holds the second branch's 2 MiB too; depth-first holds the first branch's 4 KiB sum
    assert s.predicted_bytes == BRANCH - COLS * 4
    assert s.predicted_bytes_inplace == s.predicted_bytes
    assert abs(s.measured_bytes - s.predicted_bytes) <= 0.01 * s.predicted_bytes, s.to_dict()
    assert s.agrees
    # the absolute peaks follow the in-place model: Relu reuses its dying input in ORT, Exp copies
    for label, pred in rep.predictions.items():
        assert (pred.activation_bytes_inplace < pred.activation_bytes) == (op == "Relu")
        heap = rep.heap_run(label).heap_peak_bytes
        assert abs(heap - pred.activation_bytes_inplace) <= 0.02 * pred.activation_bytes_inplace, (label, heap)


def test_mem_pattern_off_gives_the_same_saving(two_orders) -> None:
    bf, df = two_orders
    rep = bench_models(bf, df, ort_opt=False, arenas=(False,), repeats=1, warmup=0, heap=True, mem_pattern=False)
    assert rep.run("in").raw["mem_pattern"] is False
    assert rep.savings is not None and rep.savings.agrees, rep.savings


def test_cli_report_has_heap_peaks_for_both_models_and_a_plot(two_orders, tmp_path) -> None:
    bf, df = two_orders
    report, png = tmp_path / "r.json", tmp_path / "heap.png"
    res = CliRunner().invoke(main, ["bench", str(bf), str(df), "--repeats", "1", "--warmup", "1", "--no-ort-opt",
                                    "--report", str(report), "--plot", str(png)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "measured (heap)" in res.output and "agree within 5%" in res.output
    data = json.loads(report.read_text())
    for label in ("in", "out"):
        model = data["models"][label]
        assert model["heap_peak_bytes"] > BRANCH // 2
        assert model["heap_reserved_bytes_arena_on"] >= model["heap_peak_bytes"]  # the arena keeps what it got
        assert model["predicted_inputs_bytes"] == COLS * 4
    assert data["models"]["in"]["heap_peak_bytes"] - data["models"]["out"]["heap_peak_bytes"] > 0.99 * BRANCH
    assert data["savings"]["agrees"] is True
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_openvino_heap_is_measured_and_reordering_does_not_change_it(two_orders) -> None:
    """OpenVINO plans its own memory: the file order does not move its heap peak."""
    pytest.importorskip("openvino")
    bf, df = two_orders
    rep = bench_models(bf, df, runtime="openvino", repeats=1, warmup=1, heap=True)
    assert rep.outputs_equal
    heaps = [rep.run(label).heap_reserved_bytes for label in ("in", "out")]
    assert all(v is not None and v > 0 for v in heaps)
    assert abs(heaps[0] - heaps[1]) <= 0.01 * max(heaps)
    assert all(not p.graph_is_run for p in rep.predictions.values())


def test_without_the_tracker_bench_says_how_to_get_it(two_orders, monkeypatch) -> None:
    bf, _ = two_orders
    monkeypatch.setitem(sys.modules, "memray", None)  # import memray -> ImportError
    rep = bench_models(bf, ort_opt=False, arenas=(False,), repeats=1, warmup=0)
    assert rep.heap_measured is None and rep.run("in").heap_peak_bytes is None
    assert "pip install 'onnx-sched[bench]'" in (rep.heap_note or "")
    with pytest.raises(OnnxSchedError, match=r"onnx-sched\[bench\]"):
        bench_models(bf, ort_opt=False, arenas=(False,), repeats=1, warmup=0, heap=True)
    res = CliRunner().invoke(main, ["bench", str(bf), "--repeats", "1", "--arena", "off", "--heap"])
    assert res.exit_code != 0 and "onnx-sched[bench]" in res.output
