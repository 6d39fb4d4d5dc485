"""The pattern bound: the least peak over the orders of a few ops, each step priced by a pinned minimum cut.

The min-cut bound (:mod:`onnx_sched.cost.memory_cut_bound`) prices one op at a time; probing
(:mod:`onnx_sched.cost.memory_probe`) couples two.  Here a *pattern* ``P`` of ops is coupled
completely.  Every order runs the ops of ``P`` in some order compatible with the graph, so it
passes through a chain of sets ``A`` of pattern ops already run.  When pattern op ``v`` runs after
``A``, the ops run before it include ``A`` and every ancestor of ``A`` and ``v``, and exclude the
other pattern ops and their descendants: the least memory of ``v``'s step under those pins is one
minimum cut.  The bottleneck shortest path over these chains (a DP over the sets ``A``, as the exact
search runs over all ops) is therefore a peak no order beats; with ``P`` = every op it is the
optimum.  Paths whose cost reaches ``cutoff`` (the incumbent's peak) are dropped, so when none is
left no order beats the incumbent.

The pattern grows by counterexamples.  It starts with the ops of largest least memory.  The best
path of a round is made into an order: before each pattern op, the ops its cheapest cut runs
before it.  That order is valid, and when its peak meets the bound it is optimal.  Otherwise the
ops that made it expensive are added -- those the path's cuts ran before one pattern op and after
a later one (no order does both), then the costliest steps of the order -- and the DP runs again.
This is counterexample-guided abstraction refinement: each round's bound is at least the last.

Example (the graph of the min-cut module's docstring, where the cut bound is 31 and the optimum 31):
    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(5, [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4)], output_bytes=[8, 5, 6, 20, 1])
    >>> r = pattern_bound(g, False, cutoff=10**9)
    >>> r.bound, r.peak, r.optimal
    (31, 31, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from onnx_sched.cost.memory import profile
from onnx_sched.cost.memory_cut_bound import _network, least_memory_at, source_side
from onnx_sched.dag import kahn_order
from onnx_sched.flow import max_flow as _max_flow
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock

__all__ = ["PatternBound", "pattern_bound"]

#: Ops in the first pattern, and ops added per refinement round.
START_OPS = 8
STEP_OPS = 2
#: Rounds a pattern may take to pass the caller's bound (or beat its order) before it is given up.
PATIENCE = 3
#: Pattern sets are int64 bitmasks.
MAX_PATTERN_OPS = 62
#: Sets of pattern ops kept per DP layer, children per layer and sets kept over a round's layers (for its
#: path) before the round gives up: about 50, 250 and 240 MB.
MAX_LAYER_STATES = 2_000_000
MAX_LAYER_CHILDREN = 8_000_000
MAX_ROUND_STATES = 10_000_000
#: Larger graphs are not patterned: every op's least memory is one cut each (4 s at 1,500 ops).
MAX_OPS = 2_000


@dataclass(frozen=True)
class PatternBound:
    """``bound``: no order peaks below it (``cutoff`` when no order beats the incumbent).  ``order`` /
    ``peak``: the best order made from a round's path (``None`` / ``cutoff`` when no round got one);
    ``optimal``: ``peak <= bound``.  ``pattern``: ops in the last pattern; ``cuts``: minimum cuts run;
    ``rounds``: DP runs."""

    bound: int
    order: np.ndarray | None
    peak: int
    pattern: int
    cuts: int
    rounds: int

    @property
    def optimal(self) -> bool:
        return self.order is not None and self.peak <= self.bound


@numba.njit(cache=True)
def _pinned_cut(v, pin_in, pin_out, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge, sink_edge, own, refund,  # noqa: ANN001, ANN202
                inf, cap):
    """Least memory of ``v``'s step when the ops of ``pin_in`` (bitset) run before it and those of
    ``pin_out`` after; ``cap`` holds the residual network afterwards."""
    cap[:] = base_cap
    for u in range(len(src_edge)):
        w, b = u >> 6, np.uint64(u & 63)
        if (pin_in[w] >> b) & np.uint64(1):
            cap[src_edge[u]] = inf
        elif (pin_out[w] >> b) & np.uint64(1):
            cap[sink_edge[u]] = inf
    return own[v] + _max_flow(n_nodes, 0, 1, adj_ptr, adj_edge, head, cap) - refund


@numba.njit(cache=True)
def _pins(state, run_pins, wait_pins):
    """Pins of a set of pattern ops: those run (with their ancestors) and the others (with descendants)."""
    k, words = run_pins.shape
    pin_in = np.zeros(words, np.uint64)
    pin_out = np.zeros(words, np.uint64)
    for i in range(k):
        if (state >> i) & 1:
            pin_in |= run_pins[i]
        else:
            pin_out |= wait_pins[i]
    return pin_in, pin_out


@numba.njit(cache=True)
def _expand(states, values, pattern, pattern_preds, run_pins, wait_pins, anc, cutoff, n_nodes, adj_ptr, adj_edge,  # noqa: ANN001, ANN202
            head, base_cap, src_edge, sink_edge, own, refund, inf):
    """Every child of a DP layer below ``cutoff``: (set, bottleneck, parent index, pattern index), and the cuts run."""
    k = len(pattern)
    total = len(states) * k
    c_state = np.empty(total, np.int64)
    c_value = np.empty(total, np.int64)
    c_parent = np.empty(total, np.int64)
    c_op = np.empty(total, np.int64)
    cap = np.empty_like(base_cap)
    trial = np.empty_like(base_cap)
    c = 0
    cuts = 0
    for j in range(len(states)):
        s = states[j]
        pin_in, pin_out = _pins(s, run_pins, wait_pins)
        flow = -1
        for i in range(k):
            if (s >> i) & 1 or (pattern_preds[i] & ~s) != 0:
                continue
            v = pattern[i]
            if flow < 0:  # the set's own cut, once: each step adds its op's ancestors as pins and augments it
                flow = _pinned_cut(v, pin_in, pin_out, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge,
                                   sink_edge, own, refund, inf, cap) - own[v] + refund
            trial[:] = cap
            for u in range(len(src_edge)):
                w, b = u >> 6, np.uint64(u & 63)
                if (anc[v, w] >> b) & np.uint64(1) and not (pin_in[w] >> b) & np.uint64(1):
                    e = src_edge[u]
                    trial[e] = inf - trial[e ^ 1]  # pinned into the set: capacity inf, keeping its flow
            cost = own[v] + flow + _max_flow(n_nodes, 0, 1, adj_ptr, adj_edge, head, trial) - refund
            cuts += 1
            value = max(values[j], cost)
            if value >= cutoff:
                continue
            c_state[c], c_value[c], c_parent[c], c_op[c] = s | (np.int64(1) << i), value, j, i
            c += 1
    return c_state[:c], c_value[:c], c_parent[:c], c_op[:c], cuts


@numba.njit(cache=True)
def _run_before(v, pin_in, pin_out, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge, sink_edge, own, refund, inf):  # noqa: ANN001, ANN202
    """The ops a cheapest pinned cut of ``v``'s step runs before it (bool per op)."""
    cap = np.empty_like(base_cap)
    _pinned_cut(v, pin_in, pin_out, n_nodes, adj_ptr, adj_edge, head, base_cap, src_edge, sink_edge, own, refund,
                inf, cap)
    return source_side(v, n_nodes, adj_ptr, adj_edge, head, cap, len(src_edge))


class _Pattern:
    """The arrays of one pattern for the kernels."""

    def __init__(self, net, pattern: list[int]) -> None:  # noqa: ANN001
        words = net.anc.shape[1]
        self.ops = np.asarray(pattern, np.int64)
        own_bit = np.zeros((len(pattern), words), np.uint64)
        own_bit[np.arange(len(pattern)), self.ops >> 6] = np.left_shift(np.uint64(1), (self.ops & 63).astype(np.uint64))
        self.run_pins = net.anc[self.ops] | own_bit
        self.wait_pins = net.desc[self.ops] | own_bit
        self.preds = np.zeros(len(pattern), np.int64)
        for i, u in enumerate(pattern):
            for j, w in enumerate(pattern):
                if i != j and (int(net.anc[u, w >> 6]) >> (w & 63)) & 1:
                    self.preds[i] |= 1 << j


def _solve(net, pat: _Pattern, cutoff: int, deadline: float | None) -> tuple[int, list[tuple[int, int]] | None, int, bool]:  # noqa: ANN001
    """Bottleneck DP over the sets of pattern ops: (bound, best path as (set before, pattern index) pairs, cuts,
    finished).  A DP stopped early bounds by its last layer (every order passes through it)."""
    k = len(pat.ops)
    states, values = np.zeros(1, np.int64), np.zeros(1, np.int64)
    layers: list[tuple[np.ndarray, np.ndarray]] = []  # per layer: each set's parent index and pattern op
    cuts, per_cut, kept = 0, 0.0, 0
    for _ in range(k):
        t0 = work_clock()
        if len(states) * k > MAX_LAYER_CHILDREN or (deadline is not None and t0 + per_cut * len(states) * k > deadline):
            return int(values.min()), None, cuts, False  # this layer would be too large or end past the deadline
        c_state, c_value, c_parent, c_op, used = _expand(states, values, pat.ops, pat.preds, pat.run_pins,
                                                         pat.wait_pins, net.anc, np.int64(cutoff), *net.cut_args())
        cuts += int(used)
        if layers:  # the first layer may include loading the kernels from numba's cache
            per_cut = (work_clock() - t0) / max(int(used), 1)
        if len(c_state) == 0:
            return cutoff, None, cuts, True
        first = np.lexsort((c_value, c_state))
        keep = first[np.r_[True, c_state[first][1:] != c_state[first][:-1]]]
        kept += len(keep)
        if len(keep) > MAX_LAYER_STATES or kept > MAX_ROUND_STATES:
            return int(c_value[keep].min()), None, cuts, False
        states, values = c_state[keep], c_value[keep]
        layers.append((c_parent[keep], c_op[keep]))
    ops, j = [], 0  # the last layer holds one set: every pattern op
    for parent, op in reversed(layers):
        ops.append(int(op[j]))
        j = int(parent[j])
    path, ran = [], 0
    for i in reversed(ops):
        path.append((ran, i))
        ran |= 1 << i
    return int(values[0]), path, cuts, True


def _realise(g: Graph, net, pat: _Pattern, path: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """An order through ``path`` (before each pattern op, the ops its cheapest cut runs first) and, per op,
    how often those cuts ran it before one pattern op but after a later one."""
    topo = kahn_order(g).tolist()
    done = np.zeros(g.n_ops, bool)
    seen = np.zeros(g.n_ops, bool)
    flips = np.zeros(g.n_ops, np.int64)
    order: list[int] = []
    for state, i in path:
        v = int(pat.ops[i])
        pin_in, pin_out = _pins(np.int64(state), pat.run_pins, pat.wait_pins)
        before = _run_before(np.int64(v), pin_in | net.anc[v], pin_out, *net.cut_args())
        flips[seen & ~before] += 1
        seen |= before
        for u in topo:
            if before[u] and not done[u]:
                order.append(u)
                done[u] = True
        order.append(v)
        done[v] = True
    order.extend(u for u in topo if not done[u])
    return np.asarray(order, np.int64), flips


def pattern_bound(g: Graph, inplace: bool, cutoff: int, *, deadline: float | None = None,
                  least: np.ndarray | None = None, start: int = START_OPS, step: int = STEP_OPS,
                  floor: int = 0) -> PatternBound:
    """Refine a pattern until its bound meets an order made from it, the DP outgrows its budget, or
    ``deadline`` (a :func:`onnx_sched.jit.work_clock` value) passes.

    ``cutoff``: the incumbent's peak (paths reaching it are dropped).  ``floor``: a bound the caller
    already proved; after :data:`PATIENCE` rounds that neither pass it nor beat the incumbent, the
    refinement stops (the time is better spent elsewhere: on WS graphs of 400 ops it only narrowed the
    final beams).  ``least``: every op's least memory
    (:func:`~onnx_sched.cost.memory_cut_bound.least_memory_at`), when the caller has it.  Graphs of more
    than :data:`MAX_OPS` ops, or whose least memories take past the deadline, get bound 0 and no order."""
    n = g.n_ops
    if n == 0:
        base = profile(g, np.zeros(0, np.int64), inplace).peak
        return PatternBound(base, np.zeros(0, np.int64), base, 0, 0, 0)
    if n > MAX_OPS:
        return PatternBound(0, None, int(cutoff), 0, 0, 0)
    if least is None:
        least = least_memory_at(g, inplace, deadline=deadline)
        if least is None:
            return PatternBound(0, None, int(cutoff), 0, 0, 0)
    net = _network(g, bool(inplace))
    pattern = [int(u) for u in np.argsort(-least, kind="stable")[: min(start, n, MAX_PATTERN_OPS)]]
    bound, best, best_peak, cuts, rounds = int(least.max()), None, int(cutoff), 0, 0
    while True:
        pat = _Pattern(net, pattern)
        value, path, used, finished = _solve(net, pat, int(cutoff), deadline)
        cuts, rounds = cuts + used, rounds + 1
        bound = max(bound, value)
        if path is None:
            break  # no order below the cutoff (finished), or out of budget
        order, flips = _realise(g, net, pat, path)
        step_mem = profile(g, order, inplace).step
        peak = int(step_mem.max())
        if peak < best_peak:
            best, best_peak = order, peak
        if best_peak <= bound or len(pattern) >= min(n, MAX_PATTERN_OPS):
            break
        if deadline is not None and work_clock() >= deadline:
            break
        if rounds >= PATIENCE and bound <= floor and best_peak >= cutoff:
            break  # nothing the caller does not have yet: no higher bound, no better order
        score = np.zeros(n)
        score[order] = step_mem
        score = score + flips * (float(step_mem.max()) + 1.0)
        score[pattern] = -1.0
        extra = [int(u) for u in np.argsort(-score, kind="stable")[:step] if score[u] >= 0]
        if not extra:
            break
        pattern = pattern + extra[: MAX_PATTERN_OPS - len(pattern)]
    return PatternBound(min(bound, int(cutoff)), best, best_peak, len(pattern), cuts, rounds)
