"""Probing the min-cut bound: precedences every low-peak order obeys, and the bound they raise.

:mod:`onnx_sched.cost.memory_cut_bound` gives, for each op ``v``, the least memory any
order has while ``v`` runs; the peak of every order is at least the largest of these.  It
looks at one moment at a time.  Probing couples two: for a threshold ``B``, a critical op
``v`` (one whose least memory is among the largest) and an op ``u`` that the graph lets run
on either side of ``v``, one minimum cut with ``u`` pinned to the side it does not take in
``v``'s best cut answers "how little memory can ``v`` run with if ``u`` went the other way?".
When the answer is at least ``B``, every order whose peak is below ``B`` runs ``u`` on the
side it takes in ``v``'s best cut: a precedence between ``u`` and ``v``.  The precedences
are added to the graph (:func:`with_precedences`: zero-byte tensors, so the
memory of every order is unchanged) and the cuts repeat on the constrained graph until
nothing new appears.  No order has a peak below ``B`` (``B`` is *refuted*) when a cut alone
reaches ``B`` or the precedences close a cycle.  This is singleton-consistency probing,
as constraint solvers do it, on the closure relaxation.

:func:`probe_bound` bisects ``B`` between a proven bound and an order's peak: the largest
refuted ``B`` is a lower bound on every order's peak, and the precedences at the smallest
``B`` not refuted narrow the search for orders below it (``auto`` runs beams on the
constrained graph).  On irregular 80-op graphs this raises the min-cut bound by 2-25 % in
about a second (docs/results.md section 11).

Each probe re-uses the residual network of ``v``'s unpinned cut and only augments the
extra flow the pin forces (Dinic, :func:`onnx_sched.flow.max_flow`).

Example:
    >>> from onnx_sched.graph import Graph
    >>> from onnx_sched.cost.memory_cut_bound import least_memory_at
    >>> g = Graph.from_edges(5, [(0, 1), (0, 2), (1, 3), (1, 4), (2, 3)], output_bytes=[6, 6, 8, 2, 2])
    >>> least_memory_at(g).tolist()  # every op can run with 16 bytes or less, one at a time ...
    [6, 12, 14, 16, 8]
    >>> p = precedences_below(g, False, 17)  # ... but not all of them in one order
    >>> p.refuted, p.precedences.tolist()
    (True, [[1, 2], [2, 1], [2, 4]])
    >>> probe_bound(g, False, 16, 20).bound  # every order of g peaks at 20: proven
    20
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from onnx_sched.cost.memory_cut_bound import (
    _FIRST_OP,
    _network,
    chunks,
    least_memory_at,
    pin_op,
)
from onnx_sched.dag import CycleError
from onnx_sched.flow import max_flow as _max_flow
from onnx_sched.flow import residual_levels
from onnx_sched.graph import Csr, Graph, TensorKind
from onnx_sched.jit import work_clock

__all__ = ["CRITICAL_OPS", "Probe", "ProbeBound", "precedences_below", "probe_bound", "with_precedences"]

#: Ops probed per round: those with the largest least memory (they decide whether ``B`` is reachable).
CRITICAL_OPS = 12
#: Probe rounds per threshold (each round adds the precedences the previous one found).
MAX_ROUNDS = 6


@dataclass(frozen=True)
class Probe:
    """``refuted``: no order has a peak below the threshold.  Otherwise ``precedences``
    (``(k, 2)`` int64 rows ``(a, b)``: ``a`` runs before ``b``) hold in every such order."""

    refuted: bool
    precedences: np.ndarray
    cuts: int
    rounds: int


@dataclass(frozen=True)
class ProbeBound:
    """``bound``: the largest threshold refuted (a peak no order beats; the ``low`` given when
    none was).  ``threshold`` / ``precedences``: the smallest threshold probed and not refuted
    and its precedences (``high + 1`` and none when every probe was refuted or none ran).
    ``complete``: the bisection closed the interval before the deadline."""

    bound: int
    threshold: int
    precedences: np.ndarray
    probes: int
    complete: bool


@numba.njit(cache=True)
def _pinned_cut(v, anc, desc, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge, sink_edge, own, refund, inf):  # noqa: ANN001, ANN201
    """Op ``v``'s cut: its least memory, the residual capacities and the residual levels from the source
    (an op ``u`` with ``level[_FIRST_OP + u] >= 0`` runs before ``v`` in ``v``'s best cut)."""
    cap = np.empty_like(base_cap)
    pin_op(cap, base_cap, v, anc, desc, src_edge, sink_edge, inf)
    flow = _max_flow(n_nodes, 0, 1, adj_ptr, adj_edge, head, cap)
    level = np.empty(n_nodes, np.int64)
    queue = np.empty(n_nodes, np.int64)
    residual_levels(0, adj_ptr, adj_edge, head, cap, level, queue)
    return own[v] + flow - refund, cap, level


@numba.njit(cache=True)
def _pinned_pairs(v, lo, hi, least, cap, level, threshold, anc, desc, n_nodes, adj_ptr, adj_edge, head, base_cap,  # noqa: ANN001, ANN201
                  src_edge, sink_edge, own, refund, inf):
    """For every op ``u`` in ``[lo, hi)`` on either side of ``v``: one cut with ``u`` pinned to the other side
    (from ``v``'s residual ``cap``).  Returns the precedences found (``(a, b)``: ``a`` before ``b``) and the cuts
    run."""
    trial = np.empty_like(cap)
    pairs = np.empty((hi - lo, 2), np.int64)
    k = 0
    cuts = 0
    for u in range(lo, hi):
        w, b = u >> 6, np.uint64(u & 63)
        if u == v or (anc[v, w] >> b) & np.uint64(1) or (desc[v, w] >> b) & np.uint64(1):
            continue
        trial[:] = cap
        before = level[_FIRST_OP + u] >= 0
        e = sink_edge[u] if before else src_edge[u]  # pin u to the side it does not take
        trial[e] = inf - trial[e ^ 1]
        extra = _max_flow(n_nodes, 0, 1, adj_ptr, adj_edge, head, trial)
        cuts += 1
        if least + extra >= threshold:
            if before:
                pairs[k, 0], pairs[k, 1] = u, v
            else:
                pairs[k, 0], pairs[k, 1] = v, u
            k += 1
    return pairs[:k], cuts


def _probe_op(v: int, threshold: int, args: tuple, deadline: float | None) -> tuple[bool, list[np.ndarray], int]:
    """Probe one critical op ``v`` (module docstring): ``(refuted, precedences found, cuts run)``.  The pinned
    cuts run in :func:`~onnx_sched.cost.memory_cut_bound.chunks` and stop at ``deadline``; every precedence found
    so far holds."""
    least, cap, level = _pinned_cut(np.int64(v), *args)
    if least >= threshold:
        return True, [], 1
    found, cuts = [], 1
    for part in chunks(len(args[0]), deadline):  # args[0]: the ancestor bitsets, one row per op
        pairs, run = _pinned_pairs(np.int64(v), part.start, part.stop, least, cap, level, np.int64(threshold),
                                   *args)
        found.append(pairs)
        cuts += int(run)
    return False, found, cuts


def _arguments(net: Any) -> tuple:
    """The closure network's arrays in the order the cut kernels take them."""
    return (net.anc, net.desc, *net.cut_args())


def precedences_below(g: Graph, inplace: bool, threshold: int, *, critical: int = CRITICAL_OPS,
                      max_rounds: int = MAX_ROUNDS, deadline: float | None = None,
                      least: np.ndarray | None = None) -> Probe:
    """Probe ``threshold`` (see module docstring).  ``critical``: how many ops to probe each round,
    those with the largest least memory under the precedences found so far; ``least``: the least
    memory of every op without precedences, when the caller has it
    (:func:`~onnx_sched.cost.memory_cut_bound.least_memory_at`); ``deadline``: a
    :func:`onnx_sched.jit.work_clock` value after which nothing new starts (checked every few cuts,
    :func:`~onnx_sched.cost.memory_cut_bound.chunks`; what was found so far still holds)."""
    found = np.zeros((0, 2), np.int64)
    cuts = rounds = 0
    late = lambda: deadline is not None and work_clock() >= deadline  # noqa: E731
    while rounds < max_rounds and not late():
        constrained = with_precedences(g, found)
        try:
            net = _network(constrained, bool(inplace))
        except CycleError:
            return Probe(True, found, cuts, rounds)  # the precedences contradict each other
        args = _arguments(net)
        if rounds > 0 or least is None:  # every op again: a precedence can raise any op's least memory
            least = least_memory_at(constrained, inplace, deadline)
            if least is None:
                return Probe(False, found, cuts, rounds)
            cuts += g.n_ops
        if g.n_ops and int(least.max()) >= threshold:
            return Probe(True, found, cuts, rounds + 1)
        new = []
        for v in np.argsort(-least, kind="stable")[:critical].tolist():
            if late():
                break
            refuted, pairs, run = _probe_op(v, threshold, args, deadline)
            cuts += run
            if refuted:
                return Probe(True, found, cuts, rounds + 1)
            new.extend(pairs)
        rounds += 1
        merged = np.unique(np.concatenate([found, *new]), axis=0)
        if len(merged) == len(found):
            break
        found = merged
    return Probe(False, found, cuts, rounds)


def probe_bound(g: Graph, inplace: bool, low: int, high: int, *, deadline: float | None = None,
                critical: int = CRITICAL_OPS, resolution: int = 1) -> ProbeBound:
    """Bisect thresholds in ``(low, high]`` (``low``: a proven bound, ``high``: an order's peak) until
    the refuted and unrefuted thresholds are ``resolution`` bytes apart or ``deadline`` passes.  A
    bound equal to ``high`` proves that order optimal."""
    lo, hi = int(low), int(high) + 1  # no order has a peak below low; the order at high is below high + 1
    late = lambda: deadline is not None and work_clock() >= deadline  # noqa: E731
    edges = np.zeros((0, 2), np.int64)
    probes = 0
    least = None
    while hi - lo > resolution:
        if late():
            return ProbeBound(lo, hi, edges, probes, False)
        if least is None:  # shared by every probe's first round
            least = least_memory_at(g, inplace, deadline)
            if least is None:
                return ProbeBound(lo, hi, edges, probes, False)
        mid = (lo + hi + 1) // 2
        probe = precedences_below(g, inplace, mid, critical=critical, deadline=deadline, least=least)
        probes += 1
        if probe.refuted:
            lo = mid
        else:
            hi, edges = mid, probe.precedences
    return ProbeBound(lo, hi, edges, probes, True)


def with_precedences(g: Graph, pairs: np.ndarray | Sequence[tuple[int, int]]) -> Graph:
    """``g`` plus a zero-byte tensor from ``a`` to ``b`` per pair ``(a, b)``: ``a`` must run before ``b``.

    Memory is unchanged (the tensors weigh nothing), so every order of the result is an order
    of ``g`` with the same peak; the result may have a cycle (:class:`CycleError` from its users).

    Example:
        >>> from onnx_sched.dag import kahn_order
        >>> g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[1, 1, 1])
        >>> h = with_precedences(g, [(2, 1)])
        >>> kahn_order(h).tolist(), h.n_tensors - g.n_tensors
        ([0, 2, 1], 1)
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) == 0:
        return g
    m = g.n_tensors
    new = np.arange(m, m + len(pairs), dtype=np.int64)
    inputs = [list(g.op_inputs.row(v)) for v in range(g.n_ops)]
    outputs = [list(g.op_outputs.row(v)) for v in range(g.n_ops)]
    for (a, b), t in zip(pairs.tolist(), new.tolist(), strict=True):
        outputs[a].append(t)
        inputs[b].append(t)
    return dataclasses.replace(
        g,
        op_inputs=Csr.from_lists(inputs),
        op_outputs=Csr.from_lists(outputs),
        tensor_names=(*g.tensor_names, *(f"__precedence_{a}_{b}" for a, b in pairs.tolist())),
        tensor_bytes=np.concatenate([g.tensor_bytes, np.zeros(len(pairs), np.int64)]),
        tensor_kind=np.concatenate([g.tensor_kind, np.full(len(pairs), int(TensorKind.ACTIVATION), np.int8)]),
        tensor_producer=np.concatenate([g.tensor_producer, pairs[:, 0]]),
        tensor_dtypes=(*g.tensor_dtypes, *("float32",) * len(pairs)),  # a Graph always has both, one per tensor
        tensor_shapes=(*g.tensor_shapes, *((0,),) * len(pairs)),
    )
