"""The model a profiler runs: its weights read in and every node named by its stable op name.

Runtimes key per-node timings by node name (ONNX Runtime's profile events, the torch part-runner's
modules), and ONNX allows unnamed nodes and repeated names: named by
:func:`~onnx_sched.importers.onnx.stable_op_names`, every timing keys to exactly one graph op.
"""

from __future__ import annotations

from typing import Any

import onnx

from onnx_sched.importers.onnx import stable_op_names
from onnx_sched.importers.onnx_weights import with_weights

__all__ = ["named_by_op", "profiled_model"]


def profiled_model(imported: Any) -> onnx.ModelProto:
    """``with_weights(imported)``, its nodes named as the graph names its ops (a copy when a name changes)."""
    return named_by_op(with_weights(imported))


def named_by_op(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its nodes named as the graph names its ops (a copy when a name changes): for a runtime that
    reads the weights from the model's files itself (ONNX Runtime, given the import's own model)."""
    names = stable_op_names(model.graph.node)
    if all(n.name == name for n, name in zip(model.graph.node, names)):
        return model
    named = onnx.ModelProto()
    named.CopyFrom(model)
    for node, name in zip(named.graph.node, names):
        node.name = name
    return named
