"""Write a generated DAG as a runnable ONNX model whose tensors have the graph's sizes.

:func:`graph_to_onnx` ``(graph, *, name=None) -> onnx.ModelProto`` (IR version 10,
opset 17; passes ``onnx.checker`` with full shape inference and runs in ONNX Runtime).
:func:`save_onnx` ``(graph, path)`` writes it atomically.

Mapping (one ONNX ``Einsum`` per op).  ``Einsum`` is the one standard op that
takes any number of inputs of unrelated shapes and yields an output of a shape
chosen independently of them: every tensor is a 1-D float32 vector of
``bytes / 4`` elements, and op ``i`` with inputs ``x_1..x_k`` and output ``y`` of
``e`` elements becomes

    y = Einsum(x_1, ..., x_k, w_y; equation="a,b,...,z->z")

where each input gets its own label (even inputs of equal length: a label
shared by two inputs would make ONNX Runtime build outer products) and ``w_y`` is a zero vector of ``e`` elements made by
``ConstantOfShape`` from a constant shape.  Importers fold such constants into
*weight* tensors (kind WEIGHT: resident, not activation memory), so re-importing
gives the same compute ops, the same op-to-op edges and the same activation
sizes; each op gains one weight input ``{tensor}__w`` of its output's size.
Every value is zero.

Details:

* Ops without inputs read a 1-element graph input ``onnx_sched_x`` (4 bytes, an
  INPUT tensor after import) so that they are real compute ops, not constants.
* Sinks (activations nobody reads) become graph outputs, as do OUTPUT tensors, so
  neither ONNX Runtime nor an importer can drop them.  After import they are
  OUTPUT tensors (kept to the end), whereas generated graphs free a sink's output
  at once (paper 000 eq. 3): the re-imported peak memory can only be higher, by
  at most the sinks' bytes.
* Graph INPUT tensors become graph inputs; WEIGHT tensors become
  ``ConstantOfShape`` nodes of their size.
* Einsum has 52 labels (``a-zA-Z``).  An op with more than 51 inputs gets
  helper Einsum nodes ``{op}__part{j}``, each reducing up to 50 of its inputs
  (plus ``onnx_sched_x``) to a 1-element vector read by the op; only then does
  the re-imported graph have more ops (the helpers, 4-byte outputs).  Layered
  graphs up to 2000 ops rarely need them; ER graphs with ~1000 nodes do (ER's
  last nodes have ~0.05 n predecessors).
* Transient parameter bytes (``Graph.op_param_bytes``, paper 000 eq. 15) have no
  ONNX counterpart; they are stored in ``metadata_props["onnx_sched.op_param_bytes"]``
  (JSON object: op name -> bytes, only when some are non-zero) together with ``metadata_props["onnx_sched.synth"]``
  (JSON of the graph's scalar metadata: family, seed, ...).
* Every op must have exactly one output tensor and every size must be a
  multiple of 4 bytes (``ValueError`` otherwise); the generators guarantee both.
"""

from __future__ import annotations

import json
import os
import string
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_sched.dag import kahn_order
from onnx_sched.graph import Graph, TensorKind

__all__ = ["IR_VERSION", "OPSET", "SOURCE_INPUT", "graph_to_onnx", "save_onnx"]

IR_VERSION = 10
OPSET = 17
SOURCE_INPUT = "onnx_sched_x"
_LABELS = string.ascii_lowercase + string.ascii_uppercase
_MAX_DIRECT = len(_LABELS) - 1  # data inputs of one op's Einsum (+ its weight)
_CHUNK = len(_LABELS) - 2  # inputs one helper Einsum reduces (+ the 1-element source input)


def _elements(graph: Graph, t: int) -> int:
    b = int(graph.tensor_bytes[t])
    if b % 4:
        raise ValueError(
            f"graph_to_onnx: tensor {graph.tensor_names[t]!r} has {b} bytes, not a multiple of 4 (float32)"
        )
    return b // 4


def _einsum(inputs: list[str], output: str, name: str) -> onnx.NodeProto:
    """``output = Einsum(inputs)``: every input has its own label and the output
    has the last input's label, so every other label is summed out of its own
    input before any product (ONNX Runtime never forms an outer product)."""
    if len(inputs) > len(_LABELS):
        raise ValueError(f"graph_to_onnx: {name}: {len(inputs)} Einsum inputs, at most {len(_LABELS)}")
    labels = _LABELS[: len(inputs)]
    return helper.make_node(
        "Einsum", inputs, [output], name=name, equation=",".join(labels) + "->" + labels[-1]
    )


def _scalar_metadata(meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in dict(meta or {}).items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (np.integer, np.floating)):
            out[k] = v.item()
        elif isinstance(v, dict) and all(isinstance(x, (bool, int, float, str)) for x in v.values()):
            out[k] = dict(v)
        elif isinstance(v, (tuple, list)) and len(v) <= 4096 and all(isinstance(x, (int, float)) for x in v):
            out[k] = list(v)
    return out


def graph_to_onnx(graph: Graph, *, name: str | None = None) -> onnx.ModelProto:
    """The ONNX model of ``graph`` (see module docstring for the mapping)."""
    n_ops = graph.n_ops
    for op in range(n_ops):
        if len(graph.op_outputs.row(op)) != 1:
            raise ValueError(
                f"graph_to_onnx: op {graph.op_names[op]!r} has {len(graph.op_outputs.row(op))} outputs; "
                "only single-output ops can be written"
            )
    tname = graph.tensor_names
    length = [_elements(graph, t) for t in range(graph.n_tensors)]
    kinds = graph.tensor_kind
    consumers = graph.tensor_consumers.lengths()

    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    value_info: list[onnx.ValueInfoProto] = []
    inputs = [helper.make_tensor_value_info(SOURCE_INPUT, TensorProto.FLOAT, [1])]
    outputs: list[onnx.ValueInfoProto] = []

    def constant_vector(tensor: str, n_el: int, node_name: str) -> None:
        shape_name = f"{tensor}__shape"
        inits.append(numpy_helper.from_array(np.asarray([n_el], dtype=np.int64), shape_name))
        nodes.append(
            helper.make_node(
                "ConstantOfShape",
                [shape_name],
                [tensor],
                name=node_name,
                value=helper.make_tensor("value", TensorProto.FLOAT, [1], [0.0]),
            )
        )
        value_info.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT, [n_el]))

    for t in range(graph.n_tensors):
        if kinds[t] == TensorKind.INPUT:
            inputs.append(helper.make_tensor_value_info(tname[t], TensorProto.FLOAT, [length[t]]))
        elif kinds[t] == TensorKind.WEIGHT:
            constant_vector(tname[t], length[t], f"{tname[t]}__const")

    for op in kahn_order(graph).tolist():
        out_t = int(graph.op_outputs.row(op)[0])
        out_name, out_len = tname[out_t], length[out_t]
        ins = list(dict.fromkeys(int(t) for t in graph.op_inputs.row(op)))
        in_names = [tname[t] for t in ins] or [SOURCE_INPUT]
        k = len(in_names)
        if k > _MAX_DIRECT:
            n_help = -(-(k - _MAX_DIRECT) // (_CHUNK - 1))
            direct, rest = in_names[: _MAX_DIRECT - n_help], in_names[_MAX_DIRECT - n_help :]
            for j in range(n_help):
                part = f"{out_name}__part{j}"
                chunk = rest[j * _CHUNK : (j + 1) * _CHUNK]
                nodes.append(_einsum(chunk + [SOURCE_INPUT], part, f"{graph.op_names[op]}__part{j}"))
                value_info.append(helper.make_tensor_value_info(part, TensorProto.FLOAT, [1]))
                direct.append(part)
            in_names = direct
        w = f"{out_name}__w"
        constant_vector(w, out_len, f"{w}__const")
        nodes.append(_einsum(in_names + [w], out_name, graph.op_names[op]))
        info = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [out_len])
        if kinds[out_t] == TensorKind.OUTPUT or consumers[out_t] == 0:
            outputs.append(info)
        else:
            value_info.append(info)

    onnx_graph = helper.make_graph(
        nodes, name or graph.name, inputs, outputs, initializer=inits, value_info=value_info
    )
    model = helper.make_model(
        onnx_graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="onnx-sched.synth",
    )
    meta = {"onnx_sched.synth": json.dumps(_scalar_metadata(graph.metadata), sort_keys=True)}
    if graph.op_param_bytes is not None and graph.op_param_bytes.any():
        meta["onnx_sched.op_param_bytes"] = json.dumps(
            {graph.op_names[i]: int(b) for i, b in enumerate(graph.op_param_bytes.tolist())}
        )
    helper.set_model_props(model, meta)
    return model


def save_onnx(graph: Graph, path: str | os.PathLike[str]) -> Path:
    """Write ``graph_to_onnx(graph)`` to ``path`` atomically (temp file + ``os.replace``)."""
    from onnx_sched.synth.dataset import atomic_write_bytes

    return atomic_write_bytes(path, graph_to_onnx(graph).SerializeToString())
