"""An append-only op graph with tensor shapes: what the export-like families build with.

The RandWire and transformer families emit the ops an ONNX export of such a
network has, one op at a time, each with one output tensor whose shape gives its
bytes (batch 1; float32 unless stated).  :class:`OpGraphBuilder` keeps those lists
and ends with :func:`onnx_sched.importers._assemble.assemble_graph`, the step every
importer ends with, so a generated graph carries FLOPs and bytes per op exactly as
an imported one does.  Ops are numbered in the order they are added; an op may only
read tensors that already exist, so that order is topological and any prefix of it
is a downward-closed subgraph (:meth:`OpGraphBuilder.build` ``keep_ops``).

Weights are left out: they are resident constants, not activation memory (the
memory model ignores them), and the ONNX writer would turn each into a runtime
allocation.  A Conv / MatMul / Gemm op records its weight's shape in the attribute
``weight_shape`` instead, which is what its FLOP estimate reads.  Tensor bytes are rounded up to a multiple of 4 (at least 4) so every
tensor is a whole float32 vector for :mod:`onnx_sched.synth.onnx_writer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onnx_sched.cost.flops import op_flops
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.importers._assemble import assemble_graph

__all__ = ["ITEMSIZE", "OpGraphBuilder", "writer_bytes"]

ITEMSIZE = {"float32": 4, "float16": 2, "int64": 8, "int32": 4, "bool": 1}


def writer_bytes(nbytes: float) -> int:
    """``nbytes`` rounded up to a multiple of 4, at least 4 (a non-empty float32 vector)."""
    return max(4, 4 * math.ceil(nbytes / 4))


def _flops(op_type: str, in_shapes: Sequence[Any], out_shapes: Sequence[Any], attrs: Mapping[str, Any]) -> float:
    """:func:`~onnx_sched.cost.flops.op_flops`, the weight read from ``attrs["weight_shape"]``."""
    w = attrs.get("weight_shape")
    return op_flops(op_type, [*in_shapes[:1], tuple(w)] if w else in_shapes, out_shapes, attrs)


class OpGraphBuilder:
    """Ops with one shaped output each, added in topological order (see module docstring)."""

    def __init__(self) -> None:
        self._op_names: list[str] = []
        self._op_types: list[str] = []
        self._op_attrs: list[dict[str, Any]] = []
        self._op_in: list[list[int]] = []
        self._t_names: list[str] = []
        self._t_shapes: list[tuple[int, ...]] = []
        self._t_dtypes: list[str] = []
        self._t_producer: list[int] = []

    @property
    def n_ops(self) -> int:
        return len(self._op_types)

    def shape(self, tensor: int) -> tuple[int, ...]:
        return self._t_shapes[tensor]

    def _tensor(self, name: str, shape: Sequence[int], dtype: str, producer: int) -> int:
        if dtype not in ITEMSIZE:
            raise ValueError(f"OpGraphBuilder: unknown dtype {dtype!r}")
        if any(int(d) < 1 for d in shape):
            raise ValueError(f"OpGraphBuilder: tensor {name!r} has a non-positive dimension in {tuple(shape)}")
        self._t_names.append(name)
        self._t_shapes.append(tuple(int(d) for d in shape))
        self._t_dtypes.append(dtype)
        self._t_producer.append(producer)
        return len(self._t_names) - 1

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        """A graph input (live from the start, owned by the caller); returns its tensor id."""
        return self._tensor(name, shape, dtype, -1)

    def op(
        self,
        op_type: str,
        inputs: Sequence[int],
        shape: Sequence[int],
        name: str,
        dtype: str = "float32",
        **attrs: Any,
    ) -> int:
        """Append ``op_type`` reading tensors ``inputs``; returns the id of its output tensor."""
        for t in inputs:
            if not 0 <= t < len(self._t_names):
                raise ValueError(f"OpGraphBuilder: op {name!r} reads unknown tensor {t}")
        op = len(self._op_types)
        self._op_names.append(name)
        self._op_types.append(op_type)
        self._op_attrs.append(dict(attrs))
        self._op_in.append(list(dict.fromkeys(int(t) for t in inputs)))
        return self._tensor(f"{name}_output_0", shape, dtype, op)

    def build(
        self,
        name: str,
        *,
        outputs: Sequence[int] = (),
        metadata: Mapping[str, Any] | None = None,
        keep_ops: int | None = None,
    ) -> Graph:
        """The :class:`Graph` of the first ``keep_ops`` ops (all by default).

        ``outputs`` become graph outputs (kept to the end) when their op is kept;
        other sinks are freed at once.  Inputs nobody reads stay graph inputs.
        """
        n = self.n_ops if keep_ops is None else min(int(keep_ops), self.n_ops)
        if n < 1:
            raise ValueError(f"OpGraphBuilder.build: need at least one op, got keep_ops={keep_ops}")
        keep_t = [t for t, p in enumerate(self._t_producer) if p < n]
        new_id = {t: i for i, t in enumerate(keep_t)}
        kind = [TensorKind.INPUT if self._t_producer[t] < 0 else TensorKind.ACTIVATION for t in keep_t]
        for t in outputs:
            if t in new_id and self._t_producer[t] >= 0:
                kind[new_id[t]] = TensorKind.OUTPUT
        nbytes = np.asarray(
            [writer_bytes(math.prod(self._t_shapes[t]) * ITEMSIZE[self._t_dtypes[t]]) for t in keep_t], np.int64
        )
        out_of = {p: new_id[t] for t, p in enumerate(self._t_producer) if 0 <= p < n}
        return assemble_graph(
            name=name,
            op_names=tuple(self._op_names[:n]),
            op_types=tuple(self._op_types[:n]),
            op_attrs=tuple(self._op_attrs[:n]),
            op_in=[[new_id[t] for t in ins] for ins in self._op_in[:n]],
            op_out=[[out_of[op]] for op in range(n)],
            tensor_names=[self._t_names[t] for t in keep_t],
            tensor_bytes=nbytes,
            tensor_kind=[int(k) for k in kind],
            tensor_producer=[self._t_producer[t] for t in keep_t],
            tensor_dtypes=[self._t_dtypes[t] for t in keep_t],
            tensor_shapes=[self._t_shapes[t] for t in keep_t],
            flops_of=_flops,
            metadata=dict(metadata or {}),
        )
