"""Objective ``peak-mem``: the largest live activation memory over an op order.

Scored by the one memory model of :mod:`onnx_sched.cost.memory` (paper 000 eq. 1-3,
15; ``ctx.inplace`` adds ONNX Runtime-style in-place reuse).  The baseline is the
model's own file order: a result never has a higher peak than the input.  Passes
live in ``passes/order/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from onnx_sched.cost import memory, memory_bound
from onnx_sched.dag import check_order
from onnx_sched.graph import Graph
from onnx_sched.objectives.objective import META_PREFIX, ProblemOptions, warm_up_graph
from onnx_sched.objectives.peak_mem_bodies import OrderedBodies, bodies_share, order_bodies
from onnx_sched.report import ReportTable, fmt_bytes, yes_no
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.passes import PassContext

__all__ = ["OBJECTIVE", "PeakMemory", "certificate", "memory_model_name"]


def memory_model_name(inplace: bool) -> str:
    """How reports name the memory model they used."""
    return "tensor-lifetime+inplace" if inplace else "tensor-lifetime"


def certificate(optimal: bool, gap: float, bound: int) -> str:
    """What the result proves: ``proven optimal``, ``within X% of a proven bound`` or ``no proof``.

    Example:
        >>> certificate(False, 0.0312, 1000), certificate(True, 0.0, 1000), certificate(False, 0.0, 0)
        ('within 3.1% of a proven bound', 'proven optimal', 'no proof')
    """
    if optimal:
        return "proven optimal"
    return f"within {gap:.1%} of a proven bound" if bound > 0 else "no proof"


def _bodies(graph: Graph, ctx: PassContext) -> OrderedBodies | None:
    """The problem :meth:`PeakMemory.prepare` made when it ordered ``graph``'s control-flow bodies."""
    problem = ctx.problem
    return problem if isinstance(problem, OrderedBodies) and problem.read_graph.n_ops == graph.n_ops else None


@dataclass(frozen=True)
class PeakMemory:
    """Minimise peak activation memory of a single-device op order."""

    name: str = "peak-mem"
    pass_folder: str = "order"
    plots: bool = True
    reads: frozenset[str] = frozenset({"devices", "memory_limits"})
    needs: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def for_options(self, options: ProblemOptions) -> str:
        """Two or more devices make it a placement problem too: ``peak-mem-devices`` (paper 003)."""
        return "peak-mem-devices" if options.devices and len(options.devices) > 1 else self.name

    def build_problem(self, graph: Graph, options: ProblemOptions) -> None:
        if options.memory_limits:
            raise ValueError("--memory-limit applies to peak memory split over two or more devices (--devices CPU,GPU)")
        return None  # the graph and ctx.inplace are the whole problem

    def prepare(self, imported: Any, ctx: PassContext, method: str, seconds: float,
                run: Any) -> tuple[Any, OrderedBodies, list[dict[str, Any]]] | None:
        """Order the bodies of control-flow ops first (:mod:`onnx_sched.objectives.peak_mem_bodies`), in the
        share of ``seconds`` their ops are of all ops.  Without bodies, compute the graph's lower bound here (it is
        remembered per graph): every method's result and report carry it, and on a graph of 20,000 ops it takes a
        few tenths of a second, which the time limit then covers before the pass's share is set."""
        if not getattr(imported, "bodies", ()):
            memory_bound.lower_bound(imported.graph, ctx.inplace)
            return None
        return order_bodies(imported, ctx, method, seconds * bodies_share(imported), run)

    def warm_up_instance(self, problem: None) -> tuple[Graph, None]:
        return warm_up_graph(), None

    def check(self, graph: Graph, ctx: PassContext) -> None:
        return None

    def evaluate(self, graph: Graph, ctx: PassContext, schedule: Schedule) -> float:
        return float(memory.peak_memory(graph, check_order(graph, schedule.order), ctx.inplace))

    def target_seconds(self, graph: Graph, ctx: PassContext) -> float:
        return 0.0  # the memory model is the target: nothing runs

    def baseline(self, graph: Graph, ctx: PassContext, method: str, schedule: Schedule) -> Schedule:
        """The file order, keeping any bound the pass proved."""
        return Schedule(order=np.arange(graph.n_ops), method="file", lower_bound=schedule.lower_bound)

    def report(self, graph: Graph, ctx: PassContext, chosen: Schedule, baseline: Schedule) -> dict[str, Any]:
        bodies = _bodies(graph, ctx)
        before = memory.peak_memory(bodies.read_graph if bodies else graph, baseline.order, ctx.inplace)
        after = memory.peak_memory(graph, chosen.order, ctx.inplace)
        if bodies:  # the pass's bound and proof hold for the bodies' chosen orders only
            bound = memory_bound.lower_bound(bodies.bound_graph, ctx.inplace)
            optimal = after == bound
        else:
            bound = max(memory_bound.lower_bound(graph, ctx.inplace), int(chosen.lower_bound or 0))
            optimal = bool(chosen.optimal or after == bound)
        gap = (after - bound) / bound if bound else 0.0
        return {
            "memory_model": memory_model_name(ctx.inplace),
            "peak_bytes": {"input": int(before), "output": int(after), "lower_bound": int(bound)},
            "gap": gap,
            "reduction": (before - after) / before if before else 0.0,
            "optimal": optimal,
            "certificate": certificate(optimal, gap, bound),
        }

    def metadata(self, report: Mapping[str, Any]) -> dict[str, str]:
        pk = report["peak_bytes"]
        return {
            f"{META_PREFIX}memory_model": report["memory_model"],
            f"{META_PREFIX}predicted_peak_bytes": str(pk["output"]),
            f"{META_PREFIX}input_peak_bytes": str(pk["input"]),
            f"{META_PREFIX}lower_bound_bytes": str(pk["lower_bound"]),
        }

    def table(self, report: Mapping[str, Any]) -> ReportTable:
        pk = report["peak_bytes"]
        bound = pk["lower_bound"]
        gap_in = (pk["input"] - bound) / bound if bound else 0.0
        kept = " (input kept)" if report["kept_input_order"] else ""
        return ReportTable(
            title=f"onnx-sched: {report['model']} ({report['ops']} ops, {report['objective']}, {report['memory_model']})",
            columns=("Original", "Optimized"),
            rows=(
                ("Peak memory", fmt_bytes(pk["input"]), fmt_bytes(pk["output"])),
                ("Lower bound", fmt_bytes(bound), fmt_bytes(bound)),
                ("Gap to bound", f"{gap_in:.1%}", f"{report['gap']:.1%}"),
                ("Proven optimal", "-", yes_no(report["optimal"])),
                ("Certificate", "-", report["certificate"]),
                ("Method", "file order", report["method_used"] + kept),
                *([("Control-flow bodies", "as read", f"{sum(b['reordered'] for b in report['bodies'])} of "
                   f"{len(report['bodies'])} reordered")] if report.get("bodies") else []),
                ("Seconds", "-", f"{report['seconds']:.2f}"),
            ),
        )

    def plot(self, graph: Graph, ctx: PassContext, schedule: Schedule, path: str | os.PathLike) -> None:
        """Live memory over steps, input order against the chosen order."""
        from onnx_sched.plot import plot_memory

        plot_memory(
            {"input order": memory.profile(bodies.read_graph if (bodies := _bodies(graph, ctx)) else graph,
                                           np.arange(graph.n_ops), ctx.inplace),
             schedule.method: memory.profile(graph, schedule.order, ctx.inplace)},
            path,
            title=f"{graph.name}: live activation memory",
        )


OBJECTIVE = PeakMemory()
