"""Generate, filter by the proxy, choose on the target: paper 002's pipeline (Figure 1) for every makespan method.

A candidate generator (the GFlowNet, BRKGA's final population, the learned
priority sampler, ...) hands its chain schedules to :func:`select`, which

1. times them all on the proxy (the problem itself; eq. 2-3), drops duplicates
   (paper 002 takes the top 100 of the raw samples; evaluating one schedule twice
   on the target buys nothing, so here repeats are dropped first -- this raises
   the diversity of every sampler that repeats itself, BRKGA's elites and a cold
   GFlowNet alike) and keeps the ``top_k`` fastest;
2. times those on the *target* (``--target``): ``proxy``, a pure target model of
   :mod:`onnx_sched.cost.makespan.targets` (``noisy``, ``bandwidth``,
   ``latency``) or ``measured`` (real runs, :mod:`._measured_target`);
3. returns the best on the target (ties: the better proxy makespan; the better
   of two references, no split and list-cp, when it beats every candidate there,
   named ``METHOD:no-split`` / ``METHOD:list-cp``) as a
   validated :class:`Schedule` whose ``info`` has the report's ``target``
   (``model``, ``speedup``, ``proxy_best_speedup``), ``diversity`` (GED, d_inv,
   d_sen over the top k, paper 002 E.2) and ``candidates`` (top k with proxy and
   target speedups).  With no candidate (a sampler that could not finish one
   trajectory in time, or a measured target that timed none) the better reference
   is returned and ``proxy_best_speedup`` is ``None``.

Single-schedule methods are evaluated on the target by the objective
(:func:`target_report`), so ``--target`` works with every method.  Options:
``candidates`` (how many to generate, default 1000), ``top_k`` (100),
``target`` (``proxy``), ``temperature`` (GFlowNet sigma, 0.005), ``target_seed``
(the noisy target's draw, 0), ``repeats`` (measured target, 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, chain_schedule, chain_times, chains_of, lanes_of
from onnx_sched.cost.makespan.diversity import diversity, time_unit
from onnx_sched.cost.makespan.problem import _topo
from onnx_sched.cost.makespan.targets import MODEL_TARGETS, target_model
from onnx_sched.deadline import Deadline
from onnx_sched.passes import PassContext
from onnx_sched.passes.makespan._priorities import cp_priority
from onnx_sched.schedule import Schedule

__all__ = ["CandidateOptions", "chains_from_priorities", "rank_top", "select", "target_makespan", "target_report",
           "target_speedups"]

TARGETS = (*MODEL_TARGETS, "measured")


@dataclass(frozen=True)
class CandidateOptions:
    """The candidate pipeline's options (see module docstring)."""

    count: int = 1000
    top_k: int = 100
    target: str = "proxy"
    temperature: float = 0.005
    target_seed: int = 0
    repeats: int = 10

    def __post_init__(self) -> None:
        if self.count < 1 or self.top_k < 1:
            raise ValueError(f"candidates and top_k must be >= 1, got {self.count} and {self.top_k}")
        if self.target not in TARGETS:
            raise ValueError(f"unknown --target {self.target!r}; choose from {', '.join(TARGETS)}")
        if not 0 < self.temperature < float("inf"):
            raise ValueError(f"--temperature must be positive and finite, got {self.temperature}")

    @staticmethod
    def of(ctx: PassContext) -> CandidateOptions:
        return CandidateOptions(
            count=int(ctx.option("candidates", 1000)), top_k=int(ctx.option("top_k", 100)),
            target=str(ctx.option("target", "proxy")), temperature=float(ctx.option("temperature", 0.005)),
            target_seed=int(ctx.option("target_seed", 0)), repeats=int(ctx.option("repeats", 10)))


def chains_from_priorities(problem: ms.MakespanProblem, priorities: np.ndarray) -> Chains:
    """The chain schedule list scheduling makes of each priority vector (rows of ``priorities``)."""
    parts = []
    for prio in np.atleast_2d(priorities):
        start, place, _ = ms.run_list(problem, prio)
        parts.append(chains_of(problem, Schedule(order=np.argsort(start, kind="stable"), method="list",
                                                 placement=place, start=start)))
    return Chains.concat(parts)


def _unique(chains: Chains) -> np.ndarray:
    """Indices of the first occurrence of each distinct chain schedule (same lanes, same per-lane order)."""
    seen: dict[bytes, int] = {}
    for k in range(len(chains)):
        lane, order = chains.lane[k], chains.order[k]
        per_lane = order[np.argsort(lane[order], kind="stable")]
        seen.setdefault(lane.tobytes() + per_lane.tobytes(), k)
    return np.fromiter(seen.values(), dtype=np.int64)


def target_speedups(problem: ms.MakespanProblem, chains: Chains, opts: CandidateOptions,
                    ctx: PassContext, deadline: Deadline | None = None, first: Sequence[int] = ()) -> np.ndarray:
    """Speedup of each chain schedule on the target (``total work / makespan``; measured: single / split).
    A measured target with a ``deadline`` measures the chains ``first`` and then what fits (NaN: not measured)."""
    if opts.target == "measured":
        from onnx_sched.passes.makespan._measured_target import measured_speedups

        return measured_speedups(problem, chains, ctx, opts.repeats, deadline=deadline, first=first)
    target = target_model(opts.target, opts.target_seed).problem(problem)
    _, makespans = chain_times(target, chains, check=False)
    return target.total_work() / np.maximum(makespans, 1e-300)


def rank_top(problem: ms.MakespanProblem, chains: Chains, top_k: int) -> tuple[Chains, np.ndarray, np.ndarray]:
    """The ``top_k`` distinct chain schedules by proxy makespan: ``(chains, proxy start times, proxy speedups)``,
    best first (ties: generation order)."""
    chains = chains.take(_unique(chains))
    start, makespans = chain_times(problem, chains)
    rank = np.lexsort((np.arange(len(chains)), makespans))[:top_k]
    return chains.take(rank), start[rank], problem.total_work() / np.maximum(makespans[rank], 1e-300)


def first_lane(problem: ms.MakespanProblem) -> Chains:
    """The schedule that splits nothing: every op on the first lane that can run it, in topological order."""
    lanes = lanes_of(problem)
    lane = np.argmax(problem.allowed[:, lanes.unit], axis=1)
    return Chains(lane, _topo(problem))


def select(problem: ms.MakespanProblem, chains: Chains, ctx: PassContext, method: str,
           deadline: Deadline | None = None, **info: Any) -> Schedule:
    """Filter ``chains`` by the proxy, choose on the target (see module docstring).

    Beside the top k, the target also times two references: :func:`first_lane` (no split at all)
    and list-cp (the objective's baseline).  When no candidate beats the better of the two on the
    target, that reference is the result (``info["chosen"]``), so a target that punishes what the
    proxy ignores never gets a candidate worse than no split or than the baseline.  A measured target
    with a ``deadline`` (``ctx.measure_deadline``, else the pass's own) times the proxy-best
    candidate and the references, then the others in proxy order while the runs end in time; the top k
    shrinks to those (``info["measured_candidates"]``).
    """
    opts = CandidateOptions.of(ctx)
    generated = len(chains)
    top, top_start, proxy = rank_top(problem, chains, opts.top_k)
    spread = diversity(top, top_start / time_unit(problem.durations), lanes_of(problem).n)  # of the whole top k
    refs = {"no-split": first_lane(problem),
            "list-cp": chains_of(problem, ms.list_schedule(problem, cp_priority(problem)))}
    timed = Chains.concat([top, *refs.values()])
    if opts.target == "measured" and ctx.options.get("warm_up"):
        target = np.append(proxy, np.zeros(len(refs)))
    else:
        k = len(top)
        target = target_speedups(problem, timed, opts, ctx, deadline=deadline, first=[0, k, k + 1])
    if opts.target == "measured":
        kept = np.flatnonzero(np.isfinite(target[:len(top)]))  # the candidates measured in time, proxy order
        top, proxy = top.take(kept), proxy[kept]
        target = np.append(target[kept], target[-len(refs):])
        timed = Chains.concat([top, *refs.values()])
        info["measured_candidates"] = len(top)
    k = len(top)
    ref_best = k + int(np.argmax(target[k:]))
    pick = ref_best  # no candidate (none generated in time, or none measured): the better reference
    if k:
        best = int(np.lexsort((-proxy, -target[:k]))[0])
        pick = ref_best if target[ref_best] > target[best] else best
    asked = info.get("candidates_asked")
    if asked is not None and generated < asked:  # a sampler the time limit stopped
        info["notes"] = [f"{method} generated {generated} of the {asked} candidates asked for before the time limit "
                         "(a longer --time-limit gives more)"]
    chosen = list(refs)[pick - k] if pick >= k else f"candidate {pick}"
    report = {
        "target": {"model": opts.target, "speedup": float(target[pick]),
                   "proxy_best_speedup": float(target[0]) if k else None,
                   **{f"{name}_speedup": float(t) for name, t in zip(refs, target[k:])}},
        "diversity": spread,
        "candidates": [{"proxy_speedup": float(p), "target_speedup": float(t)} for p, t in zip(proxy, target)],
        "candidates_generated": generated, "candidates_unique": len(_unique(chains)),
        "chosen": chosen,
    }
    label = f"{method}:{chosen}" if pick >= k else method  # a reference won, as auto says which of its methods did
    return chain_schedule(problem, timed.lane[pick], timed.order[pick], label, **report, **info)


def target_makespan(problem: ms.MakespanProblem, schedule: Schedule, ctx: PassContext) -> float:
    """The schedule's makespan on the context's target (a measured target reuses ``info["target"]``)."""
    opts = CandidateOptions.of(ctx)
    if opts.target == "proxy":
        return float(ms.evaluate(problem, schedule).makespan)
    speedup = target_report(problem, schedule, ctx)["speedup"]
    if opts.target == "measured":
        return 1.0 / speedup  # seconds are not comparable across calls; the inverse speedup is
    return target_model(opts.target, opts.target_seed).problem(problem).total_work() / speedup


def target_report(problem: ms.MakespanProblem, schedule: Schedule, ctx: PassContext) -> dict[str, Any]:
    """``{"model", "speedup", "proxy_best_speedup"}`` of any schedule (a candidate pass's own, if it has one)."""
    opts = CandidateOptions.of(ctx)
    known = schedule.info.get("target")
    if isinstance(known, dict) and known.get("model") == opts.target:
        return dict(known)
    chains = chains_of(problem, schedule)
    if opts.target == "measured" and ctx.options.get("warm_up"):
        value = float(ms.evaluate(problem, schedule).speedup)
    else:
        value = float(target_speedups(problem, chains, opts, ctx, deadline=ctx.measure_deadline, first=[0])[0])
    return {"model": opts.target, "speedup": value, "proxy_best_speedup": value}
