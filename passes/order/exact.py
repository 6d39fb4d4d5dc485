"""``exact``: optimal peak-memory order by dynamic programming over scheduled sets.

A breadth-first, layered DP with branch and bound -- not paper 000's depth-first
DP.  The search (the approximate DP of paper 000 appendix C.3 with its state
collapsing but no width cap) expands layer by layer the sets of ops scheduled so
far, keeps one partial order per set (the lowest peak: two partial orders with
the same set have the same future), and prunes every state whose peak already
reaches the incumbent's (branch and bound; the incumbent is the best cheap
heuristic or a width-256 beam, or an order the caller passes).  Peaks are clamped below by the best
proven lower bound, which merges more states without losing optimality.

Divide and conquer (as SERENITY / HMCOS do at single-node cuts): an op that is
comparable with every other op (every op is its ancestor or its descendant)
runs at the same position in every order, and the set scheduled before it is
fixed.  The graph splits at such cuts into segments whose orders are
independent; the peak is the maximum of the segment peaks.  Segments are solved
in decreasing order of their incumbent peak, each only while it can still lower
the overall peak, so easy segments cost nothing.

The search runs on the graph with its chains contracted (:mod:`onnx_sched.cost.memory_chains`:
chain ops that some optimal order runs back to back become one op; same optimum).

The graph bound is the larger of the must-live bound and the min-cut bound
(:mod:`onnx_sched.cost.memory_cut_bound`: per op, the least memory of any order while it
runs).  Result: ``optimal=True`` when every segment was proven; otherwise the best order
found and ``lower_bound`` = the best bound proven (graph bound, solved segments,
and for a search cut short the lowest peak among its open states).  The pass then
spends the time left on the pattern bound (:mod:`onnx_sched.cost.memory_pattern`, half of it;
its order replaces the search's when lower, and an order meeting the bound is optimal) and
on probing (:mod:`onnx_sched.cost.memory_probe`) to raise that bound.

Options: ``max_states`` (states per layer, default from a 128 MiB budget; the
children of a layer get another 128 MiB), ``max_total`` (states kept over all
layers for back-pointers, default 1e7 = 80 MB).  The search stops (with a bound)
when a limit is reached or the next layer would end past the time limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_sched.cost.memory import profile
from onnx_sched.cost.memory_bound import lower_bound, op_lower_bounds
from onnx_sched.cost.memory_chains import Contraction, contract_chains
from onnx_sched.cost.memory_cut_bound import cut_lower_bound
from onnx_sched.cost.memory_pattern import pattern_bound
from onnx_sched.cost.memory_probe import probe_bound
from onnx_sched.dag import check_order, kahn_order
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.passes.order._kernels import kernel_graph
from onnx_sched.passes.order._portfolio import best_of, cheap_orders
from onnx_sched.passes.order._repair import repair
from onnx_sched.passes.order._search import layered_search, start_layer, zobrist_keys
from onnx_sched.passes.order.beam import beam_search
from onnx_sched.schedule import Schedule

__all__ = ["ExactResult", "run", "seed_incumbent", "single_node_cuts", "solve_exact"]


@dataclass(frozen=True)
class ExactResult:
    """Best order found, its peak, whether it is proven optimal, and the proven bound."""

    order: np.ndarray
    peak: int
    optimal: bool
    lower_bound: int
    info: dict[str, Any] = field(default_factory=dict)


def single_node_cuts(graph: Graph) -> np.ndarray:
    """Ops comparable with every other op, ascending by their (fixed) position.

    Uses ancestor / descendant bitsets as Python ints (O(n * E / 64))."""
    n = graph.n_ops
    topo = kahn_order(graph)
    anc = [0] * n
    for v in topo.tolist():
        acc = 0
        for p in graph.preds(v).tolist():
            acc |= anc[p] | (1 << p)
        anc[v] = acc
    desc = [0] * n
    for v in topo[::-1].tolist():
        acc = 0
        for s in graph.succs(v).tolist():
            acc |= desc[s] | (1 << s)
        desc[v] = acc
    n_anc = np.array([a.bit_count() for a in anc], dtype=np.int64)
    cuts = [v for v in range(n) if n_anc[v] + desc[v].bit_count() + 1 == n]
    return np.asarray(sorted(cuts, key=lambda v: n_anc[v]), dtype=np.int64)


def seed_incumbent(graph: Graph, *, inplace: bool, seed: int, time_limit: float) -> np.ndarray:
    """Best of the cheap heuristics and a small beam (width 256, within ``time_limit``), min-cut repaired."""
    orders = cheap_orders(graph, inplace)
    if graph.n_ops:
        orders["beam"], _ = beam_search(graph, 256, inplace=inplace, seed=seed, time_limit=time_limit)
    return repair(graph, best_of(graph, orders, inplace)[1], inplace, deadline=work_clock() + time_limit)


#: Share of the time limit the min-cut graph bound may take (its result is remembered per graph).
CUT_SHARE = 0.1
MEMORY_BUDGET = 128 * 2**20  # bytes for one layer's states, and again for its candidates


def default_max_states(n_ops: int) -> int:
    """States per layer that fit :data:`MEMORY_BUDGET`."""
    words = max(1, (n_ops + 63) // 64)
    return max(10_000, int(MEMORY_BUDGET // (16 * words + 48)))


def solve_exact(
    graph: Graph,
    *,
    inplace: bool,
    time_limit: float,
    incumbent: np.ndarray | None = None,
    seed: int = 0,
    max_states: int | None = None,
    max_total: int = 10_000_000,
    known_bound: int = 0,
) -> ExactResult:
    """Exact search within ``time_limit`` seconds (see module docstring).  ``known_bound`` is a lower
    bound the caller already proved (an earlier, cut-short search): it prunes and merges more states."""
    chains = contract_chains(graph, inplace)
    if chains.reduced:
        return _solve_contracted(graph, chains, inplace=inplace, time_limit=time_limit, incumbent=incumbent, seed=seed,
                                 max_states=max_states, max_total=max_total, known_bound=known_bound)
    t0 = work_clock()
    deadline = t0 + float(time_limit)
    n = graph.n_ops
    graph_lb = max(int(lower_bound(graph, inplace)), int(known_bound))
    if incumbent is None:
        incumbent = seed_incumbent(graph, inplace=inplace, seed=seed, time_limit=0.1 * float(time_limit))
    order = check_order(graph, incumbent).copy()
    prof = profile(graph, order, inplace)
    if prof.peak > graph_lb:
        graph_lb = max(graph_lb, cut_lower_bound(graph, inplace, order, deadline=t0 + CUT_SHARE * float(time_limit)).bound)
    info: dict[str, Any] = {"graph_lower_bound": graph_lb, "incumbent_peak": prof.peak}
    if n == 0 or prof.peak <= graph_lb:
        return ExactResult(order, prof.peak, True, prof.peak, {**info, "segments": 0 if n == 0 else 1, "solved_segments": 0})

    cuts = single_node_cuts(graph)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    bounds = sorted({0, n, *(int(pos[c]) + 1 for c in cuts.tolist())})
    segments = list(zip(bounds[:-1], bounds[1:], strict=True))
    seg_peak = [int(prof.step[a:b].max()) for a, b in segments]
    need = op_lower_bounds(graph, inplace)  # bytes each op needs in any order
    kg = kernel_graph(graph, inplace)
    z1, z2 = zobrist_keys(n, seed)
    cap = default_max_states(n) if max_states is None else int(max_states)

    floor = graph_lb
    proven = [False] * len(segments)
    searched = 0
    stopped_reason = None
    for i in sorted(range(len(segments)), key=lambda s: -seg_peak[s]):
        a, b = segments[i]
        if seg_peak[i] <= floor:
            proven[i] = True  # cannot lower the overall peak below a proven bound
            continue
        seg_need = int(need[order[a:b]].max())
        if seg_need >= seg_peak[i] or b - a == 1:
            proven[i] = True  # a single op, or some op of the segment needs this much in any order
            floor = max(floor, seg_peak[i])
            continue
        if work_clock() >= deadline:
            stopped_reason = stopped_reason or "time"
            continue
        live0 = int(prof.live[a - 1]) if a > 0 else kg.base
        start = start_layer(kg, order[:a], live0, 0, z1, z2)
        res = layered_search(
            kg, start, b - a, z1=z1, z2=z2, width=None, floor=max(floor, seg_need), cutoff=seg_peak[i],
            deadline=deadline, max_states=cap, max_total=max_total, max_candidates=MEMORY_BUDGET // 40,
        )
        searched += 1
        if res.complete:
            proven[i] = True
            if res.order is not None:
                order[a:b] = res.order
                value = int(res.peak)
            else:
                value = seg_peak[i]
            floor = max(floor, value)
        else:
            floor = max(floor, int(res.bound))
            stopped_reason = stopped_reason or ("time" if work_clock() >= deadline else "state limit")
    order = check_order(graph, order)
    peak = int(profile(graph, order, inplace).peak)
    optimal = all(proven) or peak <= floor
    lb = peak if optimal else min(floor, peak)
    info.update(
        segments=len(segments), cut_ops=int(len(cuts)), searched_segments=searched,
        solved_segments=int(sum(proven)), stopped=None if optimal else stopped_reason,
        seconds=round(work_clock() - t0, 4),
    )
    return ExactResult(order, peak, bool(optimal), int(lb), info)


def _solve_contracted(graph: Graph, chains: Contraction, *, incumbent: np.ndarray | None, **search: Any) -> ExactResult:
    """:func:`solve_exact` on the graph with its chains contracted (same optimum, fewer states); keeps
    the caller's incumbent when the search ends above it."""
    given = None if incumbent is None else check_order(graph, incumbent)
    inner = solve_exact(chains.graph, incumbent=None if given is None else chains.contract(given), **search)
    order, peak = chains.expand(inner.order), int(inner.peak)
    if given is not None and not inner.optimal:
        given_peak = int(profile(graph, given, search["inplace"]).peak)
        if given_peak < peak:
            order, peak = given.copy(), given_peak
    info = {**inner.info, "contracted_ops": chains.graph.n_ops}
    return ExactResult(order, peak, inner.optimal, min(int(inner.lower_bound), peak), info)


@register("exact", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    t0 = work_clock()
    res = solve_exact(
        graph, inplace=ctx.inplace, time_limit=ctx.time_limit, seed=ctx.seed,
        max_states=ctx.option("max_states", None), max_total=int(ctx.option("max_total", 10_000_000)),
    )
    order, peak, bound, info = res.order, res.peak, res.lower_bound, dict(res.info)
    deadline = t0 + float(ctx.time_limit)
    if not res.optimal and work_clock() < deadline:  # the search stopped early: the time left raises the bound
        chains = contract_chains(graph, ctx.inplace)  # same peaks, fewer ops
        found = pattern_bound(chains.graph, ctx.inplace, peak, deadline=work_clock() + 0.5 * (deadline - work_clock()),
                              floor=bound)
        bound = max(bound, found.bound)
        info["pattern"] = {"bound": found.bound, "peak": found.peak, "ops": found.pattern, "rounds": found.rounds}
        if found.order is not None and found.peak < peak:
            order, peak = chains.expand(found.order), found.peak
    if peak > bound and work_clock() < deadline:
        probed = probe_bound(graph, ctx.inplace, bound, peak, deadline=deadline)
        bound = max(bound, probed.bound)
        info["probe"] = {"bound": probed.bound, "probes": probed.probes, "complete": probed.complete}
    return make_schedule(graph, order, "exact", ctx.inplace, optimal=res.optimal, bound=min(bound, peak), **info)
