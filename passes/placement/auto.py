"""Two single-device baselines named after OpenVINO's AUTO plugin, and the ``auto`` placement portfolio.

``auto-gpu-first`` and ``auto-cpu-first`` are single-device placements by
construction, scored by the latency model: they are *not* runs of OpenVINO's AUTO
plugin.  They stand for what AUTO would do in steady state -- AUTO runs the whole
model on one device chosen from a priority list (default dGPU > iGPU > CPU) and
does not split a model -- so ``auto-gpu-first`` is the first GPU in that order
(the CPU when there is none) and ``auto-cpu-first`` the CPU, i.e. the same
placements as ``gpu-only`` / ``cpu-only`` up to the choice among GPUs.  Not
modelled: AUTO's CPU acceleration at start-up (serving the first inferences on
the CPU while the GPU compiles), its per-op CPU fallback, and its runtime device
selection.

``auto`` is the portfolio for objective ``latency``: every single-device placement,
HEFT, the learned HSDAG placer (a third of the time left; skipped when its
checkpoint is missing), then the sequential-latency optimum: min-cut for two devices,
otherwise CP-SAT on the time that remains, hinted with the best placement so far (skipped,
``info["cpsat_skipped"]``, when its model alone would take longer to build than the time left).
Everything is scored under the problem's latency mode and the best wins, so it is
never worse than CPU-only.  With ``--target measured`` the candidates are run for real and the fastest wins
(:func:`measured_choice`; ``info["target_candidates"]``, ``info["proxy_best_speedup"]``), in the time the caller
held back for those runs (``ctx.measure_deadline``) and what the search left.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, get_pass, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.passes.placement._optimal import cpsat_build_seconds, cpsat_placement
from onnx_sched.passes.placement.single import first_gpu, single_device
from onnx_sched.schedule import Schedule


def _first_gpu(problem) -> int:  # noqa: ANN001
    gpu = first_gpu(problem)
    return problem.device_index("cpu") if gpu is None else gpu


@register("auto-gpu-first", objective="latency")
def auto_gpu_first(graph: Graph, ctx: PassContext) -> Schedule:
    """Every op on the first GPU of the priority order (the CPU without GPUs): a single-device
    placement standing for OpenVINO AUTO's steady state, not a run of the AUTO plugin."""
    problem = problem_of(graph, ctx)
    return make_placement_schedule(problem, single_device(problem, _first_gpu(problem)), "auto-gpu-first")


@register("auto-cpu-first", objective="latency")
def auto_cpu_first(graph: Graph, ctx: PassContext) -> Schedule:
    """Every op on the CPU: a single-device placement, not a run of the AUTO plugin."""
    problem = problem_of(graph, ctx)
    return make_placement_schedule(problem, single_device(problem, problem.device_index("cpu")), "auto-cpu-first")


#: CP-SAT's time when the candidates before it used up the budget (it still proves small problems).
MIN_EXACT_SECONDS = 0.3


@register("auto", objective="latency")
def portfolio(graph: Graph, ctx: PassContext) -> Schedule:
    from onnx_sched.bench.runtimes.placement_timing import measured_target_seconds

    start = Deadline(ctx.time_limit)
    problem = problem_of(graph, ctx)
    if problem.n_devices == 1:  # one placement there is: nothing to search, nothing to choose by measuring
        return make_placement_schedule(problem, single_device(problem, 0), f"single:{problem.device_names[0]}",
                                       optimal=True)
    measuring = ctx.measure_by(start)  # on a measured target, the runs
    # the search's: measured_choice also times the single devices besides the host (the caller held back the result's)
    clock = Deadline(max(start.left() - measured_target_seconds(ctx, problem.device_names, rows=0,
                                                                singles=problem.n_devices - 1), 0.1))
    candidates: list[Schedule] = []
    for d in range(problem.n_devices):
        candidates.append(make_placement_schedule(problem, single_device(problem, d), f"single:{problem.device_names[d]}"))
    for name, share in (("heft-place", 1.0), ("hsdag", 1 / 3)):
        try:
            candidates.append(get_pass(name, "latency")(graph, replace(ctx, time_limit=max(0.1, share * clock.left()))))
        except ValueError:  # e.g. the HSDAG checkpoint is missing from this install
            continue
    best = min(candidates, key=lambda s: s.info["latency"])
    skipped = None
    if problem.n_devices == 2:
        candidates.append(get_pass("mincut", "latency")(graph, ctx))
    elif problem.n_devices > 2 and cpsat_build_seconds(problem) > max(clock.left(), MIN_EXACT_SECONDS):
        skipped = f"model too large to build in the {max(clock.left(), 0.0):.1f} s left"
    elif problem.n_devices > 2:  # tried even when late: HSDAG's episodes may overrun their share on a loaded machine
        p, value, optimal = cpsat_placement(problem, max(clock.left(), MIN_EXACT_SECONDS), hint=best.placement,
                                            seed=ctx.seed)
        candidates.append(make_placement_schedule(problem, p, "cpsat-place", optimal=optimal and problem.mode == "sequential",
                                                  sequential_latency=value, proven_sequential_optimum=optimal))
    best = min(candidates, key=lambda s: (s.info["latency"], not s.optimal))  # ties: the proven one
    tried = {s.method: s.info["latency"] for s in candidates}
    measured = {}
    if str(ctx.option("target", "proxy")) == "measured" and not ctx.option("warm_up", False):
        best, measured = measured_choice(ctx, candidates, best, measuring)
    return best.with_(info={**best.info, "portfolio": tried, **({"cpsat_skipped": skipped} if skipped else {}),
                            **measured})


def measured_choice(ctx: PassContext, candidates: list[Schedule], proxy_best: Schedule,
                    clock: Deadline) -> tuple[Schedule, dict]:
    """With ``--target measured``: the candidate that ran fastest, and for the report ``target_candidates`` (each
    timed candidate's method, predicted latency and measured speedup over host-only) and ``proxy_best_speedup``.
    The single-device placements and the model's choice are always timed, in one interleaved run, so the choice is
    never slower than any of them there; the others in predicted order while time is left.  The latency model
    misses costs a real split pays (docs/results.md 17.3: on an H200, splits it planned ran 2-4x slower than the
    whole model on the GPU before its boundaries were measured), and measuring is the check."""
    from onnx_sched.objectives.latency import measured_speedups

    singles = [s for s in candidates if s.method.startswith("single:")]
    rows: dict[bytes, Schedule] = {}
    for s in [*singles, proxy_best, *sorted(candidates, key=lambda s: s.info["latency"])]:
        rows.setdefault(np.asarray(s.placement, np.int64).tobytes(), s)
    required = len({np.asarray(s.placement, np.int64).tobytes() for s in [*singles, proxy_best]})
    keys, kept = list(rows), list(rows.values())
    speed = measured_speedups(ctx, np.stack([s.placement for s in kept]), required=required, deadline=clock)
    timed = [i for i in range(len(kept)) if np.isfinite(speed[i])]
    if not timed:
        return proxy_best, {}
    i = max(timed, key=lambda i: (speed[i], -kept[i].info["latency"]))
    table = [{"method": kept[j].method, "proxy_latency_s": float(kept[j].info["latency"]),
              "target_speedup": float(speed[j])} for j in timed]
    proxy_row = keys.index(np.asarray(proxy_best.placement, np.int64).tobytes())
    return kept[i], {"target_candidates": table, "proxy_best_speedup": float(speed[proxy_row])}


__all__ = ["auto_cpu_first", "auto_gpu_first", "measured_choice", "portfolio"]
