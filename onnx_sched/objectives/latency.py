"""Objective ``latency``: predicted latency of a device placement (paper 004's target).

The problem (:class:`~onnx_sched.cost.latency.PlacementProblem`) comes from device
profiles (``--profiles``, ``onnx-sched profile``), the devices to use and the latency
mode (``sequential`` like OpenVINO HETERO, or ``concurrent``).  The baseline runs
every op on the host device.  Passes live in ``passes/placement/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.dag import kahn_order
from onnx_sched.graph import Graph
from onnx_sched.objectives.objective import META_PREFIX, ProblemOptions, require_options, warm_up_graph
from onnx_sched.report import ReportTable, yes_no
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.passes import PassContext

__all__ = ["OBJECTIVE", "Latency"]


@dataclass(frozen=True)
class Latency:
    """Minimise the predicted latency of a placement of ops on devices."""

    name: str = "latency"
    pass_folder: str = "placement"
    plots: bool = True
    reads: frozenset[str] = frozenset({"profiles", "devices", "latency_mode"})
    needs: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"profiles": "--profiles P.json (write one with `onnx-sched profile`)"})

    def for_options(self, options: ProblemOptions) -> str:
        return self.name

    def build_problem(self, graph: Graph, options: ProblemOptions) -> lat.PlacementProblem:
        require_options(self, options)
        from onnx_sched.profiling import load_profiles

        devices = list(options.devices) if options.devices else None
        return lat.placement_problem(graph, load_profiles(list(options.profiles)), mode=options.latency_mode,
                                     devices=devices)

    def prepare(self, imported: Any, ctx: PassContext, method: str, seconds: float, run: Any) -> None:
        return None  # a control-flow op is one op here: its bodies stay as they are

    def warm_up_instance(self, problem: lat.PlacementProblem) -> tuple[Graph, lat.PlacementProblem]:
        """The warm-up graph on the same devices and links, op times borrowed from ``problem`` (cycled)."""
        graph = warm_up_graph(like=problem.graph)
        rows = np.arange(graph.n_ops) % max(problem.graph.n_ops, 1)
        return graph, replace(problem, graph=graph, op_time=problem.op_time[rows], info={})

    def check(self, graph: Graph, ctx: PassContext) -> None:
        if not isinstance(ctx.problem, lat.PlacementProblem):
            raise ValueError(f"objective {self.name!r} needs device profiles (--profiles P.json, see `onnx-sched profile`)")

    def evaluate(self, graph: Graph, ctx: PassContext, schedule: Schedule) -> float:
        """Predicted latency; on ``--target`` a target model's latency, or (``measured``) the measured latency
        relative to the host-only run."""
        target = _target(ctx)
        if target == "measured":
            return 1.0 / _measured_speedup(ctx, schedule)
        return float(lat.evaluate(_target_problem(ctx), schedule.placement))

    def target_seconds(self, graph: Graph, ctx: PassContext) -> float:
        """On the measured target: the runs of the result beside host-only.  A pass that also times other placements
        holds their time back from its own search (``auto``: the other single devices)."""
        if _target(ctx) != "measured":  # (an unknown --target is refused here, before the search)
            return 0.0
        from onnx_sched.bench.runtimes.placement_timing import measured_target_seconds

        return measured_target_seconds(ctx, ctx.problem.device_names, rows=1)

    def baseline(self, graph: Graph, ctx: PassContext, method: str, schedule: Schedule) -> Schedule:
        """Every op on the host device, in Kahn order; a placement chosen by *measured* latency
        (``info["measured_latency_s"]``, e.g. ``hsdag`` with ``reward=measured``) is its own
        baseline: the pass timed the host-only placement in the same protocol, and the model's
        prediction must not overrule the measurement."""
        problem = ctx.problem
        if "measured_latency_s" in schedule.info:
            return schedule
        host_only = np.full(graph.n_ops, problem.host, dtype=np.int64)
        return Schedule(order=kahn_order(graph), method=f"{problem.device_names[problem.host]}-only", placement=host_only)

    def report(self, graph: Graph, ctx: PassContext, chosen: Schedule, baseline: Schedule) -> dict[str, Any]:
        problem = ctx.problem
        value = lat.evaluate(problem, chosen.placement)
        # the model's host-only latency, whatever the baseline (a measured placement is its own: see baseline())
        host_only = lat.evaluate(problem, np.full(graph.n_ops, problem.host, dtype=np.int64))
        counts = np.bincount(chosen.placement, minlength=len(problem.device_names))
        return {
            "mode": problem.mode,
            "simulated": bool(problem.simulated),
            "devices": list(problem.device_names),
            "ops_per_device": {d: int(c) for d, c in zip(problem.device_names, counts)},
            "latency_s": {"output": float(value), "host_only": float(host_only)},
            "speedup_vs_host": float(host_only / value) if value > 0 else 1.0,
            "optimal": bool(chosen.optimal),
            **self._target_report(ctx, chosen, baseline),
            **_profile_coverage(problem),
        }

    @staticmethod
    def _target_report(ctx: PassContext, chosen: Schedule, baseline: Schedule) -> dict[str, Any]:
        """``target`` (paper 002's report key) when ``--target`` is given: host-only / placed on the target."""
        target = _target(ctx)
        if ctx.option("target", None) is None:
            return {}
        if target == "measured":
            speedup = _measured_speedup(ctx, chosen)
            if "target_candidates" in chosen.info:  # a pass that chose on the target (auto's portfolio)
                return {"target": {"model": target, "speedup": speedup,
                                   "proxy_best_speedup": chosen.info["proxy_best_speedup"]},
                        "candidates": chosen.info["target_candidates"]}
        else:
            problem = _target_problem(ctx)
            host_only = np.full(ctx.problem.graph.n_ops, ctx.problem.host, np.int64)
            speedup = float(lat.evaluate(problem, host_only) / lat.evaluate(problem, chosen.placement))
        return {"target": {"model": target, "speedup": speedup, "proxy_best_speedup": speedup}}

    def metadata(self, report: Mapping[str, Any]) -> dict[str, str]:
        return {
            f"{META_PREFIX}predicted_latency_s": repr(report["latency_s"]["output"]),
            f"{META_PREFIX}latency_mode": report["mode"],
            f"{META_PREFIX}simulated": str(report["simulated"]).lower(),
        }

    def table(self, report: Mapping[str, Any]) -> ReportTable:
        t = report["latency_s"]
        label = " (SIMULATED device profiles)" if report["simulated"] else ""
        return ReportTable(
            title=f"onnx-sched: {report['model']} ({report['ops']} ops, latency, {report['mode']}){label}",
            columns=("Host only", "Placed"),
            rows=(
                ("Predicted latency", f"{t['host_only'] * 1e3:.3f} ms", f"{t['output'] * 1e3:.3f} ms"),
                ("Speedup", "1.000", f"{report['speedup_vs_host']:.3f}"),
                ("Ops per device", "-", ", ".join(f"{d}: {c}" for d, c in report["ops_per_device"].items())),
                ("Proven optimal", "-", yes_no(report["optimal"])),
                ("Method", "-", report["method_used"]),
                ("Seconds", "-", f"{report['seconds']:.2f}"),
            ),
        )

    def plot(self, graph: Graph, ctx: PassContext, schedule: Schedule, path: str | os.PathLike) -> None:
        """The placement's timeline as the latency model runs it (concurrent: Gantt chart; sequential: one op at a
        time, transfers on their own row)."""
        from onnx_sched.cost.gantt import plot_latency

        plot_latency(ctx.problem, schedule.placement, path, order=schedule.order)


def _target(ctx: PassContext) -> str:
    """``--target`` for placements: the latency model (``proxy``), a target model of paper 002 applied to the
    placement problem (``noisy``, ``bandwidth``, ``latency``), or real runs (``measured``)."""
    from onnx_sched.cost.makespan.targets import MODEL_TARGETS

    target = str(ctx.option("target", "proxy"))
    if target not in (*MODEL_TARGETS, "measured"):
        raise ValueError(f"unknown --target {target!r}; choose from {', '.join(MODEL_TARGETS)} or measured")
    return target


def _target_problem(ctx: PassContext) -> lat.PlacementProblem:
    from onnx_sched.cost.makespan.targets import target_model

    return target_model(_target(ctx), int(ctx.option("target_seed", 0))).placement(ctx.problem)


def _measured_speedup(ctx: PassContext, schedule: Schedule) -> float:
    """Host-only seconds / placed seconds of ``schedule`` (:func:`measured_speedups`, memoised; fewer repeats when
    the caller's ``measure_deadline`` is near)."""
    placement = np.asarray(schedule.placement, np.int64)[None, :]
    return float(measured_speedups(ctx, placement, deadline=ctx.measure_deadline)[0])


def measured_speedups(ctx: PassContext, placements: np.ndarray, required: int | None = None,
                      deadline: Any = None) -> np.ndarray:
    """Host-only seconds / placed seconds of each row of ``placements``: interleaved split-executor runs on pinned
    cores (:func:`~onnx_sched.bench.runtimes.placement_timing.memo_speedups`: each placement timed once, so a pass
    choosing on the target, the baseline check and the report share one measurement).
    With a ``deadline``, the rows after the first ``required`` are run only while they fit (NaN otherwise); on the
    objective's warm-up instance (no model to run) every speedup is 1."""
    placements = np.atleast_2d(np.asarray(placements, np.int64))
    if ctx.options.get("warm_up"):
        return np.ones(len(placements))
    from onnx_sched.bench.runtimes.placement_timing import memo_speedups

    host_only = np.full(ctx.problem.graph.n_ops, ctx.problem.host, np.int64)
    return memo_speedups(ctx.source, host_only, placements, ctx.problem.device_names, int(ctx.option("repeats", 10)),
                         seed=ctx.seed, deadline=deadline, required=required)


OBJECTIVE = Latency()


def _profile_coverage(problem: lat.PlacementProblem) -> dict[str, Any]:
    """``measured_ops`` per device, and a note when profiles' measurements do not cover this model's ops (op times
    then come from the profile's fitted per-op-type rates)."""
    measured = problem.info.get("measured_ops")
    if measured is None:
        return {}
    n, models, name = problem.graph.n_ops, problem.info.get("profile_models", {}), problem.graph.name
    other = {d: models[d] for d, count in measured.items() if not count and models.get(d) not in (None, "", name)}
    partial = {d: count for d, count in measured.items() if count < n and d not in other}
    notes = []
    for source in dict.fromkeys(other.values()):
        devices = [d for d, m in other.items() if m == source]
        notes.append(f"profile{'s' if len(devices) > 1 else ''} {', '.join(devices)} measured model {source!r}, not "
                     f"{name!r}: every op time here comes from fitted per-op-type rates")
    if partial:
        counts = ", ".join(f"{d} {c}" for d, c in partial.items())
        notes.append(f"measured op times cover only some of the {n} ops ({counts}); the others come from fitted "
                     "per-op-type rates")
    return {"measured_ops": dict(measured), **({"notes": notes} if notes else {})}
