"""The least memory any order can have while an op runs: a minimum cut per op.

While op ``v`` runs, the ops already run form a set ``D``: every ancestor of ``v`` is
in it, ``v`` and its descendants are not, and it is closed under predecessors.  Given
``D``, the live bytes are fixed: the graph inputs, ``v``'s outputs and transient bytes,
and every tensor produced in ``D`` that is a graph output or still has a reader outside
``D``.  Choosing ``D`` to make that sum smallest is a maximum-weight closure problem (pay
an op's output bytes when it is in ``D``, get a tensor's bytes back when all its readers
are in ``D`` too), which is a minimum ``s``-``t`` cut (Picard 1976).  So for each op the
cut gives the exact minimum over all orders of the memory at that op's step, and the
peak of every order is at least the largest of them.

This dominates the "must be live" bound of :mod:`onnx_sched.cost.memory_bound` (which
counts only the tensors live for every ``D``): on irregular 80-op graphs it raises the
bound by 10-22 % (docs/results.md section 11).  It is still a bound on one moment at a
time; two ops whose best ``D`` disagree are not combined.

One max-flow (Dinic, numba) per op.  With an order at hand, only the ops whose step in
that order exceeds the bound found so far can raise it (an order's step is one choice
of ``D``), so :func:`cut_lower_bound` visits ops by decreasing step and stops early.

Example:
    >>> from onnx_sched.graph import Graph
    >>> # 0 -> 1 -> 3 -> 4 and 0 -> 2 -> 4: while 3 runs, either 2 has run (its output waits
    >>> # for 4) or not (0's output waits for 2); the must-live bound counts neither
    >>> g = Graph.from_edges(5, [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4)], output_bytes=[8, 5, 6, 20, 1])
    >>> least_memory_at(g).tolist()
    [8, 13, 14, 31, 27]
    >>> op_lower_bounds(g).tolist()
    [8, 13, 14, 25, 27]
    >>> cut_lower_bound(g)
    CutBound(bound=31, cuts=5, op=3, complete=True)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.cost.memory import memory_arrays, profile
from onnx_sched.cost.memory_bound import MAX_CLOSURE_OPS, lower_bound, op_lower_bounds
from onnx_sched.dag import reachability
from onnx_sched.flow import max_flow as _max_flow
from onnx_sched.flow import residual_levels
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock

__all__ = ["CutBound", "cut_lower_bound", "least_memory_at", "least_memory_set"]

_SOURCE, _SINK, _FIRST_OP = 0, 1, 2


@dataclass(frozen=True)
class CutBound:
    """The bound, the ops whose cut was computed, the op that attains the bound (-1: the
    must-live bound was not raised), and whether every op that could raise it was cut."""

    bound: int
    cuts: int
    op: int
    complete: bool


@dataclass(frozen=True, eq=False)
class _Network:
    """The closure network shared by every op's cut: nodes ``s``, ``t``, one per op, one per
    freeable tensor; edges stored in pairs (edge ``e`` and its reverse ``e ^ 1``)."""

    n_nodes: int
    adj_ptr: np.ndarray
    adj_edge: np.ndarray
    head: np.ndarray
    cap: np.ndarray  # capacities with no op pinned to either side
    src_edge: np.ndarray  # per op, its s -> op edge (capacity 0 unless pinned to D)
    sink_edge: np.ndarray  # per op, its op -> t edge (its output bytes; infinite when pinned out)
    refund: int  # bytes of all freeable tensors (each has an s -> tensor edge of its size)
    own: np.ndarray  # per op: base + outputs + transient - in-place reuse, the part of its step D does not decide
    inf: int
    anc: np.ndarray  # per op, its ancestors as bitsets (pinned into D)
    desc: np.ndarray  # per op, its descendants as bitsets (pinned out of D, with the op)

    def nbytes(self) -> int:
        """Bytes of its arrays."""
        return sum(int(a.nbytes) for a in (self.adj_ptr, self.adj_edge, self.head, self.cap, self.src_edge,
                                           self.sink_edge, self.own, self.anc, self.desc))

    def cut_args(self) -> tuple:
        """The network's arrays in the order the cut kernels take them (after any pins)."""
        return (self.n_nodes, self.adj_ptr, self.adj_edge, self.head, self.cap, self.src_edge, self.sink_edge,
                self.own, np.int64(self.refund), np.int64(self.inf))


#: Networks kept for reuse (every cut, probe and repair of a graph shares one): at most this many, and past the
#: first, no more than :data:`NETWORK_CACHE_BYTES` of them (a 30,000-op graph's closures alone are 225 MB).
NETWORK_CACHE_SIZE, NETWORK_CACHE_BYTES = 16, 1 << 30
_networks: OrderedDict[tuple[Graph, bool], _Network] = OrderedDict()


def _network(g: Graph, inplace: bool) -> _Network:
    """:func:`_build_network`, remembered for the last graphs (module constants above)."""
    key = (g, bool(inplace))
    net = _networks.get(key)
    if net is not None:
        _networks.move_to_end(key)
        return net
    net = _networks[key] = _build_network(g, bool(inplace))
    while len(_networks) > NETWORK_CACHE_SIZE or (
            len(_networks) > 1 and sum(n.nbytes() for n in _networks.values()) > NETWORK_CACHE_BYTES):
        _networks.popitem(last=False)
    return net


def _build_network(g: Graph, inplace: bool) -> _Network:
    """The closure network of ``g``, built with numpy.  Its edges, each stored with its reverse: per freeable
    tensor that is no graph output (in tensor order) ``s -> tensor`` (its size), ``tensor -> producer`` and
    ``tensor -> reader`` for each reader (infinite: freed only if produced and read by all of them); per op
    ``op -> predecessor`` (infinite: ``D`` is closed under predecessors); per op ``s -> op`` (0: raised to pin it
    into ``D``), then per op ``op -> t`` (its output bytes)."""
    a = memory_arrays(g, inplace)
    n = g.n_ops
    producer = np.asarray(g.tensor_producer, np.int64)
    size = np.asarray(a.size, np.int64)
    freeable = (producer >= 0) & (size > 0)
    out_bytes = np.zeros(n, np.int64)
    np.add.at(out_bytes, producer[freeable], size[freeable])
    inf = int(out_bytes.sum()) + 1
    refundable = freeable & ~np.asarray(a.keep, bool)  # a graph output stays live once produced
    tensors = np.flatnonzero(refundable)
    node = _FIRST_OP + n + np.arange(len(tensors), dtype=np.int64)
    readers = g.tensor_consumers
    n_read = np.diff(readers.indptr)[tensors]
    read_by = readers.indices[np.repeat(refundable, np.diff(readers.indptr))]
    # the tensors' edges, 2 + readers each: s -> tensor, tensor -> producer, tensor -> every reader
    per = (2 + n_read).astype(np.int64)
    first = np.cumsum(per) - per
    t_tail = np.repeat(node, per)
    t_head = np.empty(int(per.sum()), np.int64)
    t_cap = np.full(len(t_head), inf, np.int64)
    t_tail[first] = _SOURCE
    t_head[first] = node
    t_cap[first] = size[tensors]
    t_head[first + 1] = _FIRST_OP + producer[tensors]
    is_reader = np.ones(len(t_head), bool)
    is_reader[first] = is_reader[first + 1] = False
    t_head[is_reader] = _FIRST_OP + read_by
    preds = g.op_preds
    ops = np.arange(n, dtype=np.int64)
    tail = np.concatenate([t_tail, _FIRST_OP + np.repeat(ops, np.diff(preds.indptr)), np.full(n, _SOURCE, np.int64),
                           _FIRST_OP + ops])
    head = np.concatenate([t_head, _FIRST_OP + np.asarray(preds.indices, np.int64), _FIRST_OP + ops,
                           np.full(n, _SINK, np.int64)])
    cap = np.concatenate([t_cap, np.full(len(preds.indices), inf, np.int64), np.zeros(n, np.int64), out_bytes])
    sink_edge = 2 * (len(tail) - n + ops)
    src_edge = sink_edge - 2 * n
    n_nodes = _FIRST_OP + n + len(tensors)
    tails = np.stack([tail, head], axis=1).ravel()  # edge e and its reverse e ^ 1, which starts empty
    heads = np.stack([head, tail], axis=1).ravel()
    caps = np.stack([cap, np.zeros_like(cap)], axis=1).ravel()
    adj_ptr = np.zeros(n_nodes + 1, np.int64)
    np.cumsum(np.bincount(tails, minlength=n_nodes), out=adj_ptr[1:])
    reuse = np.zeros(n, np.int64)
    rows = np.flatnonzero(np.diff(a.inplace_ptr) > 0)
    if len(rows):
        reuse[rows] = np.maximum.reduceat(a.size[a.inplace_idx], a.inplace_ptr[rows])
    own = a.base + out_bytes + a.param - reuse
    return _Network(n_nodes, adj_ptr, np.argsort(tails, kind="stable").astype(np.int64), heads, caps, src_edge,
                    sink_edge, int(size[tensors].sum()), own, inf, reachability(g, reverse=True), reachability(g))


@numba.njit(cache=True, inline="always")
def pin_op(cap, base_cap, v, anc, desc, src_edge, sink_edge, inf):  # noqa: ANN001, ANN201
    """``cap`` = ``base_cap`` with op ``v`` running: its ancestors already run, ``v`` and its descendants not."""
    cap[:] = base_cap
    for u in range(len(src_edge)):
        w, b = u >> 6, np.uint64(u & 63)
        if (anc[v, w] >> b) & np.uint64(1):
            cap[src_edge[u]] = inf
        elif u == v or (desc[v, w] >> b) & np.uint64(1):
            cap[sink_edge[u]] = inf


@numba.njit(cache=True)
def _cuts(ops, anc, desc, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge, sink_edge, own, refund, inf,  # noqa: ANN001, ANN202
          stop_at, step_of):
    """Least memory while each op of ``ops`` runs, in the given order; stops before an op
    whose ``step_of`` is at most the largest value found (it cannot raise it).  Unvisited: -1."""
    out = np.full(len(ops), -1, np.int64)
    cap = np.empty_like(base_cap)
    best = stop_at
    for i in range(len(ops)):
        v = ops[i]
        if step_of[i] <= best:
            break
        pin_op(cap, base_cap, v, anc, desc, src_edge, sink_edge, inf)
        cut = _max_flow(n_nodes, 0, 1, adj_ptr, adj_edge, head, cap)
        out[i] = own[v] + cut - refund
        if out[i] > best:
            best = out[i]
    return out


@numba.njit(cache=True)
def _best_set(v, anc, desc, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge, sink_edge, own, refund, inf):  # noqa: ANN001, ANN202
    """Op ``v``'s least memory and the set of ops run before it that attains it (bool per op)."""
    cap = np.empty_like(base_cap)
    pin_op(cap, base_cap, v, anc, desc, src_edge, sink_edge, inf)
    flow = _max_flow(n_nodes, 0, 1, adj_ptr, adj_edge, head, cap)
    before = source_side(v, n_nodes, adj_ptr, adj_edge, head, cap, len(src_edge))
    return own[v] + flow - refund, before


@numba.njit(cache=True)
def source_side(v, n_nodes, adj_ptr, adj_edge, head, cap, n_ops):  # noqa: ANN001, ANN201
    """After a maximum flow for ``v``'s step (``cap`` residual): the ops on the source side of a minimum
    cut, i.e. a cheapest set to run before ``v`` (bool per op, ``v`` excluded)."""
    level = np.empty(n_nodes, np.int64)
    queue = np.empty(n_nodes, np.int64)
    residual_levels(0, adj_ptr, adj_edge, head, cap, level, queue)
    before = np.zeros(n_ops, np.bool_)
    for u in range(n_ops):
        before[u] = level[_FIRST_OP + u] >= 0
    before[v] = False
    return before


def least_memory_set(g: Graph, inplace: bool, op: int) -> tuple[int, np.ndarray]:
    """``op``'s least memory over all orders, and a set of ops (bool per op) that attains it when it
    is exactly what runs before ``op``: it holds every ancestor of ``op`` and no descendant.

    Example (the graph of the module docstring): op 3 needs 31 bytes, with 0, 1 and 2 run before
    it (2's 6 bytes wait for 4 and 0's 8 are freed; without 2 it would be 33)::

        >>> from onnx_sched.graph import Graph
        >>> g = Graph.from_edges(5, [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4)], output_bytes=[8, 5, 6, 20, 1])
        >>> least, before = least_memory_set(g, False, 3)
        >>> least, before.tolist()
        (31, [True, True, True, False, False])
    """
    net = _network(g, bool(inplace))
    least, before = _best_set(np.int64(op), net.anc, net.desc, *net.cut_args())
    return int(least), before


def _run_cuts(g: Graph, inplace: bool, ops: np.ndarray, step_of: np.ndarray, stop_at: int) -> np.ndarray:
    net = _network(g, bool(inplace))
    return _cuts(np.ascontiguousarray(ops, np.int64), net.anc, net.desc, *net.cut_args(), np.int64(stop_at),
                 np.ascontiguousarray(step_of, np.int64))


def least_memory_at(g: Graph, inplace: bool = False, deadline: float | None = None) -> np.ndarray | None:
    """Per op, the least live bytes over all orders while it runs (int64 ``(n,)``); ``None`` when
    ``deadline`` (a :func:`onnx_sched.jit.work_clock` value, checked between :func:`chunks`) passes first."""
    least = np.empty(g.n_ops, np.int64)
    covered = 0
    for part in chunks(g.n_ops, deadline):
        ops = np.arange(part.start, part.stop, dtype=np.int64)
        least[ops] = _run_cuts(g, inplace, ops, np.full(len(ops), np.iinfo(np.int64).max, np.int64), -1)
        covered = part.stop
    return least if covered == g.n_ops else None


def cut_lower_bound(g: Graph, inplace: bool = False, order: np.ndarray | None = None,
                    deadline: float | None = None) -> CutBound:
    """A peak no order beats: the largest least-memory step, and the must-live bounds.

    With ``order`` (any valid order, e.g. the incumbent), ops are visited by decreasing
    step in that order and the search stops at the first whose step cannot raise the
    bound; without it every op is cut.  ``deadline`` (an :func:`onnx_sched.jit.work_clock`
    value) stops it early with the bound found so far (``complete=False``).  A complete
    result does not depend on the order and is remembered per graph.  Graphs beyond
    ``MAX_CLOSURE_OPS`` get the must-live bound alone."""
    key = (g, bool(inplace))
    if key in _complete:
        return _complete[key]
    must = int(lower_bound(g, inplace))
    n = g.n_ops
    if n == 0 or n > MAX_CLOSURE_OPS:
        return CutBound(must, 0, -1, True)
    if order is None:
        ops = np.argsort(-op_lower_bounds(g, inplace), kind="stable")
        step_of = np.full(n, np.iinfo(np.int64).max, np.int64)
    else:
        step = profile(g, order, inplace).step
        rank = np.argsort(-step, kind="stable")
        ops, step_of = np.asarray(order)[rank], step[rank]
    best, best_op, cuts, covered = must, -1, 0, 0
    for part in chunks(n, deadline):
        values = _run_cuts(g, inplace, ops[part], step_of[part], best)
        covered = part.stop
        done = values >= 0
        cuts += int(done.sum())
        if done.any() and int(values.max()) > best:
            i = int(np.argmax(values))
            best, best_op = int(values[i]), int(ops[part.start + i])
        if not done.all():
            covered = n
            break  # the rest cannot raise the bound
    complete = covered == n
    result = CutBound(best, cuts, best_op, complete)
    if complete:
        if len(_complete) >= 16:
            _complete.pop(next(iter(_complete)))
        _complete[key] = result
    return result


#: Most ops cut between two deadline checks.
_CHUNK = 64
#: Seconds a chunk of cuts should take: a deadline is passed by about this much (one cut on er-3000: 40 ms).
_CHUNK_SECONDS = 0.05


def chunks(n: int, deadline: float | None) -> Iterator[slice]:
    """Consecutive slices of ``range(n)`` to cut one after another, the first one op, each next sized by the
    speed of the one before to take about :data:`_CHUNK_SECONDS` (1 to :data:`_CHUNK` ops); none once
    ``deadline`` (a :func:`onnx_sched.jit.work_clock` value) has passed or one more cut at that speed would
    end past it (a cut takes 0.3 s on a 20,000-op graph), so the caller sees how far it got.

    >>> parts = list(chunks(10, None))
    >>> parts[0], parts[-1].stop, sum(p.stop - p.start for p in parts)
    (slice(0, 1, None), 10, 10)
    >>> list(chunks(10, deadline=0.0))  # already past
    []
    """
    lo, size, per_op = 0, 1, 0.0
    while lo < n:
        if deadline is not None and work_clock() + per_op >= deadline:
            return
        hi = min(lo + size, n)
        t0 = work_clock()
        yield slice(lo, hi)
        per_op = (work_clock() - t0) / (hi - lo)
        size = int(min(_CHUNK, max(1.0, _CHUNK_SECONDS / max(per_op, 1e-9))))
        lo = hi


_complete: dict[tuple[Graph, bool], CutBound] = {}
