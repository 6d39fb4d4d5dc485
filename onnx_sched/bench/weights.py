"""Weights for corpus models whose float weights were stripped.

The corpus stores float weights as ``ConstantOfShape`` nodes of zeros (see the
corpus README), so many outputs are all zero or NaN and comparing a placed run's
outputs with a single-device run's proves little.  :func:`with_filled_weights`
fills them with a constant, :func:`with_random_weights` with seeded values drawn
the way networks are initialised; the graph (ops, tensors, sizes) stays as it
was.  Applied to a model before any runtime bench, whichever the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["with_filled_weights", "with_random_weights"]


def with_filled_weights(imported: Any, value: float = 0.01) -> Any:
    """A copy of ``imported`` whose stripped float weights (the corpus's
    ``ConstantOfShape`` weight nodes, see corpus README) are filled with ``value``
    instead of 0, so outputs are non-trivial and equality checks mean something.
    The graph (ops, tensors, sizes) is unchanged."""
    from dataclasses import replace

    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(imported.model)
    changed = 0
    for idx in imported.weight_nodes:
        node = model.graph.node[idx]
        if node.op_type != "ConstantOfShape":
            continue
        for attr in node.attribute:
            if attr.name == "value":
                arr = numpy_helper.to_array(attr.t)
                if arr.dtype.kind == "f" and arr.size == 1 and float(arr.ravel()[0]) == 0.0:
                    attr.t.CopyFrom(numpy_helper.from_array(np.full(arr.shape, value, arr.dtype), attr.t.name))
                    changed += 1
    return replace(imported, model=model) if changed else imported


# How with_random_weights reads a stripped weight's role: (consumer op, input index).
_MATRIX = {("MatMul", 1), ("Gemm", 1), ("Conv", 1), ("ConvTranspose", 1)}
_SCALE = {("Mul", 0), ("Mul", 1), ("LayerNormalization", 1), ("BatchNormalization", 1), ("BatchNormalization", 4),
          ("InstanceNormalization", 1), ("GroupNormalization", 1), ("SimplifiedLayerNormalization", 1),
          ("RMSNormalization", 1)}
_SHIFT = {("Add", 0), ("Add", 1), ("Sub", 0), ("Sub", 1), ("Conv", 2), ("ConvTranspose", 2), ("Gemm", 2),
          ("LayerNormalization", 2), ("BatchNormalization", 2), ("BatchNormalization", 3),
          ("InstanceNormalization", 2), ("GroupNormalization", 2)}
_INIT_STD = 0.02  # transformers' ``initializer_range`` (BERT, GPT-2, MobileBERT ...)


def _fan_in(uses: Sequence[tuple[Any, int]], shape: tuple[int, ...]) -> tuple[str, int] | None:
    """``(op_type, fan_in)`` of the first consumer reading the weight as its matrix
    operand, fan_in = inputs summed per output element: MatMul ``B [.., K, N]`` -> K;
    Gemm ``B`` -> ``B.shape[1 if transB else 0]``; Conv ``W [M, C/g, k..]`` and
    ConvTranspose ``W [C, M/g, k..]`` -> ``C/g * prod(k)``."""
    for node, k in uses:
        if (node.op_type, k) not in _MATRIX or len(shape) < 2:
            continue
        attrs = {a.name: a.i for a in node.attribute if a.type == a.INT}
        if node.op_type == "MatMul":
            return "MatMul", shape[-2]
        if node.op_type == "Gemm":
            return "Gemm", shape[1] if attrs.get("transB", 0) else shape[0]
        if node.op_type == "Conv":
            return "Conv", int(np.prod(shape[1:]))
        return node.op_type, max(1, shape[0] // max(1, attrs.get("group", 1))) * int(np.prod(shape[2:]))
    return None


def _random_weight(rng: np.random.Generator, shape: tuple[int, ...], uses: Sequence[tuple[Any, int]]) -> np.ndarray:
    """Seeded float32 values for one stripped weight read by ``uses`` ``(node, input index)``;
    the rules are listed in :func:`with_random_weights`."""
    z = rng.standard_normal(shape, dtype=np.float32)
    roles = {(n.op_type, k) for n, k in uses}
    matrix = _fan_in(uses, shape)
    if matrix is not None:
        op, fan_in = matrix
        std = 1.0 / np.sqrt(max(1, fan_in))
        return z * np.float32(min(std, _INIT_STD) if op in ("MatMul", "Gemm") else std)
    if roles and roles <= _SCALE:
        return np.abs(1.0 + _INIT_STD * z)
    if roles and roles <= _SHIFT | _SCALE:
        return _INIT_STD * z
    if len(shape) >= 2:
        return z / np.float32(np.sqrt(max(1, int(np.prod(shape[1:])))))
    return 1.0 + 0.1 * z


def with_random_weights(imported: Any, seed: int = 0) -> Any:
    """A copy of ``imported`` whose stripped float weights get seeded random values:
    each weight-producing ``ConstantOfShape`` node becomes ``Identity`` of a new
    initializer (node count and graph unchanged).  Unlike a constant fill, channels
    differ, so normalizations are well conditioned and output equality is a real
    check (a constant fill makes LayerNorm divide rounding noise by ~sqrt(eps)).

    Values follow the weight's role, read from the ops that consume it, and are
    drawn the way networks are initialised, so activations stay O(1): when they
    reach 1e15, fp32 rounding of differently fused kernels alone exceeds the 1e-5
    equality tolerance and the check proves nothing.

    * MatMul / Gemm matrix operand: ``N(0, s^2)``, ``s = min(1/sqrt(fan_in), 0.02)``,
      LeCun capped at the transformers ``initializer_range`` 0.02 (how BERT, GPT-2
      and the corpus's other transformers models were initialised).  The cap
      matters in un-normalized residual stacks (MobileBERT's NoNorm layers), where
      a variance-preserving branch doubles the residual variance at each of 100+
      residual adds: LeCun alone gives outputs of 1e13, the cap O(1);
    * Conv / ConvTranspose kernel: ``N(0, 1/fan_in)`` (LeCun); fan_in = inputs
      summed per output (MatMul ``B [K, N]``: K; Conv ``W [M, C/g, k..]``: C/g * prod(k));
    * scales (Mul operand, norm scale, BatchNorm variance): ``|1 + 0.02 N(0, 1)|``;
    * biases and shifts (Add/Sub operand, Conv/Gemm/norm bias, BatchNorm mean):
      ``0.02 N(0, 1)``.  Near the usual ones / zeros, yet every channel differs,
      so a mis-wired scale or bias changes the outputs;
    * other uses (Gather tables, Concat operands ...): ``N(0, 1/prod(shape[1:]))``,
      vectors ``1 + 0.1 N(0, 1)``.

    Deterministic for a given ``seed`` (weights drawn in node order).
    """
    from dataclasses import replace

    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    model = onnx.ModelProto()
    model.CopyFrom(imported.model)
    inits = {t.name: t for t in model.graph.initializer}
    uses: dict[str, list[tuple[Any, int]]] = {}
    for n in model.graph.node:
        for k, name in enumerate(n.input):
            uses.setdefault(name, []).append((n, k))
    changed = 0
    for idx in imported.weight_nodes:
        node = model.graph.node[idx]
        if node.op_type != "ConstantOfShape" or not node.input or node.input[0] not in inits:
            continue
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        dtype = numpy_helper.to_array(value).dtype if value is not None else np.dtype(np.float32)
        if dtype.kind != "f":
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]).ravel())
        data = _random_weight(rng, shape, uses.get(node.output[0], []))
        name = f"{node.output[0]}__onnx_sched_random"
        model.graph.initializer.append(numpy_helper.from_array(data.astype(dtype), name))
        new = helper.make_node("Identity", [name], list(node.output), name=node.name)
        node.CopyFrom(new)
        changed += 1
    if not changed:
        return imported
    from onnx_sched.importers.control_flow import subgraph_reads

    read = {x for n in model.graph.node for x in list(n.input) + subgraph_reads(n)} | {o.name for o in model.graph.output}
    keep = [t for t in model.graph.initializer if t.name in read]  # drop the now unused W__SHAPE vectors
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    kept = {t.name for t in keep}
    inputs = [i for i in model.graph.input if i.name in kept or i.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    model.ir_version = max(int(model.ir_version), 4)  # new initializers are not graph inputs
    return replace(imported, model=model)
