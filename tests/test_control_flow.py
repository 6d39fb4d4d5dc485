"""Control-flow bodies: an If / Loop op needs its body's memory while it runs, and peak-mem orders the bodies too
(onnx_sched/importers/control_flow.py, onnx_sched/objectives/peak_mem_bodies.py).  The models are built in memory:
a branchy graph (breadth-first file order, where a depth-first order keeps one big tensor live instead of three)
inside If branches, a Loop body and an If nested in a branch."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import onnx
import pytest
from conftest import assert_bitwise_equal, branchy_model, merged_if_model, run_ort
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.api import optimize_model
from onnx_sched.cost.memory import peak_memory
from onnx_sched.errors import UnknownShapeError
from onnx_sched.importers import onnx_shapes
from onnx_sched.importers.control_flow import body_model, import_bodies, transient_bytes
from onnx_sched.importers.onnx import import_onnx

N = 64  # branchy's big tensors: N x N floats, 16 KiB


def _file_peak(model: onnx.ModelProto) -> int:
    graph = import_onnx(model).graph
    return peak_memory(graph, np.arange(graph.n_ops))


def test_openvino_control_flow_ops_hold_their_bodies_memory(tmp_path) -> None:
    """The same models read by OpenVINO (its If and Loop ops, bodies as sub-models): the If holds its larger
    branch's peak beyond its inputs and outputs, the Loop one iteration's temporaries and its own state."""
    ov = pytest.importorskip("openvino")
    from onnx_sched.importers.openvino import import_openvino

    def read(model: onnx.ModelProto) -> Any:
        onnx.save(model, tmp_path / "m.onnx")
        return import_openvino(ov.Core().read_model(str(tmp_path / "m.onnx"))).graph

    def branch(p: str, extra: int) -> onnx.GraphProto:  # x -> Relu -> (Neg ...) -> y: Relu's output is transient
        nodes = [helper.make_node("Relu", ["x"], [p + "0"])]
        nodes += [helper.make_node("Neg", [p + str(k)], [p + str(k + 1)]) for k in range(extra)]
        nodes.append(helper.make_node("Sigmoid", [p + str(extra)], [p + "y"]))
        return helper.make_graph(nodes, p, [], [helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, [N, N])])

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("t", 0), else_branch=branch("e", 2))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N]),
                                            helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    g = read(model)
    # the else branch: Relu's output and its first Neg's live while the second Neg runs
    assert (g.op_types, g.op_param_bytes.tolist()) == (("If",), [2 * N * N * 4])
    assert g.metadata["control_flow_bodies"] == 2 and g.metadata["unsized_bodies"] == 0
    g = read(_relu_sigmoid_loop()[0])  # OpenVINO's body has no condition input: the counter and v are its state
    assert (g.op_types, g.op_param_bytes.tolist()) == (("Loop",), [3 * N * N * 4 + 8])


def test_openvino_reads_a_scan_as_a_tensor_iterator_that_holds_what_the_onnx_scan_holds(tmp_path) -> None:
    """OpenVINO turns an ONNX ``Scan`` into a ``TensorIterator``: it holds its body's state (the carried sum and the
    row it slices, its own buffers from the second iteration on) and the body's two live temporaries, as the ONNX
    import's ``Scan`` does."""
    ov = pytest.importorskip("openvino")
    from onnx_sched.importers.openvino import import_openvino

    row = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [N]) for name in ("s", "xi", "s2", "yo")]
    body = helper.make_graph([helper.make_node("Relu", ["xi"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                              helper.make_node("Add", ["s", "b"], ["s2"]), helper.make_node("Sigmoid", ["b"], ["yo"])],
                             "body", row[:2], row[2:])
    scan = helper.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1)
    graph = helper.make_graph([scan], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [N]),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, N])],
                              [helper.make_tensor_value_info("sf", TensorProto.FLOAT, [N]),
                               helper.make_tensor_value_info("ys", TensorProto.FLOAT, [8, N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "m.onnx")
    g = import_openvino(ov.Core().read_model(str(tmp_path / "m.onnx"))).graph
    assert (g.op_types, g.op_param_bytes.tolist()) == (("TensorIterator",), [4 * N * 4])
    assert g.metadata["control_flow_bodies"] == 1 and g.metadata["unsized_bodies"] == 0
    assert import_onnx(model).graph.op_param_bytes.tolist() == [4 * N * 4]


def test_an_openvino_branch_sized_only_at_run_time_counts_nothing_and_is_counted(tmp_path) -> None:
    """One branch of the If sums a ``Range`` whose length an input sets (OpenVINO cannot size it before a run): the
    model still imports, the other branch's memory counts and the unsized one is said (``unsized_bodies``)."""
    ov = pytest.importorskip("openvino")
    from onnx_sched.importers.openvino import import_openvino

    zero, one = (numpy_helper.from_array(np.array(v, np.int64)) for v in (0, 1))
    ranged = helper.make_graph(
        [helper.make_node("Constant", [], ["z"], value=zero), helper.make_node("Constant", [], ["o"], value=one),
         helper.make_node("Range", ["z", "n", "o"], ["r"]), helper.make_node("Cast", ["r"], ["rf"], to=1),
         helper.make_node("ReduceSum", ["rf"], ["s"], keepdims=1), helper.make_node("Add", ["s", "x"], ["t_y"])],
        "then", [], [helper.make_tensor_value_info("t_y", TensorProto.FLOAT, [N])])
    plain = helper.make_graph([helper.make_node("Relu", ["x"], ["e_a"]), helper.make_node("Neg", ["e_a"], ["e_y"])],
                              "else", [], [helper.make_tensor_value_info("e_y", TensorProto.FLOAT, [N])])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=ranged, else_branch=plain),
                               helper.make_node("Neg", ["y"], ["out"])], "g",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("n", TensorProto.INT64, []),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "m.onnx")
    g = import_openvino(ov.Core().read_model(str(tmp_path / "m.onnx"))).graph
    assert (g.metadata["control_flow_bodies"], g.metadata["unsized_bodies"]) == (1, 1)
    assert g.op_param_bytes[g.op_types.index("If")] == N * 4  # the else branch: Relu's output while Neg runs


def _best_peak(model: onnx.ModelProto) -> int:
    result = optimize_model(model, method="exact", time_limit=5, warm_up=False)
    return result.report["peak_bytes"]["output"]


def test_an_if_op_holds_its_larger_branch_while_it_runs() -> None:
    big, small = branchy_model(3, N), branchy_model(2, N)
    merged = merged_if_model(big, small)
    onnx.checker.check_model(merged, full_check=True)
    # outer: x (an input) and use_cache (1 byte) live, y (4 bytes) made, the larger branch's peak beyond x
    assert _file_peak(merged) == _file_peak(big) + 1 + 4
    assert _file_peak(merged_if_model(small, big)) == _file_peak(big) + 1 + 4
    op, alone = import_onnx(merged).graph, import_onnx(big).graph  # the time models see the larger branch's work
    assert op.op_flops[0] == alone.op_flops.sum() + 1  # the If's own estimate: one element
    assert op.op_bytes[0] == alone.op_bytes.sum() + 1 + N * N * 4 + 4  # reads use_cache and x, writes y


def test_inspect_bounds_the_peak_over_the_orders_of_the_bodies_too(tmp_path) -> None:
    from click.testing import CliRunner

    from onnx_sched.cli import main

    model = merged_if_model(branchy_model(3, N), branchy_model(3, N))
    onnx.save(model, tmp_path / "m.onnx")
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "m.onnx"), "--report", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "r.json").read_text())
    best = optimize_model(model, method="auto", time_limit=5, warm_up=False).report["peak_bytes"]["output"]
    assert stats["control_flow_bodies"] == 2 and stats["lower_bound_bytes"] <= best < stats["file_order_peak_bytes"]


def test_peak_mem_orders_the_branches_of_a_merged_model_and_onnx_runtime_runs_them(tmp_path) -> None:
    model = merged_if_model(branchy_model(3, N), branchy_model(3, N))
    result = optimize_model(model, method="auto", time_limit=5, warm_up=False)
    out, report = result.model, result.report
    onnx.checker.check_model(out, full_check=True)
    assert report["peak_bytes"]["input"] == _file_peak(model)
    assert report["peak_bytes"]["output"] == _best_peak(branchy_model(3, N)) + 1 + 4 < report["peak_bytes"]["input"]
    assert not report["kept_input_order"]
    assert sorted((b["body"], b["reordered"]) for b in report["bodies"]) == [("merged.else_branch", True),
                                                                             ("merged.then_branch", True)]
    then = next(a.g for a in out.graph.node[0].attribute if a.name == "then_branch")
    ops = [n.op_type for n in then.node]
    assert ops[:3] != ["Relu", "Relu", "Relu"] and sorted(ops) == sorted(
        n.op_type for n in model.graph.node[0].attribute[0].g.node)  # the same nodes, no longer breadth-first
    assert model.graph.node[0].attribute[0].g.node[1].op_type == "Relu"  # the caller's model is untouched
    for cond in (True, False):  # both branches, file order as run by ONNX Runtime
        feeds_out = _run(out, cond)
        assert_bitwise_equal(_run(model, cond), feeds_out)
    assert json.dumps(report["bodies"])  # the report's rows are JSON


def _run(model: onnx.ModelProto, cond: bool) -> list[np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)
    return session.run(None, {"x": x, "use_cache": np.array(cond)})


def test_a_body_nested_in_a_branch_is_ordered_first() -> None:
    inner = merged_if_model(branchy_model(3, N), branchy_model(3, N))
    outer = merged_if_model(inner, branchy_model(2, N))
    onnx.checker.check_model(outer, full_check=True)
    assert _file_peak(outer) == _file_peak(inner)  # the inner If's output is the branch's: y is counted once
    result = optimize_model(outer, method="auto", time_limit=5, warm_up=False)
    names = [(b["body"], b["reordered"]) for b in result.report["bodies"]]
    assert ("merged.then_branch/t_merged.then_branch", True) in names
    assert result.report["peak_bytes"]["output"] == _best_peak(branchy_model(3, N)) + 1 + 4
    assert_bitwise_equal(run_ort(outer), run_ort(result.model))


def _relu_sigmoid_loop() -> tuple[onnx.ModelProto, onnx.NodeProto, onnx.GraphProto]:
    """A Loop whose body holds two [N, N] temporaries (Relu and Sigmoid of the carried value) beside its output."""
    body_nodes = [helper.make_node("Relu", ["v"], ["a"]), helper.make_node("Sigmoid", ["v"], ["b"]),
                  helper.make_node("Mul", ["a", "b"], ["v_next"]), helper.make_node("Identity", ["c"], ["c_next"])]
    body = helper.make_graph(body_nodes, "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                                  helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                                  helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v_next", TensorProto.FLOAT, None)])
    loop = helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body, name="loop")
    graph = helper.make_graph([loop], "g", [helper.make_tensor_value_info("trips", TensorProto.INT64, []),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model, loop, body


def test_a_loop_body_counts_one_iteration() -> None:
    model, loop, body = _relu_sigmoid_loop()
    imported = import_onnx(model)
    assert [(b.attribute, b.imported.graph.n_ops) for b in imported.bodies] == [("body", 4)]
    # the carried value's type comes from the loop's initial value: one iteration holds a and b beside v_next, and
    # from the second on the last iteration's v, i and c too (not the outer x any more); at its end ONNX Runtime
    # copies the last v_next into y (the trip count is read at run time: maybe more than one)
    alone = import_onnx(body_model(model, loop, body, {"x": (TensorProto.FLOAT, (N, N)), "trips": (7, ())}, {}),
                        check=False)
    assert transient_bytes(alone.graph, np.arange(4)) == 2 * N * N * 4
    assert imported.bodies[0].resident == 2 * N * N * 4 + 8 + 1
    assert imported.graph.op_param_bytes.tolist() == [4 * N * N * 4 + 8 + 1]


def test_a_scan_double_buffers_its_state_and_copies_an_input_scanned_along_another_axis() -> None:
    """ONNX Runtime's Scan (measured: ``benchmarks/loop_memory.py --op Scan``) keeps no state buffer for one slice,
    one for two, two from three on, reads axis-0 slices in place, and transposes an input scanned along another axis
    into a copy it holds for the whole run.  The body holds Relu's output while the Add runs."""
    square = [N, N]
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["s", "r"], ["s2"])],
                             "body", [helper.make_tensor_value_info(n, TensorProto.FLOAT, square) for n in "sx"],
                             [helper.make_tensor_value_info("s2", TensorProto.FLOAT, square)])

    def held(slices: int, axis: int = 0) -> int:
        scanned = [*square[:axis], slices, *square[axis:]]
        node = helper.make_node("Scan", ["s0", "xs"], ["sf"], body=body, num_scan_inputs=1,
                                **({"scan_input_axes": [axis]} if axis else {}))
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, square),
                                                helper.make_tensor_value_info("xs", TensorProto.FLOAT, scanned)],
                                  [helper.make_tensor_value_info("sf", TensorProto.FLOAT, square)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 10
        return int(import_onnx(model).graph.op_param_bytes[0])

    one = N * N * 4
    assert [held(k) for k in (1, 2, 3, 8)] == [one, 2 * one, 3 * one, 3 * one]
    assert held(4, axis=1) == 3 * one + 4 * one  # the transposed copy of all four slices


@pytest.mark.parametrize("body_shapes", ["declared", "undeclared"])
def test_an_opset_8_scan_double_buffers_each_sequence_of_its_batch(body_shapes: str) -> None:
    """Opset 8's Scan (``sequence_lens`` first, a batch of sequences along axis 1) double-buffers its state for every
    sequence of the batch (measured: ``benchmarks/loop_memory.py --op Scan``); its outputs keep their batch
    dimension (the body, which has none, does not size them).  A body that declares no shapes is sized from the
    node's inputs: past ``sequence_lens``, less the batch axis (and the sequence axis of a scanned input)."""
    square = [N, N]
    shape = square if body_shapes == "declared" else None
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["s", "r"], ["s2"])],
                             "body", [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "sx"],
                             [helper.make_tensor_value_info("s2", TensorProto.FLOAT, shape)])

    def imported(batch: int, length: int) -> Any:
        node = helper.make_node("Scan", ["", "s0", "xs"], ["sf"], body=body, num_scan_inputs=1)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [batch, *square]),
                          helper.make_tensor_value_info("xs", TensorProto.FLOAT, [batch, length, *square])],
            [helper.make_tensor_value_info("sf", TensorProto.FLOAT, [batch, *square])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
        model.ir_version = 7
        return import_onnx(model).graph

    one = N * N * 4
    assert imported(1, 1).op_param_bytes.tolist() == [one]  # Relu's output; one slice needs no state buffer
    g = imported(2, 4)
    assert g.op_param_bytes.tolist() == [one + 2 * 2 * one]  # two buffers for each of the two sequences
    assert g.tensor_bytes[g.tensor_names.index("sf")] == 2 * one


def test_a_loop_whose_carried_value_grows_is_not_sized_by_one_iteration() -> None:
    body_nodes = [helper.make_node("Concat", ["v", "v"], ["v_next"], axis=0),
                  helper.make_node("Identity", ["c"], ["c_next"])]
    body = helper.make_graph(body_nodes, "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                                  helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                                  helper.make_tensor_value_info("v", TensorProto.FLOAT, ["L", N])],
                             [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v_next", TensorProto.FLOAT, ["L2", N])])
    loop = helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body, name="loop")
    graph = helper.make_graph([loop], "g", [helper.make_tensor_value_info("trips", TensorProto.INT64, []),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["L", N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    bodies = import_bodies(model, [0], {"x": (TensorProto.FLOAT, (N, N)), "trips": (TensorProto.INT64, ())},
                           import_onnx)
    assert (bodies.unsized, bodies.bodies, dict(bodies.output_bytes)) == (1, (), {})


def _loop_with_scan_output(trips: onnx.NodeProto | None) -> onnx.ModelProto:
    """A Loop stacking one [N, N] tensor per iteration (its scan output), which an op reads before it is reduced;
    the trip count is a ``Constant`` node (``trips``) or, without one, a graph input."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_next"]), helper.make_node("Relu", ["v"], ["v_next"]),
         helper.make_node("Sigmoid", ["v"], ["row"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [N, N])],
        [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", TensorProto.FLOAT, [N, N]),
         helper.make_tensor_value_info("row", TensorProto.FLOAT, [N, N])])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y", "rows"], body=body, name="loop"),
             helper.make_node("Relu", ["rows"], ["act"]), helper.make_node("ReduceSum", ["act"], ["total"], keepdims=0)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])]
    if trips is None:
        inputs.append(helper.make_tensor_value_info("trips", TensorProto.INT64, []))
    graph = helper.make_graph(([trips] if trips is not None else []) + nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N]),
                               helper.make_tensor_value_info("total", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_loop_with_a_constant_trip_count_sizes_its_scan_output(tmp_path, monkeypatch) -> None:
    trips = helper.make_node("Constant", [], ["trips"], value=numpy_helper.from_array(np.array(5, np.int64)))
    model = _loop_with_scan_output(trips)
    # as installed without OpenVINO, the one engine here that sizes a loop's stacked output
    monkeypatch.setattr(onnx_shapes, "_infer_openvino", lambda *args: ({}, {}))
    imported = import_onnx(model)
    graph = imported.graph
    # the stacked output, and the op after it, whose shape no inference engine knows without the loop's
    assert [graph.tensor_shapes[graph.tensor_names.index(t)] for t in ("rows", "act")] == [(5, N, N)] * 2
    assert imported.shape_sources["control-flow"] == 2
    # at its end the loop holds the five pieces it stacks into rows and the last v beside its copy y, besides
    # its state (v, the counter, the condition): measured so in ONNX Runtime (docs/results.md 28)
    assert graph.op_param_bytes[graph.op_types.index("Loop")] == 5 * N * N * 4 + N * N * 4 + (N * N * 4 + 8 + 1)
    result = optimize_model(model, method="auto", time_limit=2, warm_up=False)
    assert_bitwise_equal(run_ort(model), run_ort(result.model))
    # read at run time, it stays unknown, and the one line says where a size can be given
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_with_scan_output(None), path)
    done = subprocess.run([sys.executable, "-m", "onnx_sched.cli", "optimize", str(path), "-o",
                           str(tmp_path / "out.onnx")], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "'rows' is an output of a Loop" in done.stderr and "value_info" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _loop(trips: int, cond: bool, carried: onnx.NodeProto) -> onnx.ModelProto:
    """A Loop over a [2, 4] value ``v`` with a scan output ``row`` = Relu(v) and the carried ``carried`` node making
    ``v_next``; ``cond``: an outer condition input, which the body passes on (it may end the loop sooner)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_next"]), carried, helper.make_node("Relu", ["v"], ["row"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("row", TensorProto.FLOAT, [2, 4])])
    trips_node = helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.array(trips, np.int64)))
    loop = helper.make_node("Loop", ["M", "go" if cond else "", "x"], ["y", "rows"], body=body)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    inputs += [helper.make_tensor_value_info("go", TensorProto.BOOL, [])] if cond else []
    graph = helper.make_graph([trips_node, loop], "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "rows")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def test_what_a_loop_fixes_of_its_outputs_and_what_it_does_not() -> None:
    """From the review of this code: a stacked output is exact only for a loop without a condition (with one, its
    bytes are a bound and it has no shape); a carried value of the same bytes in another shape (a transpose) gets
    no shape; PyTorch's ``while`` sentinel (M = INT64_MAX) is no trip count (it overflowed the bytes)."""
    relu = helper.make_node("Relu", ["v"], ["v_next"])
    types = {"x": (TensorProto.FLOAT, (2, 4)), "go": (TensorProto.BOOL, ())}
    found = import_bodies(_loop(5, False, relu), [1], types, import_onnx)
    assert dict(found.output_types) == {"y": (TensorProto.FLOAT, (2, 4)), "rows": (TensorProto.FLOAT, (5, 2, 4))}
    assert found.bounded == 0
    found = import_bodies(_loop(5, True, relu), [1], types, import_onnx)
    assert found.output_bytes["rows"] == (5 * 32, "float") and "rows" not in found.output_types
    assert found.bounded == 1
    transpose = helper.make_node("Transpose", ["v"], ["v_next"], perm=[1, 0])  # [2, 4] -> [4, 2]: same bytes
    found = import_bodies(_loop(5, False, transpose), [1], types, import_onnx)
    assert "y" not in found.output_types
    found = import_bodies(_loop(np.iinfo(np.int64).max, True, relu), [1], types, import_onnx)
    assert "rows" not in found.output_bytes
    with pytest.raises(UnknownShapeError, match="'rows' is an output of a Loop"):
        import_onnx(_loop(np.iinfo(np.int64).max, True, relu), check=False)


def test_a_loop_value_a_body_makes_from_constants_alone_is_sized_by_its_declared_type() -> None:
    """The body's carried output is a ``Constant`` of its own (a weight inside the body, no op of it): its declared
    type sizes the loop's output, which is not a value that grows."""
    const = numpy_helper.from_array(np.ones((N, N), np.float32))
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_next"]), helper.make_node("Constant", [], ["v_next"], value=const)],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v", TensorProto.FLOAT, [N, N])],
        [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", TensorProto.FLOAT, [N, N])])
    graph = helper.make_graph([helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body),
                               helper.make_node("Relu", ["y"], ["z"])], "g",
                              [helper.make_tensor_value_info("trips", TensorProto.INT64, []),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [N, N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    bodies = import_bodies(model, [0], {"x": (TensorProto.FLOAT, (N, N)), "trips": (TensorProto.INT64, ())},
                           import_onnx)
    assert bodies.unsized == 0 and dict(bodies.output_types) == {"y": (TensorProto.FLOAT, (N, N))}
    assert dict(bodies.output_bytes) == {"y": (N * N * 4, "float")}


def test_a_body_whose_sizes_are_unknown_counts_nothing_and_is_named(tmp_path) -> None:
    custom = helper.make_node("Mystery", ["x"], ["t_m"], domain="example.custom")
    branch = helper.make_graph([custom, helper.make_node("Relu", ["t_m"], ["t_y"])], "b", [],
                               [helper.make_tensor_value_info("t_y", TensorProto.FLOAT, None)])
    plain = helper.make_graph([helper.make_node("Neg", ["x"], ["e_y"])], "e", [],
                              [helper.make_tensor_value_info("e_y", TensorProto.FLOAT, None)])
    node = helper.make_node("If", ["use_cache"], ["y"], then_branch=branch, else_branch=plain)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N]),
                                            helper.make_tensor_value_info("use_cache", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("example.custom", 1)])
    model.ir_version = 10
    imported = import_onnx(model, check=False)
    assert imported.graph.metadata["unsized_bodies"] == 1 and len(imported.bodies) == 1
    result = optimize_model(model, method="auto", time_limit=2, warm_up=False)
    assert any("1 control-flow body" in note and "could not be sized" in note for note in result.report["notes"])


def test_an_if_output_whose_branches_disagree_on_its_shape_takes_the_larger_branch() -> None:
    """A merged decoder's present key / value: one length with the cache, another without; shape inference gives
    the If's output no shape, the branches do."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t_y"])], "t", [],
                             [helper.make_tensor_value_info("t_y", TensorProto.FLOAT, [N, N])])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e_y"], axis=0)], "e", [],
                              [helper.make_tensor_value_info("e_y", TensorProto.FLOAT, [2 * N, N])])
    nodes = [helper.make_node("If", ["use_cache"], ["y"], then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "g", [x, helper.make_tensor_value_info("use_cache", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["length", N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    bodies = import_bodies(model, [0], {"x": (TensorProto.FLOAT, (N, N))}, import_onnx)  # what no inference knew
    assert bodies.output_bytes == {"y": (2 * N * N * 4, "float")}
    g = import_onnx(model).graph  # here OpenVINO's upper bound sizes it first, the same
    assert int(g.tensor_bytes[g.tensor_names.index("y")]) == 2 * N * N * 4
    result = optimize_model(model, time_limit=2, warm_up=False)
    onnx.checker.check_model(result.model, full_check=True)
    for cond in (True, False):
        assert_bitwise_equal(_run(model, cond), _run(result.model, cond))


def _if_of(branch) -> onnx.ModelProto:
    """An ``If`` whose two branches ``branch(prefix)`` makes; its outputs typed as the branch's."""
    then = branch("t_")
    outs = [onnx.ValueInfoProto() for _ in then.output]
    for out, declared in zip(outs, then.output):
        out.CopyFrom(declared)
        out.name = declared.name[2:]
    node = helper.make_node("If", ["use_cache"], [o.name for o in outs], then_branch=then, else_branch=branch("e_"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N * N]),
                                            helper.make_tensor_value_info("use_cache", TensorProto.BOOL, [])], outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def test_with_in_place_reuse_a_body_with_one_order_saves_nothing() -> None:
    """The input's peak is scored under the same memory model as the result's (it claimed a saving, review)."""
    def chain(p: str) -> onnx.GraphProto:
        nodes = [helper.make_node(op, [src], [dst]) for op, src, dst in
                 (("Neg", "x", p + "a"), ("Relu", p + "a", p + "b"), ("Sigmoid", p + "b", p + "c"),
                  ("Neg", p + "c", p + "y"))]
        return helper.make_graph(nodes, p, [], [helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, [N * N])])

    for inplace in (False, True):
        report = optimize_model(_if_of(chain), time_limit=2, warm_up=False, inplace=inplace).report
        assert report["peak_bytes"]["input"] == report["peak_bytes"]["output"], (inplace, report["peak_bytes"])
        assert report["kept_input_order"] and not any(row["reordered"] for row in report["bodies"])


def test_a_body_kept_in_its_order_does_not_report_the_order_it_dropped() -> None:
    """An output made first, then a large temporary: the lower peak (temporary first) holds more beside the outputs,
    so the op would need more; the body keeps its order, and its row says so."""
    def branch(p: str) -> onnx.GraphProto:
        nodes = [helper.make_node("Neg", ["x"], [p + "y"]),
                 helper.make_node("Concat", ["x", "x", "x"], [p + "t"], axis=0),
                 helper.make_node("ReduceSum", [p + "t"], [p + "s"], keepdims=0)]
        return helper.make_graph(nodes, p, [], [helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, [N * N]),
                                                helper.make_tensor_value_info(p + "s", TensorProto.FLOAT, [])])

    report = optimize_model(_if_of(branch), time_limit=2, warm_up=False).report
    for row in report["bodies"]:
        assert not row["reordered"] and row["method_used"] == "file" and row["optimal"] is False
        peak = row["peak_bytes"]
        assert peak["output"] == peak["input"] and row["reduction"] == 0.0
        assert row["gap"] == (peak["input"] - peak["lower_bound"]) / peak["lower_bound"] > 0
    assert report["peak_bytes"]["output"] == report["peak_bytes"]["input"]
