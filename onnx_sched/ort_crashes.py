"""Rewrites that keep ONNX Runtime from crashing the process on models onnx's checker accepts.

ONNX Runtime kills the process (SIGSEGV, nothing on stderr) on some valid models, where no one-line error can
be given afterwards.  Every model onnx-sched hands to ONNX Runtime in its own process -- sessions of whole
models and split parts (:mod:`onnx_sched.bench.ort_session`), the probes that run a model for sizes
(:mod:`onnx_sched.importers.observed_shapes`, :mod:`onnx_sched.bench.runtimes.ort_graph`), the per-op sessions
of the device processes -- goes through :func:`for_onnx_runtime` first.  Each rewrite computes the same outputs;
the models onnx-sched writes are never rewritten.

* A ``Split`` with an omitted (``""``) output: ONNX Runtime 1.19 to 1.32 at least (its issue 18601) crash in
  ``run``.  The output gets a name of its own: one more tensor nobody reads.
"""

from __future__ import annotations

import onnx

from onnx_sched.onnx_structure import copy_except

__all__ = ["for_onnx_runtime", "with_split_outputs_named"]


def for_onnx_runtime(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every rewrite of this module applied; ``model`` itself where none applies (never changed)."""
    return with_split_outputs_named(model)


def with_split_outputs_named(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every omitted (``""``) output of a main-graph ``Split`` given a name of its own; ``model``
    itself when it has none, and ``model`` is never changed.

    >>> from onnx import helper
    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8])
    >>> y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])
    >>> split = helper.make_node("Split", ["x"], ["y", ""], axis=1, num_outputs=2)
    >>> opset = [helper.make_opsetid("", 18)]
    >>> model = helper.make_model(helper.make_graph([split], "g", [x], [y]), opset_imports=opset)
    >>> list(with_split_outputs_named(model).graph.node[0].output)
    ['y', 'onnx_sched.split_output_0_1']
    """
    graph = model.graph
    if not any(_is_split(n) and "" in n.output for n in graph.node):
        return model
    named = onnx.ModelProto()
    copy_except(model, named, "graph")
    copy_except(graph, named.graph, "node")
    taken = {o for n in graph.node for o in n.output} | {i.name for i in [*graph.input, *graph.initializer]}
    for j, node in enumerate(graph.node):
        copy = named.graph.node.add()
        copy.CopyFrom(node)
        if not _is_split(node):
            continue
        for k, out in enumerate(node.output):
            if not out:
                name = f"onnx_sched.split_output_{j}_{k}"
                while name in taken:
                    name += "_"
                taken.add(name)
                copy.output[k] = name
    return named


def _is_split(node: onnx.NodeProto) -> bool:
    return node.op_type == "Split" and node.domain in ("", "ai.onnx")
