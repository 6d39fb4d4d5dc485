"""FLOP estimates per op from shapes: the compute term of time cost models.

Pure functions; counts a multiply-add as 2 FLOPs.  Unknown op types cost one FLOP
per output element, which is right for element-wise and data-movement ops.

Example:
    >>> op_flops("MatMul", [(2, 3), (3, 4)], [(2, 4)], {})
    48.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

__all__ = ["op_flops"]

Shape = tuple[int, ...] | None


def _numel(shape: Shape) -> int:
    return prod(shape) if shape is not None else 0


def op_flops(op_type: str, in_shapes: Sequence[Shape], out_shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> float:
    """Estimated FLOPs of one op."""
    out = sum(_numel(s) for s in out_shapes)
    if op_type in ("Conv", "ConvTranspose", "QLinearConv", "ConvInteger") and len(in_shapes) > 1 and in_shapes[1]:
        w = in_shapes[1]
        group = int(attrs.get("group", 1) or 1)
        if op_type == "ConvTranspose":
            return 2.0 * _numel(in_shapes[0]) * (w[1] if len(w) > 1 else 1) * prod(w[2:])
        return 2.0 * out * (w[1] if len(w) > 1 else 1) * prod(w[2:]) if group else float(out)
    if op_type in ("MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "FusedMatMul") and len(in_shapes) > 1:
        a = in_shapes[0]
        if a:
            k = a[-1]
            if op_type == "Gemm" and attrs.get("transA", 0):
                k = a[0]
            return 2.0 * out * k
    if op_type in ("Softmax", "LogSoftmax", "LayerNormalization", "SkipLayerNormalization", "BatchNormalization",
                   "InstanceNormalization", "GroupNormalization", "Erf", "Gelu", "Exp", "Tanh", "Sigmoid"):
        return 5.0 * out
    if op_type.startswith("Reduce") or op_type in ("GlobalAveragePool", "GlobalMaxPool"):
        return float(sum(_numel(s) for s in in_shapes[:1]))
    if op_type in ("AveragePool", "MaxPool", "LpPool"):
        k = attrs.get("kernel_shape") or [1]
        return float(out * prod(k))
    return float(out)
