"""The last step every importer shares: per-op and per-tensor lists -> a checked :class:`Graph`.

Importers differ in how they read a model (ONNX protobuf, OpenVINO ``ov.Model``) but
end the same way: FLOPs and bytes touched per op, one frozen :class:`Graph`, and a
cycle check that fails with a one-line error.  Keeping that here means a new field
on :class:`Graph`, or a new cost attribute, is added once for every importer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from onnx_sched.dag import check_acyclic
from onnx_sched.graph import Csr, Graph

__all__ = ["assemble_graph"]

Shape = tuple[int, ...] | None
FlopsFn = Callable[[str, Sequence[Shape], Sequence[Shape], dict[str, Any]], float]


def assemble_graph(
    *,
    name: str,
    op_names: tuple[str, ...],
    op_types: tuple[str, ...],
    op_attrs: tuple[dict[str, Any], ...],
    op_in: list[list[int]],
    op_out: list[list[int]],
    tensor_names: Sequence[str],
    tensor_bytes: np.ndarray,
    tensor_kind: Sequence[int],
    tensor_producer: Sequence[int],
    tensor_dtypes: Sequence[str],
    tensor_shapes: Sequence[Shape],
    flops_of: FlopsFn,
    metadata: Mapping[str, Any],
    op_param_bytes: np.ndarray | None = None,
) -> Graph:
    """A :class:`Graph` with FLOPs (``flops_of(op_type, in_shapes, out_shapes, attrs)``) and
    bytes read + written per op; raises the DAG module's cycle error for cyclic input."""
    n = len(op_types)
    flops = np.zeros(n)
    nbytes = np.zeros(n)
    for op in range(n):
        in_shapes = [tensor_shapes[t] for t in op_in[op]]
        out_shapes = [tensor_shapes[t] for t in op_out[op]]
        flops[op] = flops_of(op_types[op], in_shapes, out_shapes, op_attrs[op])
        nbytes[op] = float(tensor_bytes[op_in[op]].sum() + tensor_bytes[op_out[op]].sum())
    graph = Graph(
        name=name,
        op_names=op_names,
        op_param_bytes=op_param_bytes,
        op_types=op_types,
        op_inputs=Csr.from_lists(op_in),
        op_outputs=Csr.from_lists(op_out),
        tensor_names=tuple(tensor_names),
        tensor_bytes=tensor_bytes,
        tensor_kind=np.asarray(tensor_kind, dtype=np.int8),
        tensor_producer=np.asarray(tensor_producer, dtype=np.int64),
        tensor_dtypes=tuple(tensor_dtypes),
        tensor_shapes=tuple(tensor_shapes),
        op_attrs=op_attrs,
        op_flops=flops,
        op_bytes=nbytes,
        metadata=dict(metadata),
    )
    check_acyclic(graph)
    return graph
