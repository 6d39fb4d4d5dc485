"""Rewrite ``Where(cond, a, b)`` with constant scalars ``a``, ``b`` into ``Cast(cond) * (a - b) + b``.

The Topoformer encoders build their attention mask as ``where(allowed, 0, -1e9)``
over every (head, op, op) triple, and ONNX Runtime's CPU ``Where`` broadcasts its
two scalars element by element, slower than ``Cast``, ``Mul`` and ``Add`` over the
same tensor.  Measured on the peak-memory encoder (docs/results.md 10.1): a 3,008-op
graph's first forward pass 0.76-0.86 -> 0.53-0.59 s and peak RSS 2.12 -> 1.86 GB;
8,369 ops: peak RSS 16.2 -> 13.0 GB, time within run-to-run noise (5-8 s).  The
arithmetic form gives the same bits whenever
``(a - b) + b == a`` and ``0 * (a - b) + b == b`` hold exactly in the output type
(true for ``0`` and ``-1e9`` in float32), so the rewrite applies only then, to the
ONNX model in memory when a checkpoint is loaded: shipped and user-trained exports
alike, no retraining and no change on disk.

Example:
    >>> import numpy as np, onnx
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Where", ["c", "zero", "neg"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("c", TensorProto.BOOL, ["n"])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
    ...     [numpy_helper.from_array(np.float32(0.0), "zero"), numpy_helper.from_array(np.float32(-1e9), "neg")])
    >>> fast = arithmetic_where(helper.make_model(graph))
    >>> [n.op_type for n in fast.graph.node]
    ['Cast', 'Mul', 'Add']
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["arithmetic_where"]


def _scalar_constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Scalar (or one-element) floating-point constants of ``graph`` by value name."""
    tensors = {init.name: init for init in graph.initializer}
    tensors.update({node.output[0]: node.attribute[0].t for node in graph.node
                    if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value"})
    out = {name: numpy_helper.to_array(t) for name, t in tensors.items() if int(np.prod(t.dims)) == 1}  # not weights
    return {k: v for k, v in out.items() if np.issubdtype(v.dtype, np.floating)}


def _exact(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``c * (a - b) + b`` equals ``where(c, a, b)`` bit for bit for ``c`` in {0, 1}."""
    a, b = a.reshape(()), b.reshape(())
    if a.dtype != b.dtype or not (np.isfinite(a) and np.isfinite(b)):
        return False
    with np.errstate(all="ignore"):
        step = a - b
        one, zero = np.asarray(1, a.dtype) * step + b, np.asarray(0, a.dtype) * step + b
    return bool(np.isfinite(step) and one.tobytes() == a.tobytes() and zero.tobytes() == b.tobytes())


def arithmetic_where(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with every main-graph ``Where`` over two exact scalar constants in arithmetic form
    (see module docstring); the model itself when there is none."""
    consts = _scalar_constants(model.graph)
    hits = [i for i, node in enumerate(model.graph.node)
            if node.op_type == "Where" and node.input[1] in consts and node.input[2] in consts
            and _exact(consts[node.input[1]], consts[node.input[2]])]
    if not hits:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = list(out.graph.node)
    del out.graph.node[:]
    for i, node in enumerate(nodes):
        if i not in hits:
            out.graph.node.append(node)
            continue
        cond, a_name, b_name = node.input
        a, b = consts[a_name].reshape(()), consts[b_name].reshape(())
        tag = f"{node.name or node.output[0]}/arith"
        step = numpy_helper.from_array(np.asarray(a - b, a.dtype), f"{tag}/step")
        base = numpy_helper.from_array(np.asarray(b, a.dtype), f"{tag}/base")
        out.graph.initializer.extend([step, base])
        out.graph.node.extend([
            helper.make_node("Cast", [cond], [f"{tag}/c"], name=f"{tag}/Cast",
                             to=helper.np_dtype_to_tensor_dtype(a.dtype)),
            helper.make_node("Mul", [f"{tag}/c", step.name], [f"{tag}/m"], name=f"{tag}/Mul"),
            helper.make_node("Add", [f"{tag}/m", base.name], [node.output[0]], name=f"{tag}/Add"),
        ])
    used = {name for node in out.graph.node for name in node.input} | {o.name for o in out.graph.output}
    kept = [node for node in out.graph.node if node.op_type != "Constant" or node.output[0] in used]
    kept_inits = [init for init in out.graph.initializer if init.name in used]
    del out.graph.node[:], out.graph.initializer[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(kept_inits)
    return out
