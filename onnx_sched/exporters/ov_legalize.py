"""Legalize an ONNX model for OpenVINO's ONNX frontend, right before it reads it.

OpenVINO's frontend rejects a few ONNX nodes that ONNX Runtime (and the framework
that exported them) run fine.  :func:`legalize_for_openvino` rewrites such nodes,
and only where the rewrite provably computes what ONNX Runtime computes; any other
node is left alone, so OpenVINO's own error still surfaces (see
:func:`onnx_sched.exporters.openvino.read_onnx_into_openvino`).

Rewrites (top-level graph only):

* Model-local functions (``ModelProto.functions``, e.g. a custom block exported by
  ``torch.onnx`` or onnxscript) are inlined: OpenVINO's frontend has no converter
  for a call of one ("To facilitate the conversion of unsupported operations ...").
  :func:`~onnx_sched.onnx_inline.inline_calls` replaces each call by the function's
  body, so the graph computes the same values, and names the body's nodes
  ``<call>/<k>``: :func:`~onnx_sched.exporters.openvino.map_ov_to_graph_ops` maps
  every one of them to the op the call was.

* ``AveragePool`` whose window covers its whole (static) spatial input, from
  position 0 with no padding, producing one output per spatial axis ->
  ``GlobalAveragePool`` (same name, inputs and outputs).  PyTorch's
  ``nn.AvgPool2d(k, ceil_mode=True)`` used as a global pool exports this way: the
  transformers EfficientNet pooler is an AveragePool with kernel = stride = 1280
  on a 7x7 input, which OpenVINO refuses ("Kernel ... larger than the data shape",
  "Conversion is failed for: AveragePool-17").  Per spatial axis with input size
  S, kernel k, stride s, it fires when

  - ``k == S``: the one window is exactly the input, in floor and ceil mode; or
  - ``S < k < S + s`` with ``ceil_mode = 1`` and explicit zero pads
    (``auto_pad`` NOTSET): ceil mode gives one output, whose window is clipped
    to the input, and ONNX Runtime (like PyTorch) divides by the clipped window
    size, S, even with ``count_include_pad = 1`` (the overhang is not padding;
    onnx's reference evaluator, which mishandles this case, returns NaN or
    other values here).

  It never fires with non-zero pads, ``SAME_*`` auto-padding, dilations other
  than 1, unknown spatial sizes, or ``k > S`` in floor mode (an empty output by
  the ONNX shape formula; ONNX Runtime makes one and, with
  ``count_include_pad = 1``, divides by the full kernel size, not S).
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import helper, shape_inference

from onnx_sched.onnx_inline import inline_calls

__all__ = ["average_pool_is_global", "legalize_for_openvino"]


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Tensor name -> dims (None where unknown), from the model's value_info or,
    where that lacks shapes, from onnx shape inference (skipped if it fails)."""
    def collect(graph: onnx.GraphProto) -> dict[str, list[int | None]]:
        out: dict[str, list[int | None]] = {}
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            tt = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and tt.HasField("shape"):
                out[vi.name] = [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]
        return out

    shapes = collect(model.graph)
    pools = [n.input[0] for n in model.graph.node if n.op_type == "AveragePool" and n.input]
    if all(p in shapes for p in pools):
        return shapes
    try:
        return {**collect(shape_inference.infer_shapes(model).graph), **shapes}
    except Exception:  # noqa: BLE001 - no shapes, no rewrite
        return shapes


def average_pool_is_global(node: onnx.NodeProto, input_shape: Sequence[int | None] | None) -> bool:
    """Whether ``node`` (an AveragePool) computes exactly GlobalAveragePool of an input
    of ``input_shape`` under ONNX Runtime's semantics (rules in the module docstring)."""
    if node.op_type != "AveragePool" or node.domain not in ("", "ai.onnx") or not input_shape:
        return False
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    kernel = list(attrs.get("kernel_shape", []))
    spatial = list(input_shape[2:])
    if len(input_shape) < 3 or len(kernel) != len(spatial) or any(s is None or s <= 0 for s in spatial):
        return False
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if auto_pad not in ("NOTSET", "VALID"):
        return False
    if any(int(p) != 0 for p in attrs.get("pads", [])) or any(int(d) != 1 for d in attrs.get("dilations", [])):
        return False
    strides = list(attrs.get("strides", [1] * len(kernel)))
    ceil = int(attrs.get("ceil_mode", 0)) == 1
    for k, s, stride in zip(kernel, spatial, strides):
        if k == s:
            continue
        if not (ceil and auto_pad == "NOTSET" and s < k < s + stride):
            return False
    return True


def legalize_for_openvino(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the rewrites of the module docstring applied: a new ModelProto
    when something was rewritten, else ``model`` itself (never modified in place)."""
    model = inline_calls(model)[0]
    if not any(n.op_type == "AveragePool" for n in model.graph.node):
        return model
    shapes = _static_shapes(model)
    hits = [i for i, n in enumerate(model.graph.node)
            if n.op_type == "AveragePool" and n.input and average_pool_is_global(n, shapes.get(n.input[0]))]
    if not hits:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i in hits:
        node = out.graph.node[i]
        new = helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output), name=node.name,
                               doc_string=node.doc_string)
        new.metadata_props.extend(node.metadata_props)
        node.CopyFrom(new)
    return out
