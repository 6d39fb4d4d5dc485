"""Node features and attention relations for the Topoformer encoder (paper 000, 4.1 and C.5).

Numpy/scipy only, so inference passes never import torch.  Three parts:

* :func:`reachability` / :func:`relation_matrix`: transitive closure and
  reduction of the op DAG with 64-bit bitsets (numba), then one ``int8`` code
  per ordered node pair saying which of the seven Topoformer graphs links them
  (see :data:`RELATIONS`).  A 2000-op graph takes a few milliseconds.
* :func:`node_features`: per-op scalar features, each normalised by its maximum
  over the graph so the encoder is size-agnostic.  Features are *pluggable*: a
  feature set is a tuple of names looked up in :data:`FEATURES`, so the makespan
  and placement passes can add their own columns (durations, critical paths,
  machine types) with :func:`register_feature` and reuse the encoder.
* :func:`laplacian_pe`: the 20 smallest non-trivial eigenvectors of the
  symmetric normalised Laplacian of the undirected DAG (Dwivedi & Bresson), with
  a deterministic sign convention.

:func:`encoder_inputs` bundles the three into what the encoder consumes.

Example:
    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(3, [(0, 1), (1, 2), (0, 2)], output_bytes=[4, 2, 1])
    >>> rel = relation_matrix(g)
    >>> int(rel[1, 0]), int(rel[2, 0]), int(rel[0, 2])  # TR fwd, DAG-minus-TR fwd, its backward
    (0, 1, 4)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.dag import kahn_order, reachability
from onnx_sched.graph import Graph

__all__ = [
    "DEFAULT_FEATURES",
    "FEATURES",
    "N_RELATIONS",
    "RELATIONS",
    "SELF",
    "EncoderInputs",
    "encoder_inputs",
    "hop_distances",
    "laplacian_pe",
    "node_features",
    "reachability",
    "register_feature",
    "relation_matrix",
    "transitive_closure",
    "transitive_reduction",
]

# rel[i, j] = code: how key j relates to query (receiver) i.  "fwd" = j -> i, a
# message travelling along the DAG direction; "bwd" = i -> j.
RELATIONS = (
    "tr_fwd",  # 0: j -> i is an edge of the transitive reduction
    "dag_minus_tr_fwd",  # 1: j -> i is a DAG edge not in the reduction
    "tc_minus_dag_fwd",  # 2: j < i in the partial order but not a DAG edge
    "tr_bwd",  # 3
    "dag_minus_tr_bwd",  # 4
    "tc_minus_dag_bwd",  # 5
    "incomparable",  # 6: neither j < i nor i < j
)
N_RELATIONS = len(RELATIONS)
SELF = 7  # diagonal code: every attention group also lets a node attend to itself
PE_DIM = 20


# ----------------------------------------------------------------- closure
@numba.njit(cache=True)
def _reduction_mask(reach, succ_ptr, succ_idx, n_words):
    """Edge e = (u, v) is in the reduction iff v is not reachable from another successor of u."""
    keep = np.ones(len(succ_idx), dtype=np.bool_)
    acc = np.zeros(n_words, dtype=np.uint64)
    one = np.uint64(1)
    for u in range(len(succ_ptr) - 1):
        for w in range(n_words):
            acc[w] = 0
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            for w in range(n_words):
                acc[w] |= reach[v, w]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if acc[v >> 6] & (one << np.uint64(v & 63)):
                keep[e] = False
    return keep


def _bits_to_bool(bits: np.ndarray, n: int) -> np.ndarray:
    as_bytes = bits.view(np.uint8) if bits.dtype.byteorder in ("=", "<", "|") else bits.astype("<u8").view(np.uint8)
    return np.unpackbits(as_bytes, axis=1, count=n, bitorder="little").astype(bool)


def transitive_closure(g: Graph) -> np.ndarray:
    """``(n, n)`` bool: ``C[u, v]`` iff there is a directed path ``u -> v`` (irreflexive)."""
    return _bits_to_bool(reachability(g), g.n_ops)


def transitive_reduction(g: Graph, reach: np.ndarray | None = None) -> np.ndarray:
    """``(k, 2)`` int64 edges of the transitive reduction (a subset of ``g.edges``)."""
    reach = reachability(g) if reach is None else reach
    succ = g.op_succs
    keep = _reduction_mask(reach, succ.indptr, succ.indices, reach.shape[1])
    return g.edges[keep]


def relation_matrix(g: Graph) -> np.ndarray:
    """``(n, n)`` int8 relation codes (:data:`RELATIONS`, :data:`SELF` on the diagonal).

    The seven non-self codes partition all ordered pairs of distinct nodes, so the
    union of the seven masked attention groups is full attention (paper 000, 4.1).
    """
    n = g.n_ops
    reach = reachability(g)
    closure = _bits_to_bool(reach, n)  # closure[u, v]: u < v
    rel = np.full((n, n), 6, dtype=np.int8)
    # comparable pairs not on a DAG edge
    rel[closure.T] = 2  # j < i  (rel[i, j] with closure[j, i])
    rel[closure] = 5  # i < j
    edges = g.edges
    if len(edges):
        succ = g.op_succs
        in_tr = _reduction_mask(reach, succ.indptr, succ.indices, reach.shape[1])
        u, v = edges[:, 0], edges[:, 1]
        rel[v, u] = np.where(in_tr, 0, 1).astype(np.int8)
        rel[u, v] = np.where(in_tr, 3, 4).astype(np.int8)
    np.fill_diagonal(rel, SELF)
    return rel


# ---------------------------------------------------------------- features
def hop_distances(g: Graph) -> np.ndarray:
    """``(n, 4)`` hop counts: min / max distance from a source, min / max distance to a sink."""
    n = g.n_ops
    topo = kahn_order(g)
    return _hops(topo, g.op_preds.indptr, g.op_preds.indices, g.op_succs.indptr, g.op_succs.indices, n)


@numba.njit(cache=True)
def _hop_pass(order, ptr, idx, out, col):
    """Min / max hops along ``order`` from the ops with no neighbour in ``ptr``/``idx`` into
    ``out[:, col]`` / ``out[:, col + 1]`` (predecessors: from sources; successors: to sinks)."""
    for u in order:
        if ptr[u + 1] > ptr[u]:
            lo, hi = 1e18, -1.0
            for e in range(ptr[u], ptr[u + 1]):
                v = idx[e]
                lo = min(lo, out[v, col] + 1)
                hi = max(hi, out[v, col + 1] + 1)
            out[u, col], out[u, col + 1] = lo, hi


def _hops(topo, pred_ptr, pred_idx, succ_ptr, succ_idx, n):
    out = np.zeros((n, 4), dtype=np.float64)
    _hop_pass(topo, pred_ptr, pred_idx, out, 0)
    _hop_pass(np.ascontiguousarray(topo[::-1]), succ_ptr, succ_idx, out, 2)
    return out


FeatureFn = Callable[[Graph], np.ndarray]  # -> (n,) or (n, k) raw values, normalised later
FEATURES: dict[str, FeatureFn] = {
    "output_bytes": lambda g: g.op_output_bytes.astype(np.float64),
    "param_bytes": lambda g: g.op_param_bytes.astype(np.float64),
    "in_degree": lambda g: g.op_preds.lengths().astype(np.float64),
    "out_degree": lambda g: g.op_succs.lengths().astype(np.float64),
    "hops": hop_distances,
}
# Paper 000 C.5: memory costs, degrees, min/max hop distance from sources and to sinks.
DEFAULT_FEATURES = ("output_bytes", "param_bytes", "in_degree", "out_degree", "hops")


def register_feature(name: str, fn: FeatureFn) -> None:
    """Add a feature column (or block) other passes can name in their feature set."""
    if name in FEATURES and FEATURES[name] is not fn:
        raise ValueError(f"feature {name!r} already registered")
    FEATURES[name] = fn


def node_features(g: Graph, names: Sequence[str] = DEFAULT_FEATURES) -> np.ndarray:
    """``(n, k)`` float32 features, each column divided by its max over the graph (C.5).

    Columns whose max is 0 (e.g. no parameter bytes) stay 0.
    """
    cols = []
    for name in names:
        if name not in FEATURES:
            raise ValueError(f"unknown feature {name!r}; known: {', '.join(sorted(FEATURES))}")
        x = np.asarray(FEATURES[name](g), dtype=np.float64)
        cols.append(x.reshape(g.n_ops, -1))
    x = np.concatenate(cols, axis=1) if cols else np.zeros((g.n_ops, 0))
    peak = np.abs(x).max(axis=0) if g.n_ops else np.zeros(x.shape[1])
    x = np.divide(x, peak, out=np.zeros_like(x), where=peak > 0)
    return x.astype(np.float32)


def laplacian_pe(g: Graph, dim: int = PE_DIM) -> np.ndarray:
    """``(n, dim)`` Laplacian eigenvector positional encodings of the undirected DAG.

    Eigenvectors of ``I - D^-1/2 A D^-1/2`` for the ``dim`` smallest eigenvalues
    after the first, zero-padded when the graph has fewer than ``dim + 1`` nodes.
    Each vector is divided by its largest-magnitude entry (fixes the sign and makes
    the scale independent of ``n``, like the other features' max-normalisation).  Graphs
    above 64 ops use sparse Lanczos (scipy, :func:`_smallest_eigs`), tiny ones (and any graph where
    Lanczos stalls) dense ``eigh``; BLAS
    is limited to one thread here when ``threadpoolctl`` is installed (threaded BLAS on
    these small problems is up to 50x slower on a busy machine).
    """
    import scipy.sparse as sp
    from scipy.sparse.linalg import ArpackError

    n = g.n_ops
    out = np.zeros((n, dim), dtype=np.float32)
    if n <= 1 or dim == 0:
        return out
    e = g.edges
    adj = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float64)
    deg = np.asarray(adj.sum(axis=1)).ravel()
    dinv = 1.0 / np.sqrt(np.maximum(deg, 1.0))
    lap = sp.identity(n, format="csr") - sp.diags(dinv) @ adj @ sp.diags(dinv)
    k = min(dim + 1, n)
    with _one_blas_thread():
        if n <= _DENSE_PE_MAX or k >= n - 1:
            vals, vecs = np.linalg.eigh(lap.toarray())
        else:
            try:
                vals, vecs = _smallest_eigs(lap, k)
            except ArpackError:
                # Lanczos can stall on highly degenerate spectra (e.g. many components of a cut-out
                # subgraph); the dense solver always answers, at O(n^3)
                vals, vecs = np.linalg.eigh(lap.toarray())
    idx = np.argsort(vals, kind="stable")[1:k]
    vecs = vecs[:, idx]
    pivot = vecs[np.abs(vecs).argmax(axis=0), np.arange(vecs.shape[1])]
    # sign convention + scale: the largest-magnitude entry of each vector becomes +1,
    # so values do not shrink like 1/sqrt(n) and training sizes transfer to larger graphs
    vecs = vecs / np.where(np.abs(pivot) > 0, pivot, 1.0)
    out[:, : vecs.shape[1]] = vecs
    return out


_DENSE_PE_MAX = 64  # dense LAPACK only for tiny graphs: threaded BLAS eigh is very slow on busy machines


def _one_blas_thread():  # noqa: ANN202
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


#: Mean degree from which :func:`_smallest_eigs` runs plain Lanczos: there the sparse LU of shift-invert fills in
#: (er-3000, degree 150: 5.3 s against 0.2 s), below it shift-invert converges in fewer, cheap steps.
_PLAIN_LANCZOS_DEGREE = 16


def _smallest_eigs(lap, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` smallest eigenpairs of a normalised Laplacian (spectrum in [0, 2]).  Sparse graphs: shift-invert
    Lanczos around -0.01 with a fill-reducing symmetric ordering for the sparse LU (about 3x faster than scipy's
    default at 2000 ops).  Dense ones (mean degree :data:`_PLAIN_LANCZOS_DEGREE` or more): plain Lanczos for the
    largest eigenpairs of ``2 I - L``, the same pairs (within 1e-6 on er / sbm / layered graphs of 300-3000 ops)
    without the LU; shift-invert if that does not converge."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh, splu

    n = lap.shape[0]
    v0 = np.ones(n) / np.sqrt(n)
    if lap.nnz >= (_PLAIN_LANCZOS_DEGREE + 1) * n:
        try:
            vals, vecs = eigsh((2 * sp.identity(n) - lap).tocsr(), k=k, which="LA", v0=v0, tol=1e-8)
            return 2 - vals, vecs
        except ArpackError:
            pass
    sigma = -1e-2
    lu = splu(
        (lap - sigma * sp.identity(n)).tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
        options={"SymmetricMode": True},
    )
    op = LinearOperator((n, n), matvec=lu.solve, dtype=np.float64)
    return eigsh(lap.tocsc(), k=k, sigma=sigma, which="LM", v0=v0, tol=1e-8, OPinv=op)


#: Bytes a Topoformer encoder takes through ONNX Runtime per (op, op) pair: attention scores and relation masks of
#: every head and layer (peak RSS of `optimize --method learned`: 0.84 GB at 2,000 ops, 2.6 GB at 4,000, 9.7 GB at
#: 8,369).
ENCODER_BYTES_PER_PAIR = 140


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (Linux ``MemAvailable``; else free physical pages; ``None``
    when neither is known)."""
    import os

    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_encoder_memory(n_ops: int, method: str) -> None:
    """Raise :class:`~onnx_sched.errors.TooLargeError` (one line from the CLI) when a learned encoder over
    ``n_ops`` ops would need more memory than is available, instead of being killed for it.

    >>> check_encoder_memory(100, "learned")  # 1.4 MB
    """
    from onnx_sched.errors import TooLargeError

    need, have = ENCODER_BYTES_PER_PAIR * n_ops * n_ops, available_memory()
    if have is not None and need > have:
        raise TooLargeError(
            f"{method}: {n_ops} ops need about {need / 2**30:.1f} GiB for the learned encoder (attention over every "
            f"pair of ops), more than the {have / 2**30:.1f} GiB available; use --method auto (it leaves the "
            "encoder out above 3,000 ops) or a method without a network")


@dataclass(frozen=True, eq=False)
class EncoderInputs:
    """What the encoder consumes: ``x`` (n, k) float32 and ``rel`` (n, n) int8 codes."""

    x: np.ndarray
    rel: np.ndarray

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def encoder_inputs(
    g: Graph, names: Sequence[str] = DEFAULT_FEATURES, pe_dim: int = PE_DIM, relations: bool = True
) -> EncoderInputs:
    """Normalised node features + Laplacian PE, and the relation matrix (unless ``relations=False``)."""
    x = np.concatenate([node_features(g, names), laplacian_pe(g, pe_dim)], axis=1)
    rel = relation_matrix(g) if relations else np.zeros((0, 0), np.int8)
    return EncoderInputs(x=np.ascontiguousarray(x, dtype=np.float32), rel=rel)


def n_features(names: Sequence[str] = DEFAULT_FEATURES, pe_dim: int = PE_DIM) -> int:
    """Width of ``encoder_inputs(...).x`` for a feature set (probed on a 2-node graph)."""
    probe = Graph.from_edges(2, [(0, 1)], output_bytes=[1, 1])
    return node_features(probe, names).shape[1] + pe_dim
