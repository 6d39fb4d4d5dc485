"""The internal DAG every pass works on: ops and tensors stored in flat arrays.

A :class:`Graph` is built once by an importer (or a generator) and never mutated.
Ops and tensors are integer ids.  Only *compute* ops are ops here: nodes that
compute weights (initializers, ``Constant``, ``ConstantOfShape`` of a constant
shape, ...) are folded into weight tensors by the importer, because a schedule
never needs to decide when a weight exists.

Per tensor: name, bytes, dtype, shape, kind (graph input / activation / weight /
graph output), producer op (``-1`` for inputs and weights) and consumer ops.
Per op: name, op type, attributes, input and output tensors, a FLOP and a byte
estimate (for time cost models) and transient parameter bytes (paper 000 eq. 15:
memory an op needs only while it runs).

Example:
    >>> g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[4, 2, 2])
    >>> g.n_ops, g.preds(1).tolist(), g.succs(0).tolist()
    (3, [0], [1, 2])
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from onnx_sched.dag import check_acyclic
from onnx_sched.int_sets import unique_ints

__all__ = ["Csr", "Graph", "TensorKind"]


class TensorKind(enum.IntEnum):
    """What a tensor is, which decides how the memory model treats it."""

    INPUT = 0  # graph input: live from the start, owned by the caller
    ACTIVATION = 1  # produced by an op, freed after its last consumer
    WEIGHT = 2  # constant: resident, not part of activation memory
    OUTPUT = 3  # graph output: produced by an op, kept to the end


@dataclass(frozen=True, eq=False)
class Csr:
    """Compressed rows: row ``i`` is ``indices[indptr[i]:indptr[i+1]]``."""

    indptr: np.ndarray
    indices: np.ndarray

    @staticmethod
    def from_lists(rows: Sequence[Iterable[int]]) -> Csr:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat = [x for r in rows for x in r]
        return Csr(indptr, np.asarray(flat, dtype=np.int64).reshape(-1))

    @staticmethod
    def from_pairs(n_rows: int, rows: np.ndarray, cols: np.ndarray) -> Csr:
        """Row ``i`` = the distinct ``cols[k]`` with ``rows[k] == i``, ascending."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        width = int(cols.max()) + 1 if len(cols) else 1
        keys = unique_ints(rows * width + cols)
        r, c = np.divmod(keys, width)
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=n_rows), out=indptr[1:])
        return Csr(indptr, c.astype(np.int64))

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> np.ndarray:
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)


def _freeze(a: Any, dtype: Any) -> np.ndarray:
    arr = np.ascontiguousarray(np.asarray(a, dtype=dtype))
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable computation DAG with tensor sizes (see module docstring)."""

    name: str
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    op_inputs: Csr
    op_outputs: Csr
    tensor_names: tuple[str, ...]
    tensor_bytes: np.ndarray  # int64, >= 0
    tensor_kind: np.ndarray  # int8, TensorKind values
    tensor_producer: np.ndarray  # int64, -1 when not produced by an op
    tensor_dtypes: tuple[str, ...] = ()
    tensor_shapes: tuple[tuple[int, ...] | None, ...] = ()
    op_attrs: tuple[Mapping[str, Any], ...] = ()
    op_flops: np.ndarray | None = None  # float64 estimates
    op_bytes: np.ndarray | None = None  # float64 bytes read + written
    op_param_bytes: np.ndarray | None = None  # int64 transient bytes (eq. 15)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, m = len(self.op_names), len(self.tensor_names)
        set_ = object.__setattr__
        set_(self, "tensor_bytes", _freeze(self.tensor_bytes, np.int64))
        set_(self, "tensor_kind", _freeze(self.tensor_kind, np.int8))
        set_(self, "tensor_producer", _freeze(self.tensor_producer, np.int64))
        zeros_f = np.zeros(n, dtype=np.float64)
        set_(self, "op_flops", _freeze(zeros_f if self.op_flops is None else self.op_flops, np.float64))
        set_(self, "op_bytes", _freeze(zeros_f if self.op_bytes is None else self.op_bytes, np.float64))
        params = np.zeros(n, np.int64) if self.op_param_bytes is None else self.op_param_bytes
        set_(self, "op_param_bytes", _freeze(params, np.int64))
        if not self.op_attrs:
            set_(self, "op_attrs", tuple({} for _ in range(n)))
        if not self.tensor_dtypes:
            set_(self, "tensor_dtypes", ("float32",) * m)
        if not self.tensor_shapes:
            set_(self, "tensor_shapes", (None,) * m)
        for label, size, want in (
            ("op_types", len(self.op_types), n),
            ("op_inputs", len(self.op_inputs), n),
            ("op_outputs", len(self.op_outputs), n),
            ("op_attrs", len(self.op_attrs), n),
            ("op_flops", len(self.op_flops), n),
            ("op_param_bytes", len(self.op_param_bytes), n),
            ("tensor_bytes", len(self.tensor_bytes), m),
            ("tensor_kind", len(self.tensor_kind), m),
            ("tensor_producer", len(self.tensor_producer), m),
            ("tensor_dtypes", len(self.tensor_dtypes), m),
            ("tensor_shapes", len(self.tensor_shapes), m),
        ):
            if size != want:
                raise ValueError(f"Graph {self.name!r}: {label} has {size} entries, expected {want}")
        if m and (self.tensor_bytes < 0).any():
            bad = [self.tensor_names[i] for i in np.flatnonzero(self.tensor_bytes < 0)[:5]]
            raise ValueError(f"Graph {self.name!r}: negative or unknown byte size for tensors {bad}")

    # ----------------------------------------------------------------- sizes
    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_tensors(self) -> int:
        return len(self.tensor_names)

    # ------------------------------------------------------------ structure
    @cached_property
    def _input_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(op, tensor) for every input slot of every op."""
        ops = np.repeat(np.arange(self.n_ops, dtype=np.int64), self.op_inputs.lengths())
        return ops, self.op_inputs.indices.astype(np.int64)

    @cached_property
    def tensor_consumers(self) -> Csr:
        """Ops reading each tensor, each op listed once, ascending."""
        ops, tensors = self._input_pairs
        return Csr.from_pairs(self.n_tensors, tensors, ops)

    @cached_property
    def _op_edges(self) -> tuple[Csr, Csr]:
        ops, tensors = self._input_pairs
        producer = np.asarray(self.tensor_producer, dtype=np.int64)[tensors]
        real = (producer >= 0) & (producer != ops)
        ops, producer = ops[real], producer[real]
        return Csr.from_pairs(self.n_ops, ops, producer), Csr.from_pairs(self.n_ops, producer, ops)

    @property
    def op_preds(self) -> Csr:
        return self._op_edges[0]

    @property
    def op_succs(self) -> Csr:
        return self._op_edges[1]

    def preds(self, op: int) -> np.ndarray:
        return self.op_preds.row(op)

    def succs(self, op: int) -> np.ndarray:
        return self.op_succs.row(op)

    @cached_property
    def edges(self) -> np.ndarray:
        """``(E, 2)`` array of op-to-op dependency edges (deduplicated)."""
        succ = self.op_succs
        src = np.repeat(np.arange(self.n_ops, dtype=np.int64), succ.lengths())
        return np.stack([src, succ.indices], axis=1) if len(src) else np.zeros((0, 2), np.int64)

    @cached_property
    def op_output_bytes(self) -> np.ndarray:
        """Bytes each op allocates for its outputs (m_i of paper 000)."""
        out = np.zeros(self.n_ops, dtype=np.int64)
        for op in range(self.n_ops):
            out[op] = int(self.tensor_bytes[self.op_outputs.row(op)].sum())
        return out

    @property
    def weight_bytes(self) -> int:
        return int(self.tensor_bytes[self.tensor_kind == TensorKind.WEIGHT].sum())

    def to_networkx(self) -> Any:
        """A ``networkx.DiGraph`` of op dependencies with op names and types as attributes."""
        import networkx as nx

        g = nx.DiGraph()
        for op in range(self.n_ops):
            g.add_node(op, name=self.op_names[op], op_type=self.op_types[op])
        g.add_edges_from(map(tuple, self.edges.tolist()))
        return g

    def summary(self) -> dict[str, Any]:
        kinds = self.tensor_kind
        return {
            "name": self.name,
            "ops": self.n_ops,
            "edges": int(len(self.edges)),
            "tensors": self.n_tensors,
            "op_types": len(set(self.op_types)),
            "input_bytes": int(self.tensor_bytes[kinds == TensorKind.INPUT].sum()),
            "output_bytes": int(self.tensor_bytes[kinds == TensorKind.OUTPUT].sum()),
            "activation_bytes": int(self.tensor_bytes[kinds == TensorKind.ACTIVATION].sum()),
            "weight_bytes": self.weight_bytes,
        }

    # --------------------------------------------------------- constructors
    @staticmethod
    def from_edges(
        n: int,
        edges: Iterable[tuple[int, int]],
        output_bytes: Sequence[int] | np.ndarray,
        param_bytes: Sequence[int] | np.ndarray | None = None,
        *,
        name: str = "dag",
        op_types: Sequence[str] | None = None,
        sinks_are_outputs: bool = False,
    ) -> Graph:
        """Node-centric DAG of paper 000: op ``i`` writes one tensor of ``output_bytes[i]``
        read by all its successors.  Sink outputs are freed at once unless
        ``sinks_are_outputs``.

        Raises ``ValueError`` on self-loops, out-of-range ids or cycles.
        """
        edge_arr = np.asarray(list(edges), dtype=np.int64).reshape(-1, 2)
        if len(edge_arr) and (edge_arr.min() < 0 or edge_arr.max() >= n):
            raise ValueError(f"from_edges: edge endpoint outside [0, {n})")
        if len(edge_arr) and (edge_arr[:, 0] == edge_arr[:, 1]).any():
            raise ValueError("from_edges: self-loop")
        inputs: list[list[int]] = [[] for _ in range(n)]
        seen: set[tuple[int, int]] = set()
        has_succ = np.zeros(n, dtype=bool)
        for u, v in edge_arr.tolist():
            if (u, v) not in seen:
                seen.add((u, v))
                inputs[v].append(u)
                has_succ[u] = True
        kind = np.full(n, TensorKind.ACTIVATION, dtype=np.int8)
        if sinks_are_outputs:
            kind[~has_succ] = TensorKind.OUTPUT
        g = Graph(
            name=name,
            op_names=tuple(f"n{i}" for i in range(n)),
            op_types=tuple(op_types) if op_types is not None else ("Op",) * n,
            op_inputs=Csr.from_lists(inputs),
            op_outputs=Csr.from_lists([[i] for i in range(n)]),
            tensor_names=tuple(f"t{i}" for i in range(n)),
            tensor_bytes=np.asarray(output_bytes, dtype=np.int64),
            tensor_kind=kind,
            tensor_producer=np.arange(n, dtype=np.int64),
            op_param_bytes=None if param_bytes is None else np.asarray(param_bytes, dtype=np.int64),
        )
        check_acyclic(g)
        return g
