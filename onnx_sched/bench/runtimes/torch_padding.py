"""Explicit padding for onnx2torch: ``SAME_UPPER`` / ``SAME_LOWER`` auto_pad and asymmetric average pooling.

onnx2torch 1.5.15 refuses ``auto_pad = SAME_*`` on every convolution and pooling
op, and an ``AveragePool`` whose pads differ at the two ends of an axis (e.g.
EfficientNet's TensorFlow-exported convolutions, Inception-v1's last pooling).
Where the input's spatial shape is static, both have exact rewrites:

* ``SAME_*`` becomes the explicit ``pads`` ONNX defines for it (the output has
  ``ceil(in / stride)`` positions; the odd pad goes at the end for ``SAME_UPPER``,
  at the start for ``SAME_LOWER``), which onnx2torch converts (asymmetric ones by
  a padding module in front: zeros for ``Conv``, ``-inf`` for ``MaxPool``);
* an asymmetric ``AveragePool`` becomes ``Pad`` (zeros) and an ``AveragePool``
  without pads, which averages over the whole window (``sum / K``); with
  ``count_include_pad = 0`` a constant ``K / count`` per output position then
  turns that into the average over the window's input positions only.

``SAME_*`` and ``VALID`` fix the output size, so the rewrite drops ``ceil_mode``.  An
asymmetric ``AveragePool`` with unknown shapes, ``ceil_mode = 1`` or dilations is left
as it is (onnx2torch then refuses it in one line, as before).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["average_pool_counts", "explicit_padding", "same_pads", "source_node"]

_PADDED = ("Conv", "MaxPool", "AveragePool", "LpPool")
#: Name suffixes of the nodes an ``AveragePool`` split adds beside the pooling node (which keeps its name).
ADDED = ("/onnx_sched_pad", "/onnx_sched_count")


def source_node(name: str) -> str:
    """The node a rewritten node's time belongs to (a profile's op names are the source model's).

    >>> source_node("pool5/onnx_sched_pad"), source_node("pool5")
    ('pool5', 'pool5')
    """
    for suffix in ADDED:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def same_pads(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
              auto_pad: str) -> list[int]:
    """ONNX's explicit ``pads`` (all begins, then all ends) for ``auto_pad`` ``SAME_UPPER`` / ``SAME_LOWER``.

    >>> same_pads([8, 7], [3, 3], [2, 2], [1, 1], "SAME_UPPER")  # 8 -> 4 outputs: 1 pad; 7 -> 4: 2 pads
    [0, 1, 1, 1]
    >>> same_pads([8, 7], [3, 3], [2, 2], [1, 1], "SAME_LOWER")
    [1, 1, 0, 1]
    """
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def average_pool_counts(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                        pads: Sequence[int]) -> np.ndarray:
    """Input positions inside each window of a padded average pooling (``ceil_mode = 0``), shape = output's
    spatial shape.

    >>> average_pool_counts([3], [2], [1], [0, 1]).tolist()  # windows [0, 1], [1, 2], [2, pad]
    [2.0, 2.0, 1.0]
    """
    rank = len(spatial)
    counts = np.ones((), np.float64)
    for axis, (size, k, s) in enumerate(zip(spatial, kernel, strides)):
        begin, end = pads[axis], pads[axis + rank]
        n_out = (size + begin + end - k) // s + 1
        start = np.arange(n_out) * s - begin
        per_axis = np.minimum(start + k, size) - np.maximum(start, 0)
        counts = np.multiply.outer(counts, per_axis.astype(np.float64))
    return counts


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _kernel(node: onnx.NodeProto, attrs: Mapping, initializers: Mapping[str, onnx.TensorProto]) -> list[int] | None:
    if "kernel_shape" in attrs:
        return list(attrs["kernel_shape"])
    weight = initializers.get(node.input[1]) if node.op_type == "Conv" and len(node.input) > 1 else None
    return list(weight.dims[2:]) if weight is not None else None


def _set(node: onnx.NodeProto, **values: object) -> None:
    """Replace (or add) attributes; ``None`` removes one."""
    keep = [a for a in node.attribute if a.name not in values]
    del node.attribute[:]
    node.attribute.extend(keep)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in values.items() if v is not None)


def explicit_padding(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]],
                     types: Mapping[str, int]) -> None:
    """Rewrite ``model``'s graph in place as the module docstring says; ``shapes``: static tensor shapes (``-1``
    for an unknown dimension), ``types``: their ONNX element types."""
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    initializers = {t.name: t for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        shape = shapes.get(node.input[0]) if node.op_type in _PADDED and node.domain in ("", "ai.onnx") else None
        if shape is None or len(shape) < 3 or min(shape[2:]) <= 0:
            nodes.append(node)
            continue
        attrs, spatial = _attributes(node), list(shape[2:])
        rank = len(spatial)
        kernel = _kernel(node, attrs, initializers)
        strides = list(attrs.get("strides", [1] * rank))
        dilations = list(attrs.get("dilations", [1] * rank))
        auto_pad = attrs.get("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
        if kernel is None or len(kernel) != rank:
            nodes.append(node)
            continue
        if auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
            pads = same_pads(spatial, kernel, strides, dilations, auto_pad) if auto_pad != "VALID" else [0] * 2 * rank
            _set(node, auto_pad=None, pads=pads, ceil_mode=None)  # SAME / VALID fix the output size: no ceil_mode
            attrs = _attributes(node)
        pads = list(attrs.get("pads", [0] * 2 * rank))
        asymmetric = pads[:rank] != pads[rank:]
        if node.op_type != "AveragePool" or not asymmetric or attrs.get("ceil_mode", 0) or set(dilations) != {1} \
                or node.input[0] not in types or opset < 2:
            nodes.append(node)
            continue
        nodes.extend(_split_average_pool(node, attrs, spatial, kernel, strides, pads, graph, opset,
                                         helper.tensor_dtype_to_np_dtype(types[node.input[0]])))
    del graph.node[:]
    graph.node.extend(nodes)


def _split_average_pool(node: onnx.NodeProto, attrs: Mapping, spatial: list[int], kernel: list[int],
                        strides: list[int], pads: list[int], graph: onnx.GraphProto, opset: int,
                        dtype: np.dtype) -> list[onnx.NodeProto]:
    """``Pad`` (zeros) + ``AveragePool`` without pads (+ ``Mul`` by ``K / count`` unless ``count_include_pad``)."""
    rank, name, x, y = len(spatial), node.name or node.output[0], node.input[0], node.output[0]
    padded, pooled, scale = f"{name}__padded", f"{name}__window_mean", f"{name}__window_scale"
    full = [0, 0, *pads[:rank], 0, 0, *pads[rank:]]
    if opset >= 11:  # pads an input
        graph.initializer.append(numpy_helper.from_array(np.asarray(full, np.int64), f"{name}__pads"))
        pad = helper.make_node("Pad", [x, f"{name}__pads"], [padded], name=name + ADDED[0], mode="constant")
    else:  # Pad-2: pads an attribute
        pad = helper.make_node("Pad", [x], [padded], name=name + ADDED[0], mode="constant", pads=full, value=0.0)
    pool = helper.make_node("AveragePool", [padded], [y], name=name, kernel_shape=kernel, strides=strides)
    if attrs.get("count_include_pad", 0):
        return [pad, pool]
    pool.output[0] = pooled
    factor = float(np.prod(kernel)) / average_pool_counts(spatial, kernel, strides, pads)
    graph.initializer.append(numpy_helper.from_array(factor.astype(dtype)[None, None], scale))
    return [pad, pool, helper.make_node("Mul", [pooled, scale], [y], name=name + ADDED[1])]
