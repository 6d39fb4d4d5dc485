"""The model a profiler runs: its weights read in and every node named by its stable op name.

Runtimes key per-node timings by node name (ONNX Runtime's profile events, the torch part-runner's
modules), and ONNX allows unnamed nodes and repeated names: named by
:func:`~onnx_sched.importers.onnx.stable_op_names`, every timing keys to exactly one graph op.

A call of a model-local function is one graph op, but ONNX Runtime inlines it and times the body's
nodes under names of its own (``Sigmoid_6``), with nothing that leads back to the call.
:func:`inline_calls` inlines the calls first and names each body node after its call, so the body's
times add up to the call's op.
"""

from __future__ import annotations

from typing import Any

import onnx

from onnx_sched.importers.onnx import stable_op_names
from onnx_sched.importers.onnx_weights import with_weights

__all__ = ["inline_calls", "profiled_model"]


def profiled_model(imported: Any) -> onnx.ModelProto:
    """``with_weights(imported)``, its nodes named as the graph names its ops (a copy when a name changes)."""
    model = with_weights(imported)
    names = stable_op_names(model.graph.node)
    if all(n.name == name for n, name in zip(model.graph.node, names)):
        return model
    named = onnx.ModelProto()
    named.CopyFrom(model)
    for node, name in zip(named.graph.node, names):
        node.name = name
    return named


def inline_calls(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]]:
    """``(model with its local functions inlined, body node name -> the calling node's name)``; ``model``
    itself and ``{}`` when it has no local functions.  Body nodes are named ``<call>/<k>``.

    >>> from onnx import helper, TensorProto
    >>> fn = helper.make_function("local", "Swish", ["t"], ["u"], [helper.make_node("Sigmoid", ["t"], ["s"]),
    ...                           helper.make_node("Mul", ["t", "s"], ["u"])], [helper.make_opsetid("", 17)])
    >>> vi = helper.make_tensor_value_info
    >>> g = helper.make_graph([helper.make_node("Swish", ["x"], ["y"], name="act", domain="local")], "g",
    ...                       [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    >>> m = helper.make_model(g, functions=[fn], opset_imports=[helper.make_opsetid("", 17),
    ...                       helper.make_opsetid("local", 1)])
    >>> inlined, owner = inline_calls(m)
    >>> [n.name for n in inlined.graph.node], owner
    (['act/0', 'act/1'], {'act/0': 'act', 'act/1': 'act'})
    """
    if not model.functions:
        return model, {}
    import onnx.inliner

    functions = {(f.domain, f.name): f for f in model.functions}

    def expanded(node: onnx.NodeProto) -> int:  # top-level nodes a node becomes (nested calls inlined too)
        body = functions.get((node.domain, node.op_type))
        return 1 if body is None else sum(expanded(n) for n in body.node)

    inlined = onnx.inliner.inline_local_functions(model)
    owner: dict[str, str] = {}
    at = 0
    for node in model.graph.node:
        count = expanded(node)
        if (node.domain, node.op_type) in functions:
            for k, body in enumerate(inlined.graph.node[at:at + count]):
                body.name = f"{node.name}/{k}"
                owner[body.name] = node.name
        at += count
    if at != len(inlined.graph.node):
        raise ValueError(f"inlining the local functions gave {len(inlined.graph.node)} nodes, expected {at}")
    return inlined, owner
