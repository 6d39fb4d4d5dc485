"""Learned encoders on large graphs: stopped at the time limit (``timed_run``) and the attention mask's
``Where`` in arithmetic form (``mask_rewrite``), with the same outputs bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.cost import makespan as ms
from onnx_sched.dag import is_topological_order
from onnx_sched.deadline import Deadline
from onnx_sched.errors import TimeLimitError
from onnx_sched.machines import identical_devices
from onnx_sched.models.inference.features import relation_matrix
from onnx_sched.models.inference.mask_rewrite import arithmetic_where
from onnx_sched.models.inference.timed_run import run_by
from onnx_sched.models.inference.topoformer_onnx import DEFAULT_CHECKPOINT, PriorityModel
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.synth.layered import layered_graph


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _where_model(a: float, b: float, y_input: bool = False) -> onnx.ModelProto:
    """``Where(c, a, b)`` over a bool vector, ``b`` a graph input when ``y_input``."""
    inits = [numpy_helper.from_array(np.float32(a), "a")]
    inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, ["n"])]
    if y_input:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, []))
    else:
        inits.append(numpy_helper.from_array(np.float32(b), "b"))
    graph = helper.make_graph([helper.make_node("Where", ["c", "a", "b"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_scalar_where_becomes_arithmetic_with_the_same_bits() -> None:
    model = _where_model(0.0, -1e9)
    fast = arithmetic_where(model)
    onnx.checker.check_model(fast, full_check=True)
    assert [n.op_type for n in fast.graph.node] == ["Cast", "Mul", "Add"]
    c = np.random.default_rng(0).random(1000) < 0.5
    want = _session(model).run(None, {"c": c})[0]
    got = _session(fast).run(None, {"c": c})[0]
    assert got.tobytes() == want.tobytes() and set(np.unique(got)) == {np.float32(0.0), np.float32(-1e9)}


@pytest.mark.parametrize(("a", "b", "y_input"), [(0.1, 1e9, False), (0.0, float("-inf"), False), (0.0, 0.0, True)])
def test_where_is_left_alone_unless_the_arithmetic_is_exact(a: float, b: float, y_input: bool) -> None:
    """(0.1 - 1e9) + 1e9 is not 0.1 in float32; -inf gives nan; a graph input is not a constant."""
    model = _where_model(a, b, y_input)
    assert arithmetic_where(model) is model


@pytest.mark.parametrize("checkpoint", ["topoformer_peakmem", "sampler_makespan"])
def test_shipped_encoders_give_the_same_priorities_after_the_rewrite(checkpoint: str) -> None:
    path = DEFAULT_CHECKPOINT.parent / f"{checkpoint}.onnx"
    proto = onnx.load(path)
    fast = arithmetic_where(proto)
    assert sum(n.op_type == "Where" for n in fast.graph.node) < sum(n.op_type == "Where" for n in proto.graph.node)
    width = PriorityModel.load(path).session.get_inputs()[0].shape[1]
    g = layered_graph(300, 3)
    feeds = {"x": np.random.default_rng(1).random((g.n_ops, width), dtype=np.float32), "rel": relation_matrix(g)}
    assert _session(fast).run(None, feeds)[0].tobytes() == _session(proto).run(None, feeds)[0].tobytes()


def _slow_model(steps: int = 400, size: int = 256) -> onnx.ModelProto:
    """A chain of ``steps`` MatMuls: long enough to be stopped between nodes, small in memory."""
    w = numpy_helper.from_array(np.eye(size, dtype=np.float32), "w")
    nodes = [helper.make_node("MatMul", [f"h{i}", "w"], [f"h{i + 1}"]) for i in range(steps)]
    graph = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [size, size])],
                              [helper.make_tensor_value_info(f"h{steps}", TensorProto.FLOAT, [size, size])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_a_run_past_its_deadline_is_stopped_and_the_session_stays_usable() -> None:
    session = _session(_slow_model())
    feeds = {"h0": np.ones((256, 256), np.float32)}
    with pytest.raises(TimeLimitError, match="the encoder over 7 ops did not finish"):
        run_by(session, None, feeds, Deadline(1e-3), "learned", 7)
    with pytest.raises(TimeLimitError, match="no time to run"):
        run_by(session, None, feeds, Deadline(-1.0), "learned", 7)
    (out,) = run_by(session, None, feeds, None, "learned", 7)  # no deadline: a full run after a stopped one
    assert np.array_equal(out, feeds["h0"])


def test_learned_passes_stop_their_encoder_at_the_limit_and_auto_goes_on() -> None:
    g = layered_graph(120, 2)
    with pytest.raises(TimeLimitError, match="learned: no time to run the encoder over 120 ops"):
        get_pass("learned", "peak-mem")(g, PassContext(options={"encoder_seconds": 1e-9}))
    problem = ms.makespan_problem(g, identical_devices(2), np.ones(g.n_ops))
    with pytest.raises(TimeLimitError):
        get_pass("learned", "makespan")(g, PassContext(time_limit=1e-9, problem=problem))
    # gflownet: no trajectory can start, so the better of its references is the result
    s = get_pass("gflownet", "makespan")(g, PassContext(time_limit=1e-9, problem=problem))
    assert s.info["encoder"].startswith("gflownet: no time to run") and s.info["candidates_generated"] == 0
    assert s.info["chosen"] in ("no-split", "list-cp") and s.info["target"]["proxy_best_speedup"] is None


def test_auto_drops_a_learned_candidate_whose_encoder_is_stopped(monkeypatch) -> None:
    from onnx_sched.passes.order import auto

    g = layered_graph(120, 2)
    monkeypatch.setattr(auto, "ENCODER_SHARE", 1e-12)
    s = get_pass("auto", "peak-mem")(g, PassContext(time_limit=2.0))
    assert s.info["learned"].startswith("unavailable: learned: no time to run") and is_topological_order(g, s.order)
