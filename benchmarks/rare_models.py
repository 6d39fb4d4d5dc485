"""Valid ONNX models built from the format's rarer parts, for ``unseen_models.py`` / ``unseen_commands.py
--source rare``.

The corpus and onnx's backend test models are mostly plain tensor graphs.  Each model here is small, passes
``onnx.checker``, runs in ONNX Runtime, and uses one part of the format a real model may carry:

* ``sparse_weight``: a sparse initializer (``graph.sparse_initializer``);
* ``local_function``: model-local functions (``model.functions``) called twice;
* ``ir3_weight_inputs``: IR 3, every initializer also listed as a graph input (overridable);
* ``sequence_optional``: a sequence (of unequal elements) and optionals among the graph outputs;
* ``unseeded_random``: ``RandomNormalLike`` / ``RandomUniform`` without a seed;
* ``contrib_ops``: ``com.microsoft`` ops (``FusedMatMul``, ``Gelu``);
* ``ml_tree``: an ``ai.onnx.ml`` ``TreeEnsembleRegressor``;
* ``opset23_rmsnorm``: opset 23's ``RMSNormalization``;
* ``int4_matmul``: ``com.microsoft`` ``MatMulNBits`` (4-bit weights, as onnxruntime-genai writes), symbolic dims;
* ``repeated_outputs``: one tensor listed twice among the outputs, another both read and output;
* ``empty_tensor``: a zero-size tensor on a branch and a scalar output;
* ``half_types``: float16 and bfloat16 casts.

``build(folder)`` writes them and returns ``(path, feeds, extra optimize arguments)`` per model, as
``model_kinds.build`` does.

    python benchmarks/rare_models.py FOLDER    # writes the models, prints their names
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

Built = tuple[onnx.ModelProto, dict[str, np.ndarray], list[str]]


def _weight(name: str, shape: tuple[int, ...], seed: int = 0) -> onnx.TensorProto:
    return nh.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name)


def _x(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _model(nodes: list, inputs: list, outputs: list, inits: list = (), opsets: tuple = (("", 17),),
           ir_version: int = 10, **graph: object) -> onnx.ModelProto:
    model = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits), **graph),
                         opset_imports=[h.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = ir_version
    return model


def _f32(name: str, shape: list) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def sparse_weight() -> Built:
    values = nh.from_array(np.array([1.5, -2.0, 3.0], np.float32), "w")
    w = h.make_sparse_tensor(values, nh.from_array(np.array([0, 5, 63], np.int64), "w_index"), [8, 8])
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"], name="mm"), h.make_node("Relu", ["a"], ["r"], name="relu"),
             h.make_node("Add", ["r", "w"], ["y"], name="add")]
    return _model(nodes, [_f32("x", [8, 8])], [_f32("y", [8, 8])], sparse_initializer=[w]), {"x": _x((8, 8))}, []


def local_function() -> Built:
    fn = h.make_function("local", "AddRelu", ["a", "b"], ["y"],
                         [h.make_node("Add", ["a", "b"], ["s"]), h.make_node("Relu", ["s"], ["y"])],
                         [h.make_opsetid("", 17)])
    nodes = [h.make_node("AddRelu", ["x", "w"], ["t1"], domain="local", name="f1"),
             h.make_node("Sigmoid", ["x"], ["t2"], name="sig"),
             h.make_node("AddRelu", ["t1", "t2"], ["t3"], domain="local", name="f2"),
             h.make_node("Mul", ["t3", "t1"], ["y"], name="mul")]
    model = _model(nodes, [_f32("x", [4, 64])], [_f32("y", [4, 64])], [_weight("w", (4, 64))],
                   opsets=(("", 17), ("local", 1)))
    model.functions.append(fn)
    return model, {"x": _x((4, 64))}, []


def ir3_weight_inputs() -> Built:
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"], name="mm"), h.make_node("Relu", ["a"], ["r"], name="relu"),
             h.make_node("Add", ["r", "b"], ["y"], name="add")]
    inits = [_weight("w", (8, 8)), _weight("b", (4, 8), 2)]
    return (_model(nodes, [_f32("x", [4, 8]), _f32("w", [8, 8]), _f32("b", [4, 8])], [_f32("y", [4, 8])], inits,
                   opsets=(("", 9),), ir_version=3), {"x": _x((4, 8))}, [])


def sequence_optional() -> Built:
    optional = h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [4, 3]))
    nodes = [h.make_node("Mul", ["x", "x"], ["xx"], name="square"),
             h.make_node("SplitToSequence", ["xx", "sizes"], ["rows"], axis=0, name="split"),  # rows of 1 and 3
             h.make_node("SequenceLength", ["rows"], ["n"], name="length"),
             h.make_node("Optional", ["x"], ["some"], name="wrap"),
             h.make_node("OptionalGetElement", ["some"], ["got"], name="unwrap"),
             h.make_node("Optional", [], ["none"], type=h.make_tensor_type_proto(T.FLOAT, [4, 3]), name="empty"),
             h.make_node("Relu", ["got"], ["y"], name="relu")]
    outputs = [_f32("y", [4, 3]), h.make_tensor_sequence_value_info("rows", T.FLOAT, None),
               h.make_tensor_value_info("n", T.INT64, []), h.make_value_info("none", optional)]
    sizes = nh.from_array(np.array([1, 3], np.int64), "sizes")
    return _model(nodes, [_f32("x", [4, 3])], outputs, [sizes], opsets=(("", 18),)), {"x": _x((4, 3))}, []


def unseeded_random() -> Built:
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             h.make_node("RandomNormalLike", ["m"], ["noise"], name="noise"),
             h.make_node("Add", ["m", "noise"], ["noisy"], name="add"),
             h.make_node("Relu", ["m"], ["clean"], name="relu"),
             h.make_node("RandomUniform", [], ["u"], shape=[4, 16], name="uniform"),
             h.make_node("Mul", ["u", "clean"], ["scaled"], name="mul")]
    outputs = [_f32(n, [4, 16]) for n in ("noisy", "clean", "scaled")]
    return _model(nodes, [_f32("x", [4, 16])], outputs, [_weight("w", (16, 16))]), {"x": _x((4, 16))}, []


def contrib_ops() -> Built:
    nodes = [h.make_node("FusedMatMul", ["x", "w"], ["a"], domain="com.microsoft", alpha=0.5, name="fmm"),
             h.make_node("Gelu", ["a"], ["g"], domain="com.microsoft", name="gelu"),
             h.make_node("FusedMatMul", ["x", "v"], ["b"], domain="com.microsoft", name="fmm2"),
             h.make_node("Add", ["g", "b"], ["y"], name="add")]
    return (_model(nodes, [_f32("x", [8, 16])], [_f32("y", [8, 16])], [_weight("w", (16, 16)), _weight("v", (16, 16))],
                   opsets=(("", 17), ("com.microsoft", 1))), {"x": _x((8, 16))}, [])


def ml_tree() -> Built:
    tree = h.make_node("TreeEnsembleRegressor", ["x"], ["t"], domain="ai.onnx.ml", n_targets=1, name="tree",
                       nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                       nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.0, 0.0, 0.0],
                       nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
                       target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0])
    nodes = [tree, h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("ReduceSum", ["r"], ["s"], keepdims=1, name="sum"), h.make_node("Add", ["t", "s"], ["y"])]
    return (_model(nodes, [_f32("x", [8, 4])], [_f32("y", [8, 1])], opsets=(("", 17), ("ai.onnx.ml", 3))),
            {"x": _x((8, 4))}, [])


def opset23_rmsnorm() -> Built:
    nodes = [h.make_node("RMSNormalization", ["x", "scale"], ["n"], axis=-1, name="rms"),
             h.make_node("MatMul", ["n", "w"], ["m"], name="mm"), h.make_node("Relu", ["m"], ["y"], name="relu")]
    return (_model(nodes, [_f32("x", [2, 8, 16])], [_f32("y", [2, 8, 16])], [_weight("scale", (16,)),
                                                                                _weight("w", (16, 16))],
                   opsets=(("", 23),)), {"x": _x((2, 8, 16))}, [])


def int4_matmul() -> Built:
    k, n, block = 64, 32, 32
    rng = np.random.default_rng(0)
    packed = [nh.from_array(rng.integers(0, 255, (n, k // block, block // 2), dtype=np.uint8), name)
              for name in ("q1", "q2")]
    scales = nh.from_array(rng.random(n * k // block).astype(np.float32), "scales")
    nodes = [h.make_node("MatMulNBits", ["x", q, "scales"], [o], domain="com.microsoft", K=k, N=n, bits=4,
                         block_size=block, name=f"mm_{o}") for q, o in (("q1", "a"), ("q2", "b"))]
    nodes += [h.make_node("Relu", ["a"], ["r"], name="relu"), h.make_node("Mul", ["r", "b"], ["y"], name="mul")]
    model = _model(nodes, [_f32("x", ["batch", "seq", k])], [_f32("y", ["batch", "seq", n])], [*packed, scales],
                   opsets=(("", 17), ("com.microsoft", 1)))
    return model, {"x": _x((1, 16, k))}, ["--dim", "batch=1", "--dim", "seq=16"]


def repeated_outputs() -> Built:
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Sigmoid", ["r"], ["s"], name="sig")]
    return _model(nodes, [_f32("x", [8])], [_f32("s", [8]), _f32("s", [8]), _f32("r", [8])]), {"x": _x((8,))}, []


def empty_tensor() -> Built:
    starts = nh.from_array(np.array([3], np.int64), "at")
    nodes = [h.make_node("Slice", ["x", "at", "at"], ["empty"], name="slice"),
             h.make_node("Relu", ["empty"], ["er"], name="relu"),
             h.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             h.make_node("Mul", ["x", "s"], ["xs"], name="mul"),
             h.make_node("Concat", ["xs", "er"], ["y"], axis=0, name="concat")]
    return (_model(nodes, [_f32("x", [8, 4])], [_f32("y", [8, 4]), _f32("s", [])], [starts]),
            {"x": _x((8, 4))}, [])


def half_types() -> Built:
    nodes = [h.make_node("Cast", ["x"], ["h"], to=T.FLOAT16, name="to_half"),
             h.make_node("Relu", ["h"], ["hr"], name="relu"),
             h.make_node("Cast", ["hr"], ["b"], to=T.BFLOAT16, name="to_bf16"),
             h.make_node("Cast", ["b"], ["f"], to=T.FLOAT, name="to_float"),
             h.make_node("Add", ["f", "x"], ["y"], name="add")]
    return _model(nodes, [_f32("x", [64, 64])], [_f32("y", [64, 64])]), {"x": _x((64, 64))}, []


RARE: dict[str, Callable[[], Built]] = {f.__name__: f for f in (
    sparse_weight, local_function, ir3_weight_inputs, sequence_optional, unseeded_random, contrib_ops, ml_tree,
    opset23_rmsnorm, int4_matmul, repeated_outputs, empty_tensor, half_types)}


def build(out: Path) -> list[tuple[Path, dict[str, np.ndarray], list[str]]]:
    """Write every model of :data:`RARE` to ``out`` (checked first); ``(path, feeds, extra arguments)`` each."""
    import onnxruntime as ort

    out.mkdir(parents=True, exist_ok=True)
    built = []
    for name, make in RARE.items():
        model, feeds, extra = make()
        onnx.checker.check_model(model)
        path = out / f"{name}.onnx"
        onnx.save(model, path)
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)  # it runs
        built.append((path, feeds, extra))
    return built


if __name__ == "__main__":
    for path, _, _ in build(Path(sys.argv[1] if len(sys.argv) > 1 else "rare_models")):
        print(path)
