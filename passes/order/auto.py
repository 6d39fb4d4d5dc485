"""``auto``: a portfolio of the peak-memory passes within ``ctx.time_limit``.

1. the cheap heuristics (file order, greedy, dfs, xla_dfs, bfs), a batch of
   random orders and the learned policy (``learned``, sample-16; graphs of up to
   ``learned_max_ops`` ops, default 3000, since the encoder's attention is
   quadratic in the op count; skipped with a note in ``info`` when its checkpoint
   is missing or ``learned=0``);
2. beam searches (approximate DP) of growing width (x4 from 16) while the next one
   is predicted to fit in about half of the time left (capped by option
   ``beam_width``, default 10 000); these beams keep no cutoff at the best peak so
   far, because the repair (below) can take their order from far above it to below it;
3. the exact search (:func:`onnx_sched.passes.order.exact.solve_exact`) on the time that
   remains, seeded with the best order so far; it may prove optimality or a
   lower bound.  When it stops at its state cap, it runs again with a 4x larger cap
   (up to its memory budget) from the bound it proved, while a round is predicted to
   fit in half the time left (:func:`exact_rounds`).  When it still stops early, the
   rest of the time goes to beams as wide as the measured speed allows (re-measured
   after each; up to ``beam_width`` when given, else :func:`final_beam_cap`), to
   tighten the peak.
4. Before those final beams, when nothing is proven yet, the pattern bound
   (:mod:`onnx_sched.cost.memory_pattern`, on up to :data:`PATTERN_SHARE` of the time left)
   couples the steps of a growing set of critical ops; the order it builds is offered, and
   when its peak meets the bound the search is over.  Then probing
   (:mod:`onnx_sched.cost.memory_probe`, on up to :data:`PROBE_SHARE` of the time left)
   finds precedences that every order below the best peak obeys (or proves there is none).
   The final beams search the graph they constrain: every better order obeys them, and
   partial orders that do not are no longer kept.  On graphs of up to
   :data:`PROBE_FIRST_MAX_OPS` ops it first raises the bound by refuting thresholds between it
   and the best peak and runs a few beams on the graph constrained at the smallest threshold
   not refuted (:func:`probe_phase`).  The time the final beams leave goes to another
   bisection (probing every op on graphs of up to :data:`PROBE_FIRST_MAX_OPS` ops, where that
   is cheap) and beams near the bound it reaches.

Every order offered (except the file order itself) first goes through the min-cut repair
(:mod:`onnx_sched.passes.order._repair`, on at most :data:`REPAIR_SHARE` of the time left).
Beams, exact search, the min-cut bound and probing all work on the graph with its chains
contracted (:mod:`onnx_sched.cost.memory_chains`: the same peaks and optimum, 25-45 % fewer ops on
the corpus networks); their orders are expanded before they are compared.

The best order wins.  It is never worse than the file order: if nothing beats the
file order, the file order is returned with ``info["kept_input_order"] = True``.
``lower_bound`` is the best bound proven: the must-live and min-cut graph bounds (the
latter computed once the cheap orders are in, on at most ``CUT_SHARE`` of the time left),
exact search, the pattern bound or probing;
``optimal`` when the exact search proved it or the peak meets the bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.cost.memory_chains import contract_chains
from onnx_sched.cost.memory_cut_bound import cut_lower_bound
from onnx_sched.cost.memory_pattern import pattern_bound
from onnx_sched.cost.memory_probe import CRITICAL_OPS, precedences_below, probe_bound, with_precedences
from onnx_sched.dag import largest_frontier
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order import exact
from onnx_sched.passes.order._common import make_schedule, peak_of
from onnx_sched.passes.order._portfolio import cheap_orders
from onnx_sched.passes.order._repair import repair
from onnx_sched.passes.order.beam import beam_search
from onnx_sched.passes.order.exact import CUT_SHARE
from onnx_sched.passes.order.random_orders import best_random_order
from onnx_sched.schedule import Schedule

__all__ = ["run"]

DEFAULT_MAX_WIDTH = 10_000
#: Widest final beam on graphs of 1,000 ops or more (when no ``beam_width`` is given): about 1.6 GB of
#: back-pointers (8 bytes per state and layer) at 1,000 ops.
FINAL_BEAM_MAX = 200_000
#: Widest final beam on any graph.
FINAL_BEAM_CEIL = 1_000_000
#: Bytes the children of one final-beam layer may take (32 bytes a child, one per ready op of each state): what
#: a width-:data:`FINAL_BEAM_MAX` beam with 100 ready ops a state takes.
FINAL_BEAM_CHILD_BYTES = FINAL_BEAM_MAX * 100 * 32


def final_beam_cap(n_ops: int, frontier: int) -> int:
    """Widest final beam for a graph of ``n_ops`` ops with at most about ``frontier`` ops ready at once: the
    back-pointers of a width-:data:`FINAL_BEAM_MAX` beam at 1,000 ops spread over fewer layers, and children
    within :data:`FINAL_BEAM_CHILD_BYTES`, between :data:`FINAL_BEAM_MAX` and :data:`FINAL_BEAM_CEIL`
    (sbm-80, 12-15 ready ops: a width-10^6 beam lowers the peak from 40.00 to 38.64 MiB in 27 s,
    ``benchmarks/beam_timing.py``).

    >>> final_beam_cap(80, 15), final_beam_cap(200, 66), final_beam_cap(400, 20), final_beam_cap(5000, 10)
    (1000000, 303030, 500000, 200000)
    """
    by_layers = FINAL_BEAM_MAX * 1000 // max(int(n_ops), 1)
    by_children = FINAL_BEAM_CHILD_BYTES // (32 * max(int(frontier), 1))
    return min(FINAL_BEAM_CEIL, max(FINAL_BEAM_MAX, min(by_layers, by_children)))


CALIBRATION_WIDTH = 16
LEARNED_MAX_OPS = 3000
LEARNED_SAMPLES = 16
#: Share of the time left that the learned pass's repairs may use (they take 0.1-0.5 s at 800 ops).
LEARNED_SHARE = 0.15
#: Share of the time left after which the learned pass's encoder is stopped and ``auto`` goes on without it
#: (its one forward pass is quadratic in ops: 0.5-0.9 s at 3,000 ops, 5-8 s at 8,400 on this 2-core machine).
ENCODER_SHARE = 0.5
#: Share of the time left that repairing one offered order may use (a round costs milliseconds).
REPAIR_SHARE = 0.05
#: Share of the time left that probing may use before the final beams: a third each for the precedences
#: below the best peak, the bisection and the beams near the bound.
PROBE_SHARE = 0.3
#: Share of the time left the pattern bound may use (after the exact rounds).
PATTERN_SHARE = 0.3
#: Larger graphs bisect only with the time the final beams leave: there a probe costs seconds and
#: the final beams' width decides the peak (ws-400: 213 MiB without probing first, 235 with it).
PROBE_FIRST_MAX_OPS = 300


def _best_name(peaks: dict[str, int]) -> str:
    """The candidate with the lowest peak; on a tie, the file order first."""
    return min(peaks, key=lambda k: (peaks[k], k != "file"))


def learned_order(graph: Graph, ctx: PassContext, seconds: float,
                  encoder_seconds: float) -> tuple[np.ndarray | None, str]:
    """The learned pass's sample-16 order (its encoder stopped after ``encoder_seconds``, its repairs within
    ``seconds``), or ``(None, why not)``."""
    from onnx_sched.errors import OnnxSchedError
    from onnx_sched.passes import get_pass

    if not int(ctx.option("learned", 1)):
        return None, "disabled"
    if graph.n_ops > int(ctx.option("learned_max_ops", LEARNED_MAX_OPS)):
        return None, f"skipped: {graph.n_ops} ops > learned_max_ops"
    model = ctx.option("model", None)
    sub = PassContext(time_limit=seconds, seed=ctx.seed, inplace=ctx.inplace,
                      options={"samples": LEARNED_SAMPLES, "encoder_seconds": encoder_seconds,
                               **({"model": model} if model else {})})
    try:
        return get_pass("learned", "peak-mem")(graph, sub).order, "ok"
    except OnnxSchedError as exc:  # e.g. the checkpoint is missing from this install, or the encoder was stopped
        return None, f"unavailable: {exc}"


def exact_rounds(graph: Graph, ctx: PassContext, clock: Deadline, offer: Any, peaks: dict[str, int],
                 orders: dict[str, np.ndarray], info: dict[str, Any], state_rate: float, graph_lb: int) -> tuple[int, bool]:
    """Exact search seeded with the best order, repeated with a 4x larger state cap (up to the memory
    budget) while it stops at its cap and the next round is predicted to fit in half of the time left;
    each round starts from the bound the previous one proved (the first from ``graph_lb``).  Returns
    (proven bound, proved)."""
    proven_lb = int(graph_lb)
    cap = max(1000, int(state_rate * max(clock.left(), 0.0) / 20))
    limit = exact.default_max_states(graph.n_ops)
    rounds = []
    while True:
        best_name = _best_name(peaks)
        t0 = work_clock()
        res = exact.solve_exact(graph, inplace=ctx.inplace, time_limit=clock.left(), incumbent=orders[best_name],
                                seed=ctx.seed, max_states=min(cap, limit), known_bound=proven_lb)
        took = work_clock() - t0
        if res.peak < peaks[best_name]:
            offer("exact", res.order)
        proven_lb = max(proven_lb, res.lower_bound)
        rounds.append({"max_states": min(cap, limit), "stopped": res.info.get("stopped"), "seconds": round(took, 3)})
        info["exact"] = {k: res.info.get(k) for k in ("segments", "searched_segments", "solved_segments", "stopped")}
        if res.optimal or res.info.get("stopped") != "state limit" or cap >= limit or 4 * took > 0.5 * clock.left():
            break
        cap *= 4
    info["exact_rounds"] = len(rounds)
    return proven_lb, bool(res.optimal)


def pattern_phase(graph: Graph, ctx: PassContext, clock: Deadline, offer: Any, best_peak: Any, proven_lb: int,
                  info: dict[str, Any]) -> int:
    """The pattern bound (module docstring, step 4) on up to :data:`PATTERN_SHARE` of the time left: its
    best order is offered, and the bound returned (at least ``proven_lb``)."""
    found = pattern_bound(graph, ctx.inplace, best_peak(), deadline=work_clock() + PATTERN_SHARE * clock.left(),
                          floor=proven_lb)
    if found.order is not None:
        offer("pattern", found.order)
    info["pattern"] = {"bound": found.bound, "peak": found.peak, "ops": found.pattern, "rounds": found.rounds,
                       "cuts": found.cuts}
    return max(proven_lb, found.bound)


def probe_phase(graph: Graph, ctx: PassContext, clock: Deadline, offer: Any, best_peak: Any, proven_lb: int,
                info: dict[str, Any]) -> tuple[Graph, int, bool]:
    """Probing before the final beams (module docstring, step 4).  Returns the graph the final beams should
    search (constrained by the precedences every order below the best peak obeys), the bound, and whether
    the bisection should go on with the time the final beams leave."""
    share = lambda f: work_clock() + f * clock.left()  # noqa: E731
    below_best = precedences_below(graph, ctx.inplace, best_peak(), deadline=share(PROBE_SHARE / 3))
    info["probe"] = {"precedences_below_best": len(below_best.precedences)}
    if below_best.refuted:
        info["probe"]["bound"] = best_peak()
        return graph, best_peak(), False
    if graph.n_ops > PROBE_FIRST_MAX_OPS:
        return with_precedences(graph, below_best.precedences), proven_lb, True  # the beams first
    probed = probe_bound(graph, ctx.inplace, proven_lb, best_peak() - 1, deadline=share(PROBE_SHARE / 3))
    proven_lb = max(proven_lb, probed.bound)
    info["probe"].update(bound=probed.bound, threshold=probed.threshold, precedences=len(probed.precedences),
                         probes=probed.probes, complete=probed.complete)
    if probed.threshold < best_peak():  # a few cheap beams where orders near the bound can only be
        beams_near_bound(graph, ctx, clock, offer, best_peak, proven_lb, probed.precedences,
                         PROBE_SHARE / 3 * clock.left(), int(ctx.option("beam_width", DEFAULT_MAX_WIDTH)), info)
    return with_precedences(graph, below_best.precedences), proven_lb, not probed.complete


def beams_near_bound(graph: Graph, ctx: PassContext, clock: Deadline, offer: Any, best_peak: Any, proven_lb: int,
                     precedences: np.ndarray, seconds: float, max_width: int, info: dict[str, Any]) -> None:
    """Beams of growing width (x4 from 16) on the graph constrained by ``precedences`` (those of a threshold
    near the bound: every order below it obeys them) for about ``seconds``."""
    if len(precedences) == 0:
        return
    near = with_precedences(graph, precedences)
    end, width = clock.elapsed() + seconds, CALIBRATION_WIDTH
    while best_peak() > proven_lb and clock.elapsed() < end and width <= max_width:
        t0 = work_clock()
        order, _ = beam_search(near, width, inplace=ctx.inplace, seed=ctx.seed,
                               time_limit=max(end - clock.elapsed(), 0.0), cutoff=best_peak())
        if order is not None and peak_of(graph, order, ctx.inplace) < best_peak():
            offer("probe_beam", order)
            info["probe_beam_width"] = width
        if clock.elapsed() + 4 * (work_clock() - t0) > end:
            break
        width *= 4


@register("auto", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    clock = Deadline(ctx.time_limit)
    inplace = ctx.inplace
    graph_lb = int(lower_bound(graph, inplace))
    peaks: dict[str, int] = {}
    orders: dict[str, np.ndarray] = {}
    info: dict[str, Any] = {}

    def offer(name: str, order: np.ndarray) -> bool:
        """Keep ``order`` under ``name``, min-cut repaired (the file order as given), unless ``name``
        already holds one at least as good; returns whether it was kept."""
        order = np.asarray(order, dtype=np.int64)
        peak = peak_of(graph, order, inplace)
        repaired = False
        if name != "file" and clock.left() > 0:
            fixed = repair(graph, order, inplace, deadline=work_clock() + REPAIR_SHARE * clock.left())
            fixed_peak = peak_of(graph, fixed, inplace)
            if fixed_peak < peak:
                order, peak, repaired = fixed, fixed_peak, True
        if name in peaks and peaks[name] <= peak:
            return False
        if repaired:
            info.setdefault("repaired", []).append(name)
        orders[name], peaks[name] = order, peak
        return True

    chains = contract_chains(graph, inplace)  # searches, bounds and probes run on the contracted graph
    short = chains.graph

    def offer_short(name: str, order: np.ndarray) -> bool:
        return offer(name, chains.expand(order))

    for name, order in cheap_orders(graph, inplace, clock).items():
        offer(name, order)
    best_peak = lambda: min(peaks.values())  # noqa: E731

    if best_peak() > graph_lb and clock.left() > 0:
        samples = int(ctx.option("samples", 100))
        order, _, drawn = best_random_order(graph, samples, inplace=inplace, seed=ctx.seed, time_limit=0.1 * clock.left())
        offer("random", order)
        info["random_samples"] = drawn

    if best_peak() > graph_lb and clock.left() > 0:
        order, status = learned_order(graph, ctx, LEARNED_SHARE * clock.left(), ENCODER_SHARE * clock.left())
        if order is not None:
            offer("learned", order)
        info["learned"] = status

    if best_peak() > graph_lb and clock.left() > 0:
        best_name = _best_name(peaks)
        cut = cut_lower_bound(short, inplace, chains.contract(orders[best_name]),
                              deadline=work_clock() + CUT_SHARE * clock.left())
        graph_lb = max(graph_lb, cut.bound)
        info["cut_bound"] = {"bytes": cut.bound, "cuts": cut.cuts, "complete": cut.complete}

    max_width = int(ctx.option("beam_width", DEFAULT_MAX_WIDTH))
    state_rate = 1e5  # states expanded per second, measured by the beam ladder
    width = CALIBRATION_WIDTH // 4

    def beam_ladder(share: float) -> None:
        """Beams of growing width (x4) while the next one is predicted to fit ``share`` of the time left."""
        nonlocal width, state_rate
        budget_end = clock.elapsed() + share * clock.left()
        last = 0.0
        while best_peak() > graph_lb and width < max_width and graph.n_ops > 0:
            nxt = min(max_width, width * 4)
            if last and clock.elapsed() + last * nxt / width > budget_end:
                break
            t0 = work_clock()
            last_width = beam(nxt, max(budget_end - clock.elapsed(), 0.0), cut=False)
            last = work_clock() - t0
            width = nxt
            state_rate = max(last_width / max(last, 1e-6), 1.0)
            if clock.elapsed() >= budget_end:
                break

    def beam(w: int, seconds: float, on: Graph = short, cut: bool = True) -> int:
        """One beam (over ``on``: the contracted graph or a constrained copy); its order is offered, so
        repaired.  With ``cut`` it keeps only states below the best peak so far (cheap when nothing
        better exists); without, it always ends with an order, which the repair may take from far
        above the best peak to below it (ba-400: beam 1000 at 451 MiB, repaired 310, best before 352).
        Returns states expanded."""
        order, res = beam_search(on, w, inplace=inplace, seed=ctx.seed, time_limit=seconds,
                                 cutoff=best_peak() if cut else None)
        if order is not None and offer_short("beam", order):
            info["beam_width"] = w
        return sum(res.widths)

    if best_peak() > graph_lb and clock.left() > 0:
        beam_ladder(0.5)

    proven_lb, proved = graph_lb, False
    best_name = _best_name(peaks)
    if peaks[best_name] > graph_lb and clock.left() > 0.05:
        proven_lb, proved = exact_rounds(graph, ctx, clock, offer, peaks, orders, info, state_rate, graph_lb)
        search, bisect_later = short, False
        if not proved and graph.n_ops > 0 and clock.left() > 0.05:
            proven_lb = pattern_phase(short, ctx, clock, offer_short, best_peak, proven_lb, info)
        if not proved and graph.n_ops > 0 and best_peak() > proven_lb and clock.left() > 0.05:
            search, proven_lb, bisect_later = probe_phase(short, ctx, clock, offer_short, best_peak, proven_lb, info)
        if not proved and graph.n_ops > 0:
            # the exact search gave up early: spend the rest on beams as wide as fit, re-measuring the speed
            best_short = chains.contract(orders[_best_name(peaks)])
            cap = int(ctx.option("beam_width", final_beam_cap(short.n_ops, largest_frontier(short, best_short))))
            done = width
            while clock.left() > 0.05 and best_peak() > proven_lb:
                nxt = min(int(0.8 * state_rate * clock.left() / short.n_ops), max(cap, width))
                if nxt <= done:
                    break
                t0 = work_clock()
                expanded = beam(nxt, 0.95 * clock.left(), search)
                state_rate = max(expanded / max(work_clock() - t0, 1e-6), 1.0)
                done = info["final_beam_width"] = nxt
        if not proved and graph.n_ops > 0 and best_peak() > proven_lb and clock.left() > 0.1:
            # no wider beam fits: the rest of the time bisects again (probing every op, on graphs where that
            # is cheap), then beams near the new bound
            critical = CRITICAL_OPS if bisect_later or short.n_ops > PROBE_FIRST_MAX_OPS else short.n_ops
            more = probe_bound(short, inplace, proven_lb, best_peak() - 1, critical=critical,
                               deadline=work_clock() + 0.9 * clock.left())
            proven_lb = max(proven_lb, more.bound)
            info.setdefault("probe", {}).update(bound=proven_lb, later_probes=more.probes, later_critical=critical,
                                                complete=more.complete)
            if more.threshold < best_peak():
                beams_near_bound(short, ctx, clock, offer_short, best_peak, proven_lb, more.precedences,
                                 0.9 * clock.left(), cap, info)

    best_name = _best_name(peaks)
    kept = "file" in peaks and peaks[best_name] >= peaks["file"]
    if kept:
        best_name = "file"
    return make_schedule(
        graph, orders[best_name], "auto", inplace, optimal=proved and peaks[best_name] <= proven_lb,
        bound=min(proven_lb, peaks[best_name]), chosen=best_name, kept_input_order=kept,
        candidates=dict(peaks), seconds=round(clock.elapsed(), 4), **info,
    )
