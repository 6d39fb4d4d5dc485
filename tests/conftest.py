"""Shared test helpers: small ONNX models built in memory, corpus paths, ORT runs."""

from __future__ import annotations

import os
from pathlib import Path

# Each pytest-xdist worker compiles numba kernels into its own cache folder.  With one shared cache, two workers
# compiling the same kernels from a cold cache at once can leave an index entry that points at the other's data
# file; every worker that loads it then crashes in that kernel (seen once in a fresh-clone CI run: segfaults in
# the makespan list kernel on five restarted workers, the same commit passing on the next run).
if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parents[1] / ".numba_cache" /
                                        os.environ["PYTEST_XDIST_WORKER"])

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

#: The corpus beside the repository, else ``$ONNX_SCHED_CORPUS`` (a copy carried elsewhere, as the scripts read it).
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
if not CORPUS.exists():
    CORPUS = Path(os.environ.get("ONNX_SCHED_CORPUS", "/work/shared/corpus"))
CORPUS_ONNX = sorted((CORPUS / "onnx").glob("*.onnx"))
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_ONNX = sorted(LIGHT_DIR.glob("*.onnx"))

#: Python source that makes ``import torch`` fail: the start of a ``python -c`` script that proves
#: the light install (no torch) works.
BLOCK_TORCH = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
sys.meta_path.insert(0, Block())
"""


def branchy_model(branches: int = 3, n: int = 256, ir_version: int = 10) -> onnx.ModelProto:
    """x -> [Relu -> Sigmoid -> ReduceMean] x branches -> Sum of the small means.

    Nodes are in breadth-first file order (all first ops, then all second ops...),
    which keeps every branch's big tensor live at once; depth-first orders keep one.
    """
    nodes = []
    stages = ["Relu", "Sigmoid", "ReduceMean"]
    for s, op in enumerate(stages):
        for b in range(branches):
            src = "x" if s == 0 else f"b{b}_{s - 1}"
            kwargs = {"keepdims": 1} if op == "ReduceMean" else {}
            nodes.append(helper.make_node(op, [src], [f"b{b}_{s}"], name=f"{op}_{b}", **kwargs))
    nodes.append(helper.make_node("Sum", [f"b{b}_{len(stages) - 1}" for b in range(branches)], ["y"], name="sum"))
    graph = helper.make_graph(
        nodes,
        "branchy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def as_branch(model: onnx.ModelProto, prefix: str) -> onnx.GraphProto:
    """``model``'s graph as an ``If`` branch: no inputs (it reads the outer values by name), every tensor it makes
    and every node renamed with ``prefix``."""
    made = {o for n in model.graph.node for o in n.output if o}
    rename = {name: prefix + name for name in made}
    nodes = []
    for n in model.graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(n)
        node.name = prefix + (n.name or n.op_type)
        node.input[:] = [rename.get(x, x) for x in n.input]
        node.output[:] = [rename.get(x, x) for x in n.output]
        nodes.append(node)
    outputs = [helper.make_tensor_value_info(rename.get(o.name, o.name), o.type.tensor_type.elem_type, None)
               for o in model.graph.output]
    return helper.make_graph(nodes, prefix + "branch", [], outputs, list(model.graph.initializer))


def merged_if_model(then_model: onnx.ModelProto, else_model: onnx.ModelProto) -> onnx.ModelProto:
    """One ``If`` on a bool input ``use_cache`` whose branches are two models over the same inputs, as Hugging Face
    Optimum's merged decoders hold the whole decoder in each branch."""
    cond = helper.make_tensor_value_info("use_cache", TensorProto.BOOL, [])
    node = helper.make_node("If", ["use_cache"], [o.name for o in then_model.graph.output], name="merged",
                            then_branch=as_branch(then_model, "t_"), else_branch=as_branch(else_model, "e_"))
    inputs = [*then_model.graph.input, *([cond] if "use_cache" not in {i.name for i in then_model.graph.input} else [])]
    graph = helper.make_graph([node], "merged", inputs, list(then_model.graph.output))
    model = helper.make_model(graph, opset_imports=list(then_model.opset_import))
    model.ir_version = then_model.ir_version
    return model


def random_feeds(session: ort.InferenceSession, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: floats ~N(0,1), integers in {0, 1} (valid ids and masks), bools."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
        t = inp.type
        if "float16" in t:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float16)
        elif "double" in t:
            feeds[inp.name] = rng.standard_normal(shape)
        elif "float" in t:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif "bool" in t:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(bool)
        elif "int32" in t:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(np.int32)
        else:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(np.int64)
    return feeds


def run_ort(model: onnx.ModelProto | str | Path, seed: int = 0) -> list[np.ndarray]:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    so = ort.SessionOptions()
    so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    so.log_severity_level = 3
    session = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    feeds = random_feeds(session, seed)
    # ONNX Runtime 1.19-1.21 hand a graph input that is also a graph output back in the feed's own buffer: copy the
    # outputs while the feeds are alive
    return [o.copy() if isinstance(o, np.ndarray) else o for o in session.run(None, feeds)]


def assert_bitwise_equal(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y, equal_nan=True) if x.dtype.kind in "fc" else np.array_equal(x, y)


@pytest.fixture
def branchy() -> onnx.ModelProto:
    return branchy_model()


def external_data_model(folder: Path, name: str = "m.onnx", location: str = "m.weights") -> Path:
    """Two branches through external weights: x + w1 and x * w2, summed."""
    folder.mkdir(parents=True, exist_ok=True)
    w1 = numpy_helper.from_array(np.linspace(-1, 1, 256, dtype=np.float32), "w1")
    w2 = numpy_helper.from_array(np.linspace(2, 3, 256, dtype=np.float32), "w2")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w1"], ["a"], name="a"), helper.make_node("Mul", ["x", "w2"], ["b"], name="b"),
         helper.make_node("Relu", ["a"], ["c"], name="c"), helper.make_node("Add", ["c", "b"], ["y"], name="y")],
        "ext", [vi("x", onnx.TensorProto.FLOAT, [256])], [vi("y", onnx.TensorProto.FLOAT, [256])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    path = folder / name
    onnx.save(model, str(path), save_as_external_data=True, location=location, size_threshold=0)
    return path


def local_function_model() -> onnx.ModelProto:
    """x [1, 8] -> Mul(2) -> Swish (a model-local function, called twice) -> Add -> y."""
    swish = helper.make_function("local.fn", "Swish", ["t"], ["u"],
                                 [helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Mul", ["t", "s"], ["u"])],
                                 [helper.make_opsetid("", 17)])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Mul", ["x", "two"], ["m"], name="mul"),
             helper.make_node("Swish", ["m"], ["a"], name="swish_a", domain="local.fn"),
             helper.make_node("Swish", ["a"], ["b"], name="swish_b", domain="local.fn"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    model = helper.make_model(helper.make_graph(nodes, "fn", [x], [y], [two]), functions=[swish],
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local.fn", 1)])
    model.ir_version = 10
    return model
