"""HSDAG inputs (paper 004, sections 2.2-2.3 and appendix G): co-location coarsening and node features.

Numpy/scipy only (inference never imports torch).

* :func:`colocate`: appendix G — walking ops in topological order, ``v_j`` joins
  ``v_i``'s co-location set when ``v_j`` is ``v_i``'s only child and ``v_i`` is
  ``v_j``'s only parent (chains collapse).  A set's op type is the mean of its
  members' one-hot types.
* :func:`node_features`: per coarse node, concatenated as in the paper
  (``T || S || Delta_in || Delta_out || D || d_pos``): op-type one-hot over
  :data:`OP_VOCAB` (mean over the set), padded output shape (log scale), in- and
  out-degree one-hot (0..6, 7+), fractal dimension (eq. 4, from undirected hop
  distances), sinusoidal encoding of the topological position (eq. 5,
  ``d_pos = 16``); plus three cost columns this implementation adds (the paper
  measured latency online instead): log op time on the fastest device relative
  to the graph mean, log of host time over fastest time, log output bytes.
* :func:`device_features`: per (coarse group, device) pair, what the placer
  head sees: group time on the device relative to its fastest and to the host,
  the cost of moving the group's boundary tensors to/from the host relative to
  its time, and a host flag.  Giving the head device *pairs* lets one network
  place on any number of devices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.dag import kahn_order
from onnx_sched.dag_kernels import popcount
from onnx_sched.graph import Graph
from onnx_sched.int_sets import unique_ints, unique_pairs

__all__ = ["OP_VOCAB", "Coarse", "colocate", "device_features", "fractal_dimension", "node_features",
           "N_NODE_FEATURES", "N_DEVICE_FEATURES", "feature_columns"]

OP_VOCAB = (
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf",
    "Softmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization", "MaxPool", "AveragePool",
    "GlobalAveragePool", "Concat", "Split", "Slice", "Gather", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
    "Flatten", "Shape", "Cast", "Expand", "Where", "ReduceMean", "Pow", "Sqrt", "Resize", "Pad", "Clip",
    "HardSigmoid", "LRN", "Dropout", "Identity", "Equal", "ConstantOfShape", "Range", "Neg", "Sum",
)
_VOCAB_INDEX = {t: i for i, t in enumerate(OP_VOCAB)}
N_TYPES = len(OP_VOCAB) + 1  # + "other"
MAX_DEGREE = 7  # one-hot 0..6 and 7+
SHAPE_DIMS = 6
D_POS = 16
N_NODE_FEATURES = N_TYPES + SHAPE_DIMS + 2 * (MAX_DEGREE + 1) + 1 + D_POS + 3
N_DEVICE_FEATURES = 4


def feature_columns() -> dict[str, np.ndarray]:
    """Column indices of the feature groups paper 004's table 3 ablates: ``output_shape`` (S),
    ``node_id`` (the topological-position encoding, eq. 5) and ``structural`` (in/out degree and
    fractal dimension, eq. 4)."""
    shape0 = N_TYPES
    deg0 = shape0 + SHAPE_DIMS
    frac = deg0 + 2 * (MAX_DEGREE + 1)
    return {"output_shape": np.arange(shape0, deg0), "structural": np.arange(deg0, frac + 1),
            "node_id": np.arange(frac + 1, frac + 1 + D_POS)}


@dataclass(frozen=True, eq=False)
class Coarse:
    """Co-location sets: ``member[op]`` = coarse node of each op; ``groups[c]`` its ops
    (topological order); ``edges`` (E, 2) coarse DAG edges; ``topo`` a topological
    order of coarse nodes."""

    member: np.ndarray
    groups: tuple[np.ndarray, ...]
    edges: np.ndarray
    topo: np.ndarray

    @property
    def n(self) -> int:
        return len(self.groups)


def colocate(g: Graph) -> Coarse:
    """Appendix G co-location: merge ``v_i`` and ``v_j`` when each is the other's only
    neighbour in that direction."""
    order = kahn_order(g)
    member = np.full(g.n_ops, -1, np.int64)
    groups: list[list[int]] = []
    for v in order:
        v = int(v)
        preds = g.preds(v)
        if len(preds) == 1:
            u = int(preds[0])
            if len(g.succs(u)) == 1:
                member[v] = member[u]
                groups[member[u]].append(v)
                continue
        member[v] = len(groups)
        groups.append([v])
    e = g.edges
    ce = unique_pairs(np.stack([member[e[:, 0]], member[e[:, 1]]], 1)) if len(e) else np.zeros((0, 2), np.int64)
    ce = ce[ce[:, 0] != ce[:, 1]]
    topo_first = np.array([grp[0] for grp in groups], np.int64)
    pos = np.empty(g.n_ops, np.int64)
    pos[order] = np.arange(g.n_ops)
    topo = np.argsort(pos[topo_first], kind="stable")
    return Coarse(member, tuple(np.asarray(x, np.int64) for x in groups), ce.astype(np.int64), topo)


_FRACTAL_CACHE: dict[tuple[int, bytes], np.ndarray] = {}
#: Seconds per unit of :func:`fractal_seconds`' work: 0.37-0.60 ns measured on generated graphs of 6,055-20,993
#: ops and 227,000-579,000 edges (a 2-core EPYC, another job on the other core).
FRACTAL_SECONDS_PER_UNIT = 0.6e-9


def _fractal_key(n: int, edges: np.ndarray) -> tuple[int, bytes]:
    """What :func:`fractal_dimension` remembers a graph by."""
    return n, np.ascontiguousarray(edges, np.int64).tobytes()


def fractal_seconds(n: int, edges: np.ndarray, max_radius: int = 12) -> float:
    """About how long :func:`fractal_dimension` takes on ``n`` nodes and ``edges``: a breadth-first search of
    ``max_radius`` levels over every edge per 64 sources (2.8 s on a 20,993-op layered graph); 0 when remembered."""
    if _fractal_key(n, edges) in _FRACTAL_CACHE:
        return 0.0
    return FRACTAL_SECONDS_PER_UNIT * -(-n // 64) * max_radius * (n + 2 * len(edges))


def fractal_dimension(n: int, edges: np.ndarray, max_radius: int = 12) -> np.ndarray:
    """Cached :func:`_fractal_dimension` (the all-pairs hop distances dominate feature time)."""
    key = _fractal_key(n, edges)
    if key not in _FRACTAL_CACHE:
        if len(_FRACTAL_CACHE) > 64:
            _FRACTAL_CACHE.clear()
        _FRACTAL_CACHE[key] = _fractal_dimension(n, edges, max_radius)
    return _FRACTAL_CACHE[key].copy()


def _fractal_dimension(n: int, edges: np.ndarray, max_radius: int = 12) -> np.ndarray:
    """Eq. 4: least-squares slope of ``log N(v, r)`` on ``log r`` over the radii
    ``r = 1..`` (up to ``max_radius``) at which ``v`` reaches new nodes, on the
    undirected graph; 0 when fewer than two radii exist."""
    if n == 0:
        return np.zeros(0)
    if len(edges) == 0:
        return np.zeros(n)
    e = np.asarray(edges, np.int64)
    e = e[e[:, 0] != e[:, 1]]
    src, dst = np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]])
    pairs = unique_ints(src * n + dst)
    src, dst = pairs // n, pairs % n  # both directions, once each, sorted by source
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    c = _ball_sizes(ptr, dst, max_radius).astype(np.float64)  # N(v, r): nodes within r hops, v included
    keep = np.ones(c.shape, np.bool_)
    keep[:, 1:] = c[:, 1:] > c[:, :-1]
    keep &= c > 1
    k = keep.sum(axis=1)
    x = np.where(keep, np.log(np.arange(1, max_radius + 1, dtype=np.float64))[None, :], 0.0)
    y = np.where(keep, np.log(c), 0.0)
    xm = np.where(keep, x - x.sum(axis=1, keepdims=True) / np.maximum(k, 1)[:, None], 0.0)
    ym = np.where(keep, y - y.sum(axis=1, keepdims=True) / np.maximum(k, 1)[:, None], 0.0)
    slope = (xm * ym).sum(axis=1) / np.maximum((xm * xm).sum(axis=1), 1e-12)
    return np.where(k >= 2, slope, 0.0)


@numba.njit(cache=True)
def _ball_sizes(ptr, nbr, max_radius):  # noqa: ANN001, ANN202
    """``counts[v, r - 1]``: nodes within ``r`` hops of ``v`` (itself included), ``r = 1..max_radius``, on the
    graph of neighbour lists ``ptr`` / ``nbr``.  Breadth-first from 64 sources at once, one bit per source in
    every node's word (multi-source BFS), so each level scans the edges once per 64 sources."""
    n = len(ptr) - 1
    one = np.uint64(1)
    counts = np.empty((n, max_radius), np.int64)
    seen = np.empty(n, np.uint64)
    front = np.empty(n, np.uint64)
    grown = np.empty(n, np.uint64)
    total = np.empty(64, np.int64)
    for lo in range(0, n, 64):
        hi = min(lo + 64, n)
        seen[:] = 0
        front[:] = 0
        for v in range(lo, hi):
            seen[v] = front[v] = one << np.uint64(v - lo)
            total[v - lo] = 1
        for r in range(max_radius):
            grown[:] = 0
            for u in range(n):
                bits = front[u]
                if bits:
                    for j in range(ptr[u], ptr[u + 1]):
                        grown[nbr[j]] |= bits
            for w in range(n):
                new = grown[w] & ~seen[w]
                front[w] = new
                seen[w] |= new
                while new:
                    low = new & (~new + one)
                    total[popcount(low - one)] += 1
                    new ^= low
            for v in range(lo, hi):
                counts[v, r] = total[v - lo]
    return counts


def _positional(pos: np.ndarray, d: int = D_POS) -> np.ndarray:
    i = np.arange(d // 2)
    angle = pos[:, None] / np.power(10000.0, 2 * i[None, :] / d)
    out = np.zeros((len(pos), d))
    out[:, 0::2] = np.sin(angle)
    out[:, 1::2] = np.cos(angle)
    return out


def node_features(g: Graph, c: Coarse, op_time: np.ndarray, host: int) -> np.ndarray:
    """``(c.n, N_NODE_FEATURES)`` float32 features of the coarse nodes (module docstring)."""
    n = c.n
    x = np.zeros((n, N_NODE_FEATURES), np.float64)
    col = 0
    for ci, grp in enumerate(c.groups):
        for op in grp:
            x[ci, _VOCAB_INDEX.get(g.op_types[op], N_TYPES - 1)] += 1.0 / len(grp)
    col += N_TYPES
    for ci, grp in enumerate(c.groups):
        last = int(grp[-1])
        outs = g.op_outputs.row(last)
        shape = g.tensor_shapes[outs[0]] if len(outs) else None
        if shape:
            dims = list(shape)[-SHAPE_DIMS:]
            x[ci, col + SHAPE_DIMS - len(dims): col + SHAPE_DIMS] = np.log2(1.0 + np.asarray(dims, np.float64)) / 10.0
    col += SHAPE_DIMS
    indeg = np.bincount(c.edges[:, 1], minlength=n) if len(c.edges) else np.zeros(n, np.int64)
    outdeg = np.bincount(c.edges[:, 0], minlength=n) if len(c.edges) else np.zeros(n, np.int64)
    x[np.arange(n), col + np.minimum(indeg, MAX_DEGREE)] = 1.0
    col += MAX_DEGREE + 1
    x[np.arange(n), col + np.minimum(outdeg, MAX_DEGREE)] = 1.0
    col += MAX_DEGREE + 1
    x[:, col] = fractal_dimension(n, c.edges)
    col += 1
    pos = np.empty(n, np.float64)
    pos[c.topo] = np.arange(n)
    x[:, col: col + D_POS] = _positional(pos)
    col += D_POS
    t = group_times(c, op_time)
    tmin = np.maximum(t.min(axis=1), 1e-12)
    x[:, col] = np.log(tmin / max(float(tmin.mean()), 1e-12)) / 5.0
    x[:, col + 1] = np.log(np.maximum(t[:, host], 1e-12) / tmin) / 3.0
    out_bytes = np.array([float(g.op_output_bytes[grp[-1]]) for grp in c.groups])
    x[:, col + 2] = np.log1p(out_bytes) / 20.0
    return x.astype(np.float32)


def group_times(c: Coarse, op_time: np.ndarray) -> np.ndarray:
    """``(c.n, k)`` summed op seconds per coarse node and device (``inf`` kept)."""
    k = op_time.shape[1]
    out = np.zeros((c.n, k))
    np.add.at(out, c.member, op_time)
    return out


def device_features(group_time: np.ndarray, boundary_bytes: np.ndarray, latency: np.ndarray,
                    inv_bandwidth: np.ndarray, host: int) -> np.ndarray:
    """``(G, k, N_DEVICE_FEATURES)`` float32 per (group, device) pair (module docstring).

    ``group_time``: ``(G, k)`` seconds of each group on each device;
    ``boundary_bytes``: ``(G,)`` bytes entering or leaving each group.
    """
    G, k = group_time.shape
    t = np.where(np.isfinite(group_time), group_time, 1e3)
    tmin = np.maximum(t.min(axis=1, keepdims=True), 1e-12)
    f = np.zeros((G, k, N_DEVICE_FEATURES))
    f[:, :, 0] = np.log(np.maximum(t, 1e-12) / tmin) / 3.0
    f[:, :, 1] = np.log(np.maximum(t, 1e-12) / np.maximum(t[:, host:host + 1], 1e-12)) / 3.0
    move = latency[host][None, :] + boundary_bytes[:, None] * inv_bandwidth[host][None, :]
    f[:, :, 2] = np.log1p(move / tmin) / 3.0
    f[:, host, 3] = 1.0
    return f.astype(np.float32)
