"""Inline a model's local functions, each body node named after the call it came from.

A call of a model-local function is one op of the graph onnx-sched schedules, but runtimes see its
body: ONNX Runtime inlines the call and profiles the body's nodes under names of its own
(``Sigmoid_6``), onnx2torch converts no calls at all, OpenVINO's frontend reads none.
:func:`inline_calls` inlines them first (``onnx.inliner``) and names the k-th body node of call
``c`` ``c/k``, with a map back to ``c``: per-node timings add up to the call's op, and OpenVINO's
``<node>/<suffix>`` names lead back to it too.
"""

from __future__ import annotations

import onnx
import onnx.inliner

__all__ = ["inline_calls"]


def inline_calls(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]]:
    """``(model with its local functions inlined, body node name -> the call's op name)``; ``model``
    itself and ``{}`` when it has no local functions.  Body nodes are named ``<call>/<k>``, the call
    named as the graph names its op (:func:`~onnx_sched.importers.onnx.stable_op_names`: unnamed or
    repeated node names made unique).

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
    functions = {(f.domain, f.name): f for f in model.functions}

    def expanded(node: onnx.NodeProto) -> int:  # top-level nodes a node becomes (nested calls inlined too)
        body = functions.get((node.domain, node.op_type))
        return 1 if body is None else sum(expanded(n) for n in body.node)

    from onnx_sched.importers.onnx import stable_op_names

    inlined = onnx.inliner.inline_local_functions(model)
    owner: dict[str, str] = {}
    at = 0
    for node, call in zip(model.graph.node, stable_op_names(model.graph.node)):  # the graph's op names
        count = expanded(node)
        if (node.domain, node.op_type) in functions:
            for k, body in enumerate(inlined.graph.node[at:at + count]):
                body.name = f"{call}/{k}"
                owner[body.name] = call
        at += count
    if at != len(inlined.graph.node):
        raise ValueError(f"inlining the local functions gave {len(inlined.graph.node)} nodes, expected {at}")
    return inlined, owner
