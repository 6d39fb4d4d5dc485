"""Peak activation memory of an op order (paper 000, eq. 1-3 and 15), generalised to tensors.

The model, for an order ``sigma``:

* graph inputs are live from the start and never freed (the caller owns them);
* weights are resident constants and are not activation memory;
* when op ``sigma_t`` runs, its outputs are allocated and its transient
  parameter bytes ``p`` (eq. 15) are added for that step only:
  ``M_t = I_{t-1} + m(sigma_t) + p(sigma_t)``;
* after it runs, every tensor whose last consumer has now run is freed, as is
  every output nobody reads; graph outputs are kept to the end (``I_t``).

The peak is ``max_t M_t``.  With ``inplace=True`` an element-wise op writes its
output into an input buffer that dies at this op and has the same size (what ONNX
Runtime's allocation planner does), so that output costs nothing extra.  Every
report states which model it used.

All kernels work on :class:`MemoryArrays`, flat numpy arrays that numba compiles
against, so passes (beam search, exact search, samplers) share one definition.

Example:
    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[4, 2, 1])
    >>> peak_memory(g, [0, 1, 2])
    6
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

from onnx_sched.graph import Graph, TensorKind
from onnx_sched.int_sets import unique_ints

__all__ = [
    "INPLACE_OP_TYPES",
    "MemoryArrays",
    "MemoryProfile",
    "MemoryState",
    "memory_arrays",
    "peak_memory",
    "profile",
]

# Ops whose ONNX Runtime CPU kernels write output 0 into a same-sized input that dies
# at the op (ORT's MayInplace / aliasing), as measured with the heap tracker on ORT
# 1.32: `python benchmarks/ort_inplace_ops.py` (docs/ort_inplace_ops.json).  Element-wise
# binaries (Add, Mul, ...) and most math unaries (Exp, Sqrt, Neg, ...) copy.
INPLACE_OP_TYPES = frozenset(
    {
        "Cast", "Celu", "Clip", "Elu", "Flatten", "HardSigmoid", "Identity", "LeakyRelu", "LogSoftmax", "Relu",
        "Reshape", "Selu", "Shrink", "Sigmoid", "Softmax", "Softplus", "Softsign", "Squeeze", "Tanh",
        "ThresholdedRelu",
    }
)


@dataclass(frozen=True, eq=False)
class MemoryArrays:
    """Flat view of a graph for memory kernels.  Tensor ids are the graph's."""

    in_ptr: np.ndarray  # per op, distinct non-weight input tensors
    in_idx: np.ndarray
    out_ptr: np.ndarray  # per op, output tensors
    out_idx: np.ndarray
    size: np.ndarray  # int64 bytes per tensor (0 for weights)
    n_consumers: np.ndarray  # int64 distinct consumer ops per tensor
    keep: np.ndarray  # bool: never freed (graph inputs and outputs)
    param: np.ndarray  # int64 transient bytes per op
    base: int  # bytes live before the first op (graph inputs)
    inplace_ptr: np.ndarray  # per op, input tensors output 0 may reuse
    inplace_idx: np.ndarray
    inplace: bool


def memory_arrays(g: Graph, inplace: bool = False) -> MemoryArrays:
    """Build (and cache per graph) the flat arrays the memory kernels use."""
    return _memory_arrays_cached(g, bool(inplace))


@lru_cache(maxsize=64)
def _memory_arrays_cached(g: Graph, inplace: bool) -> MemoryArrays:
    kind = g.tensor_kind
    size = np.where(kind == TensorKind.WEIGHT, 0, g.tensor_bytes).astype(np.int64)
    keep = (kind == TensorKind.INPUT) | (kind == TensorKind.OUTPUT)
    # distinct non-weight inputs per op, in slot order (vectorised: graphs reach 10^5 ops)
    ops = np.repeat(np.arange(g.n_ops, dtype=np.int64), g.op_inputs.lengths())
    tensors = g.op_inputs.indices.astype(np.int64)
    real = kind[tensors] != TensorKind.WEIGHT
    ops, tensors = ops[real], tensors[real]
    _, first = unique_ints(ops * max(g.n_tensors, 1) + tensors, return_index=True)
    first.sort()
    ops, tensors = ops[first], tensors[first]
    in_ptr = np.zeros(g.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(ops, minlength=g.n_ops), out=in_ptr[1:])
    cand_rows: list[list[int]] = [[] for _ in range(g.n_ops)]
    if inplace:
        for op in range(g.n_ops):
            outs = g.op_outputs.row(op)
            if g.op_types[op] in INPLACE_OP_TYPES and len(outs) and not keep[outs[0]]:
                want = size[outs[0]]
                ins = tensors[in_ptr[op]: in_ptr[op + 1]]
                cand_rows[op] = [int(t) for t in ins if kind[t] == TensorKind.ACTIVATION and size[t] == want and want > 0]
    from onnx_sched.graph import Csr

    cand_csr = Csr.from_lists(cand_rows)
    n_cons = g.tensor_consumers.lengths().astype(np.int64)
    return MemoryArrays(
        in_ptr=in_ptr,
        in_idx=tensors,
        out_ptr=g.op_outputs.indptr.astype(np.int64),
        out_idx=g.op_outputs.indices.astype(np.int64),
        size=size,
        n_consumers=n_cons,
        keep=keep,
        param=g.op_param_bytes.astype(np.int64),
        base=int(size[kind == TensorKind.INPUT].sum()),
        inplace_ptr=cand_csr.indptr,
        inplace_idx=cand_csr.indices,
        inplace=inplace,
    )


@numba.njit(cache=True)
def peek_kernel(op, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, inplace_ptr, inplace_idx):
    """(M_t, I_t, freed bytes) if ``op`` ran now, with ``live`` bytes live before it;
    ``remaining`` (consumers still to run per tensor) is left unchanged."""
    reused = -1
    for k in range(inplace_ptr[op], inplace_ptr[op + 1]):
        t = inplace_idx[k]
        if remaining[t] == 1:
            reused = t
            break
    alloc = 0
    for k in range(out_ptr[op], out_ptr[op + 1]):
        alloc += size[out_idx[k]]
    if reused >= 0:
        alloc -= size[reused]
    m_t = live + alloc + param[op]
    freed = 0
    for k in range(in_ptr[op], in_ptr[op + 1]):
        t = in_idx[k]
        if remaining[t] == 1 and not keep[t] and t != reused:
            freed += size[t]
    for k in range(out_ptr[op], out_ptr[op + 1]):
        t = out_idx[k]
        if n_consumers[t] == 0 and not keep[t]:
            freed += size[t]
    return m_t, live + alloc - freed, freed


@numba.njit(cache=True)
def step_kernel(op, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, inplace_ptr, inplace_idx):
    """Run ``op``: update ``remaining`` consumer counts in place, return (M_t, I_t)."""
    m_t, after, _ = peek_kernel(
        op, remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, inplace_ptr, inplace_idx
    )
    for k in range(in_ptr[op], in_ptr[op + 1]):
        remaining[in_idx[k]] -= 1
    return m_t, after


@numba.njit(cache=True)
def _profile_kernel(order, base, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, inplace_ptr, inplace_idx):
    remaining = n_consumers.copy()
    step = np.empty(len(order), dtype=np.int64)
    after = np.empty(len(order), dtype=np.int64)
    live = base
    for i in range(len(order)):
        m_t, live = step_kernel(
            order[i], remaining, live, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, param, inplace_ptr, inplace_idx
        )
        step[i] = m_t
        after[i] = live
    return step, after


def _args(a: MemoryArrays) -> tuple:
    return (a.in_ptr, a.in_idx, a.out_ptr, a.out_idx, a.size, a.n_consumers, a.keep, a.param, a.inplace_ptr, a.inplace_idx)


@dataclass(frozen=True)
class MemoryProfile:
    """Memory over an order: ``step[t] = M_t`` and ``live[t] = I_t`` in bytes."""

    step: np.ndarray
    live: np.ndarray
    base: int
    inplace: bool

    @property
    def peak(self) -> int:
        return int(self.step.max()) if len(self.step) else self.base

    @property
    def peak_step(self) -> int:
        return int(self.step.argmax()) if len(self.step) else 0


def profile(g: Graph, order: np.ndarray | list[int], inplace: bool = False) -> MemoryProfile:
    """Memory at every step of ``order`` (which must be a topological order of ``g``)."""
    a = memory_arrays(g, inplace)
    step, live = _profile_kernel(np.asarray(order, dtype=np.int64), a.base, *_args(a))
    return MemoryProfile(step=step, live=live, base=a.base, inplace=inplace)


def peak_memory(g: Graph, order: np.ndarray | list[int], inplace: bool = False) -> int:
    """Peak activation bytes of ``order`` (eq. 1)."""
    return profile(g, order, inplace).peak


class MemoryState:
    """Incremental memory accounting for passes that build an order op by op.

    ``step(op)`` costs O(degree of op) and returns ``M_t``; ``peak`` and ``live``
    follow.  ``copy()`` is cheap enough for branching searches on small graphs.
    """

    __slots__ = ("arrays", "remaining", "live", "peak")

    def __init__(self, g: Graph, inplace: bool = False) -> None:
        self.arrays = memory_arrays(g, inplace)
        self.remaining = self.arrays.n_consumers.copy()
        self.live = self.arrays.base
        self.peak = self.arrays.base

    def peek(self, op: int) -> int:
        """``M_t`` if ``op`` ran next, without changing the state."""
        remaining = self.remaining.copy()
        m_t, _ = step_kernel(op, remaining, self.live, *_args(self.arrays))
        return int(m_t)

    def step(self, op: int) -> int:
        m_t, self.live = step_kernel(op, self.remaining, self.live, *_args(self.arrays))
        self.peak = max(self.peak, int(m_t))
        return int(m_t)

    def copy(self) -> MemoryState:
        other = object.__new__(MemoryState)
        other.arrays = self.arrays
        other.remaining = self.remaining.copy()
        other.live = self.live
        other.peak = self.peak
        return other
