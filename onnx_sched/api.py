"""The one entry point the CLI and every plugin call: ``optimize``.

``optimize_model`` imports a model, runs a registered pass for the objective,
scores the result against the input order with the same cost model, keeps the
input order when nothing beats it, and exports the model.  ``optimize`` is the
thin wrapper that takes and returns ``onnx.ModelProto`` or ``onnx_ir.Model``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from onnx_sched.cost import memory
from onnx_sched.exporters.onnx import export_onnx
from onnx_sched.graph import Graph
from onnx_sched.importers.onnx import ImportedOnnx, import_onnx
from onnx_sched.passes import OBJECTIVES, PassContext, get_pass
from onnx_sched.schedule import Schedule

__all__ = ["OptimizeResult", "optimize", "optimize_model", "schedule_graph", "memory_model_name"]

META_PREFIX = "onnx_sched."


def memory_model_name(inplace: bool) -> str:
    """How reports name the memory model they used."""
    return "tensor-lifetime+inplace" if inplace else "tensor-lifetime"


@dataclass(frozen=True, eq=False)
class OptimizeResult:
    """What ``optimize_model`` produced: the model, the schedule and the report."""

    model: onnx.ModelProto
    schedule: Schedule
    report: Mapping[str, Any]
    imported: ImportedOnnx
    input_schedule: Schedule = field(repr=False, default=None)  # type: ignore[assignment]


def _peak_report(g: Graph, chosen: Schedule, inplace: bool) -> dict[str, Any]:
    file_order = np.arange(g.n_ops)
    before = memory.peak_memory(g, file_order, inplace)
    after = memory.peak_memory(g, chosen.order, inplace)
    bound = max(memory.lower_bound(g, inplace), int(chosen.lower_bound or 0))
    return {
        "peak_bytes": {"input": int(before), "output": int(after), "lower_bound": int(bound)},
        "gap": (after - bound) / bound if bound else 0.0,
        "reduction": (before - after) / before if before else 0.0,
        "optimal": bool(chosen.optimal or after == bound),
    }


def schedule_graph(
    graph: Graph,
    objective: str = "peak-mem",
    method: str = "auto",
    ctx: PassContext | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """Run ``method`` on ``graph`` and return (schedule, report); never worse than file order."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    ctx = ctx or PassContext()
    start = time.perf_counter()
    if objective == "peak-mem":
        schedule = get_pass(method, objective)(graph, ctx)
        from onnx_sched.dag import check_order

        check_order(graph, schedule.order)
        seconds = time.perf_counter() - start
        kept = False
        before = memory.peak_memory(graph, np.arange(graph.n_ops), ctx.inplace)
        if memory.peak_memory(graph, schedule.order, ctx.inplace) > before:
            schedule = Schedule(order=np.arange(graph.n_ops), method="file", lower_bound=schedule.lower_bound)
            kept = True
        report = {
            "objective": objective,
            "method": method,
            "method_used": schedule.method,
            "memory_model": memory_model_name(ctx.inplace),
            **_peak_report(graph, schedule, ctx.inplace),
            "kept_input_order": kept or bool(schedule.info.get("kept_input_order", False)),
            "seconds": seconds,
        }
        return schedule, report
    if objective == "latency":
        return _schedule_latency(graph, method, ctx, start)
    from onnx_sched.cost import makespan as ms

    if ctx.problem is None:
        raise ValueError(f"objective {objective!r} needs a machine description (--machines)")
    schedule = get_pass(method, "makespan")(graph, ctx)
    seconds = time.perf_counter() - start
    result = ms.evaluate(ctx.problem, schedule)
    baseline_sched = get_pass("list-cp", "makespan")(graph, ctx) if method != "list-cp" else schedule
    baseline = ms.evaluate(ctx.problem, baseline_sched)
    kept = False
    if result.makespan > baseline.makespan:
        schedule, result, kept = baseline_sched, baseline, True
    bound = max(float(ms.lower_bound(ctx.problem)), float(schedule.lower_bound or 0.0))
    report = {
        "objective": objective,
        "method": method,
        "method_used": schedule.method,
        "makespan": {"output": float(result.makespan), "list_cp": float(baseline.makespan), "lower_bound": bound},
        "speedup": float(result.speedup),
        "gap": (result.makespan - bound) / bound if bound else 0.0,
        "optimal": bool(schedule.optimal),
        "kept_input_order": kept,
        "seconds": seconds,
    }
    return schedule, report


def _schedule_latency(graph: Graph, method: str, ctx: PassContext, start: float) -> tuple[Schedule, dict[str, Any]]:
    """Placement for latency; never worse than running everything on the host device."""
    from onnx_sched.cost import latency as lat

    problem = ctx.problem
    if not isinstance(problem, lat.PlacementProblem):
        raise ValueError("objective 'latency' needs device profiles (--profiles P.json, see `onnx-sched profile`)")
    schedule = get_pass(method, "latency")(graph, ctx)
    seconds = time.perf_counter() - start
    value = lat.evaluate(problem, schedule.placement)
    host_only = np.full(graph.n_ops, problem.host, dtype=np.int64)
    baseline = lat.evaluate(problem, host_only)
    kept = False
    if value > baseline:
        from onnx_sched.dag import kahn_order

        schedule = Schedule(order=kahn_order(graph), method=f"{problem.device_names[problem.host]}-only", placement=host_only)
        value, kept = baseline, True
    counts = np.bincount(schedule.placement, minlength=len(problem.device_names))
    report = {
        "objective": "latency",
        "method": method,
        "method_used": schedule.method,
        "mode": problem.mode,
        "simulated": bool(problem.simulated),
        "devices": list(problem.device_names),
        "ops_per_device": {d: int(c) for d, c in zip(problem.device_names, counts)},
        "latency_s": {"output": float(value), "host_only": float(baseline)},
        "speedup_vs_host": float(baseline / value) if value > 0 else 1.0,
        "optimal": bool(schedule.optimal),
        "kept_input_order": kept,
        "seconds": seconds,
    }
    return schedule, report


def _scalars(info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-ready scalar entries of a schedule's ``info`` (decoder, episodes, solver status...)."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or isinstance(v, (str, int, float, bool)):
            out[str(k)] = v
    return out


def optimize_model(
    source: str | os.PathLike | onnx.ModelProto,
    objective: str = "peak-mem",
    method: str = "auto",
    time_limit: float = 10.0,
    inplace: bool = False,
    seed: int = 0,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    dims: Mapping[str, int] | None = None,
    options: Mapping[str, Any] | None = None,
    problem: Any = None,
) -> OptimizeResult:
    """Import ``source``, schedule it for ``objective`` with ``method`` and export it."""
    imported = import_onnx(source, input_shapes=input_shapes, dims=dims)
    ctx = PassContext(time_limit=time_limit, seed=seed, inplace=inplace, options=dict(options or {}), problem=problem)
    schedule, report = schedule_graph(imported.graph, objective, method, ctx)
    report = {"model": imported.graph.name, "ops": imported.graph.n_ops, **report, "details": _scalars(schedule.info)}
    meta = {
        f"{META_PREFIX}objective": objective,
        f"{META_PREFIX}method": str(report["method_used"]),
        f"{META_PREFIX}optimal": str(report["optimal"]).lower(),
    }
    if objective == "peak-mem":
        meta[f"{META_PREFIX}memory_model"] = report["memory_model"]
        meta[f"{META_PREFIX}predicted_peak_bytes"] = str(report["peak_bytes"]["output"])
        meta[f"{META_PREFIX}input_peak_bytes"] = str(report["peak_bytes"]["input"])
        meta[f"{META_PREFIX}lower_bound_bytes"] = str(report["peak_bytes"]["lower_bound"])
    elif objective == "latency":
        meta[f"{META_PREFIX}predicted_latency_s"] = repr(report["latency_s"]["output"])
        meta[f"{META_PREFIX}latency_mode"] = report["mode"]
        meta[f"{META_PREFIX}simulated"] = str(report["simulated"]).lower()
    else:
        meta[f"{META_PREFIX}predicted_makespan"] = repr(report["makespan"]["output"])
        meta[f"{META_PREFIX}lower_bound_makespan"] = repr(report["makespan"]["lower_bound"])
    device_names = getattr(problem, "device_names", None)
    model = export_onnx(imported, schedule, meta, device_names=device_names)
    return OptimizeResult(model=model, schedule=schedule, report=report, imported=imported)


def optimize(model: Any, objective: str = "peak-mem", method: str = "auto", **kwargs: Any) -> Any:
    """Reorder an ``onnx.ModelProto`` or ``onnx_ir.Model``; returns the same type.

    Keyword arguments are those of :func:`optimize_model` (``time_limit``,
    ``inplace``, ``seed``, ``input_shapes``, ``dims``, ``options``, ``problem``).

    Example:
        >>> import onnx_sched, onnx                                  # doctest: +SKIP
        >>> out = onnx_sched.optimize(onnx.load("m.onnx"), objective="peak-mem")  # doctest: +SKIP
    """
    if isinstance(model, onnx.ModelProto):
        return optimize_model(model, objective, method, **kwargs).model
    try:
        import onnx_ir as ir
    except ImportError:  # pragma: no cover - onnx-ir is a dependency
        ir = None
    if ir is not None and isinstance(model, ir.Model):
        proto = ir.serde.serialize_model(model)
        return ir.serde.deserialize_model(optimize_model(proto, objective, method, **kwargs).model)
    if isinstance(model, (str, os.PathLike)):
        return optimize_model(model, objective, method, **kwargs).model
    raise TypeError(f"optimize expects onnx.ModelProto, onnx_ir.Model or a path, got {type(model).__name__}")
