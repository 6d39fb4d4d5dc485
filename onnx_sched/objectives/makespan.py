"""Objective ``makespan``: finish time of a schedule on machine types or devices (paper 001).

The problem (:class:`~onnx_sched.cost.makespan.MakespanProblem`) comes from a machine
description file (``--machines``, docs/machines.md); schedules are scored by the
list-scheduling cost model of :mod:`onnx_sched.cost.makespan`.  The baseline is list
scheduling with critical-path priorities (``list-cp``); on a ``--target`` other than the proxy, the better
there of that and the model not split.  Passes live in
``passes/makespan/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.graph import Graph
from onnx_sched.objectives.objective import META_PREFIX, ProblemOptions, require_options, warm_up_graph
from onnx_sched.report import ReportTable, fmt_times, yes_no
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.passes import PassContext

__all__ = ["OBJECTIVE", "Makespan"]

BASELINE_METHOD = "list-cp"
#: The method name of the baseline that splits nothing (on a target other than the proxy).
NO_SPLIT = "no-split"


@dataclass(frozen=True)
class Makespan:
    """Minimise the makespan of a schedule on the machines of ``ctx.problem``."""

    name: str = "makespan"
    pass_folder: str = "makespan"
    plots: bool = True
    reads: frozenset[str] = frozenset({"machines"})
    needs: ClassVar[Mapping[str, str]] = MappingProxyType({"machines": "--machines M.json (see docs/machines.md)"})

    def for_options(self, options: ProblemOptions) -> str:
        return self.name

    def build_problem(self, graph: Graph, options: ProblemOptions) -> ms.MakespanProblem:
        require_options(self, options)
        from onnx_sched.machines import load_machines

        return ms.makespan_problem(graph, load_machines(options.machines))

    def prepare(self, imported: Any, ctx: PassContext, method: str, seconds: float, run: Any) -> None:
        return None  # a control-flow op is one op here: its bodies stay as they are

    def warm_up_instance(self, problem: ms.MakespanProblem) -> tuple[Graph, ms.MakespanProblem]:
        """The warm-up graph on the same machines, op rows borrowed from ``problem`` (cycled)."""
        graph = warm_up_graph(like=problem.graph)
        rows = np.arange(graph.n_ops) % max(problem.n_ops, 1)
        return graph, ms.makespan_problem(graph, problem.machines, problem.durations[rows], problem.demand[rows])

    def check(self, graph: Graph, ctx: PassContext) -> None:
        if ctx.problem is None:
            raise ValueError(f"objective {self.name!r} needs a machine description (--machines)")

    def evaluate(self, graph: Graph, ctx: PassContext, schedule: Schedule) -> float:
        """Makespan on the proxy, or on ``--target`` when one is set (paper 002: the target decides)."""
        if ctx.option("target", "proxy") != "proxy":
            from onnx_sched.passes.makespan._candidates import target_makespan

            return target_makespan(ctx.problem, schedule, ctx)
        return float(ms.evaluate(ctx.problem, schedule).makespan)

    def target_seconds(self, graph: Graph, ctx: PassContext) -> float:
        """On the measured target: the runs of the result and list-cp beside the whole model on one device."""
        from onnx_sched.bench.runtimes.placement_timing import measured_target_seconds

        return measured_target_seconds(ctx, ctx.problem.device_names, rows=2, keep=[0])

    def baseline(self, graph: Graph, ctx: PassContext, method: str, schedule: Schedule) -> Schedule:
        """List scheduling with critical-path priorities and earliest-finish device choice (the pass's own
        schedule when it is exactly that; ``--option device_choice=first-free`` does not change the baseline).
        On a ``--target`` other than the proxy, the better there of that and the model not split at all
        (:data:`NO_SPLIT`, every op on the first lane that runs it): the input runs unsplit, and a target can
        make any split slower than that (a measured one timed resnet50's list schedule over two CPU cores at
        0.98 times the whole model's speed), so no method returns a split the target says is slower."""
        list_cp = self._list_cp(graph, ctx, method, schedule)
        if ctx.option("target", "proxy") == "proxy":
            return list_cp
        from onnx_sched.cost.makespan.chains import chain_schedule
        from onnx_sched.passes.makespan._candidates import first_lane

        whole = first_lane(ctx.problem)
        unsplit = chain_schedule(ctx.problem, whole.lane[0], whole.order[0], NO_SPLIT,
                                 list_cp_makespan=float(ms.evaluate(ctx.problem, list_cp).makespan))
        return unsplit if self.evaluate(graph, ctx, unsplit) < self.evaluate(graph, ctx, list_cp) else list_cp

    def _list_cp(self, graph: Graph, ctx: PassContext, method: str, schedule: Schedule) -> Schedule:
        """The list-cp schedule: the pass's own when it is exactly that."""
        if method == BASELINE_METHOD and ctx.option("device_choice", None) in (None, "earliest-finish"):
            return schedule
        from onnx_sched.passes import get_pass

        options = {k: v for k, v in ctx.options.items() if k != "device_choice"}
        return get_pass(BASELINE_METHOD, self.name)(graph, replace(ctx, options=options))

    def report(self, graph: Graph, ctx: PassContext, chosen: Schedule, baseline: Schedule) -> dict[str, Any]:
        result = ms.evaluate(ctx.problem, chosen)
        # the target may have preferred the unsplit model: what is reported beside the output is still list-cp
        list_cp = (baseline.info["list_cp_makespan"] if baseline.method == NO_SPLIT
                   else float(ms.evaluate(ctx.problem, baseline).makespan))
        bound = max(float(ms.lower_bound(ctx.problem)), float(chosen.lower_bound or 0.0))
        return {
            "makespan": {"output": float(result.makespan), "list_cp": list_cp, "lower_bound": bound},
            # seconds from a roofline or profiles; durations a caller gave (synthetic graphs) have no unit
            "time_unit": "s" if ctx.problem.in_seconds else None,
            "speedup": float(result.speedup),
            "gap": max(0.0, (result.makespan - bound) / bound) if bound else 0.0,  # the bound sums durations: ulps
            "optimal": bool(chosen.optimal),
            **self._target_report(ctx, chosen),
        }

    def _target_report(self, ctx: PassContext, chosen: Schedule) -> dict[str, Any]:
        """``target``, ``diversity`` and ``candidates`` (paper 002) when a target or candidates were asked for."""
        if ctx.option("target", None) is None and "candidates" not in chosen.info:
            return {}
        from onnx_sched.passes.makespan._candidates import target_report

        out: dict[str, Any] = {"target": target_report(ctx.problem, chosen, ctx)}
        for key in ("diversity", "candidates", "candidates_generated", "candidates_unique"):
            if key in chosen.info:
                out[key] = chosen.info[key]
        return out

    def metadata(self, report: Mapping[str, Any]) -> dict[str, str]:
        return {
            f"{META_PREFIX}predicted_makespan": repr(report["makespan"]["output"]),
            f"{META_PREFIX}lower_bound_makespan": repr(report["makespan"]["lower_bound"]),
        }

    def table(self, report: Mapping[str, Any]) -> ReportTable:
        m = report["makespan"]
        times = (m["list_cp"], m["output"], m["lower_bound"])
        base, out, bound = fmt_times(*times) if report.get("time_unit") == "s" else [f"{t:.6g}" for t in times]
        return ReportTable(
            title=f"onnx-sched: {report['model']} ({report['ops']} ops, makespan)",
            columns=("List (CP)", "Optimized"),
            rows=(
                ("Makespan", base, out),
                ("Lower bound", bound, bound),
                ("Gap to bound", "-", f"{report['gap']:.1%}"),
                ("Speedup (work / makespan)", "-", f"{report['speedup']:.3f}"),
                ("Proven optimal", "-", yes_no(report["optimal"])),
                *self._target_rows(report),
                ("Method", BASELINE_METHOD, report["method_used"]),
                ("Seconds", "-", f"{report['seconds']:.2f}"),
            ),
        )

    @staticmethod
    def _target_rows(report: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
        if "target" not in report:
            return ()
        t = report["target"]
        proxy_best = t["proxy_best_speedup"]
        rows = [(f"Target speedup ({t['model']})", "-", f"{t['speedup']:.3f}"),
                ("  of the proxy-best candidate", "-", "no candidate" if proxy_best is None else f"{proxy_best:.3f}")]
        if "diversity" in report:
            d = report["diversity"]
            rows.append(("Top-k diversity GED / d_inv / d_sen", "-", f"{d['ged']:.1f} / {d['d_inv']:.2f} / {d['d_sen']:.2f}"))
        return tuple(rows)

    def plot(self, graph: Graph, ctx: PassContext, schedule: Schedule, path: str | os.PathLike) -> None:
        """Gantt chart, one row per resource lane."""
        from onnx_sched.cost.gantt import plot_gantt

        plot_gantt(ctx.problem, schedule, path)


OBJECTIVE = Makespan()
