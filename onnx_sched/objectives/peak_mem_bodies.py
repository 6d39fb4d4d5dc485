"""Peak memory inside control-flow ops: order each ``If`` / ``Loop`` / ``Scan`` body, then the graph holding it.

A body runs as a graph of its own while its op runs, in the body's node order, which
ONNX Runtime follows as it follows the main graph's (measured: docs/results.md 27), so
its order decides the op's transient bytes (:mod:`onnx_sched.importers.control_flow`).
:func:`order_bodies` orders every body with the method the user chose, the innermost
first, each in its share of the time (its ops over all ops), never worse than its own
order, and gives each control-flow op the transient bytes of its bodies' new orders;
then the pass orders the graph that holds them.  A model whose work lives in an ``If``
(a merged decoder) is ordered where its memory is.

:class:`OrderedBodies` is the problem the peak-mem objective then scores with: the
graph as read (the input model's own peak, its bodies in their order) and a graph whose
transient bytes are each body's lower bound, on which a bound for the whole model is
computed (the graph the pass ordered holds the bodies' *chosen* orders, so a bound or a
proof over it says nothing of orders inside the bodies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.errors import OnnxSchedError, TimeLimitError
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.importers.control_flow import transient_bytes
from onnx_sched.jit import work_clock
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.passes import PassContext

__all__ = ["OrderedBodies", "bodies_share", "bound_graph", "ops_within", "order_bodies", "read_graph"]

#: Seconds a body's pass gets at the least.
MIN_BODY_SECONDS = 0.05


@dataclass(frozen=True, eq=False)
class OrderedBodies:
    """The peak-mem problem of a graph whose control-flow bodies were ordered: ``read_graph`` has the transient
    bytes of the bodies in their own order, ``bound_graph`` those of the bodies' lower bounds."""

    read_graph: Graph
    bound_graph: Graph


def ops_within(imported: Any) -> int:
    """Ops of ``imported`` and of its control-flow bodies, nested ones included."""
    return imported.graph.n_ops + sum(ops_within(b.imported) for b in getattr(imported, "bodies", ()))


def bodies_share(imported: Any) -> float:
    """The share of ``imported``'s ops (bodies included) that are in its bodies: their share of the time."""
    within = ops_within(imported)
    return 1.0 - imported.graph.n_ops / within if within else 0.0


def _least_transient(body: Any, lower_bound: int) -> int:
    """Transient bytes no order of ``body`` goes below: its graph's peak lower bound less its inputs and outputs
    (:func:`~onnx_sched.importers.control_flow.transient_bytes` of any order is at least that), plus what it holds
    across iterations."""
    graph = body.imported.graph
    kind = graph.tensor_kind
    made = graph.tensor_producer >= 0
    outer = int(graph.tensor_bytes[(kind == TensorKind.INPUT)].sum())
    outputs = int(graph.tensor_bytes[(kind == TensorKind.OUTPUT) & made].sum())
    return max(0, lower_bound - outer - outputs) + body.resident


def _with_bodies(imported: Any, bodies: Sequence[Any], need: Sequence[int]) -> Graph:
    """``imported.graph`` with each control-flow op's transient bytes the most ``need`` gives its ``bodies`` (one
    value per body) in place of what the importer gave it (``Body.transient``: its bodies in their own order)."""
    graph = imported.graph
    op_of_node = {int(idx): op for op, idx in enumerate(imported.op_node)}
    read, now = np.zeros(graph.n_ops, np.int64), np.zeros(graph.n_ops, np.int64)
    for body, bytes_ in zip(bodies, need):
        op = op_of_node[body.node]
        read[op] = max(read[op], body.transient)
        now[op] = max(now[op], bytes_)
    return replace(graph, op_param_bytes=graph.op_param_bytes - read + now)


def bound_graph(imported: Any, inplace: bool = False) -> Graph:
    """``imported.graph`` with each control-flow op's transient bytes at the least any order of its bodies needs
    (from their lower bounds, nested bodies first): a lower bound computed on it holds for every order of the
    bodies too, which ``inspect`` reports."""
    bodies = getattr(imported, "bodies", ())
    if not bodies:
        return imported.graph
    return _with_bodies(imported, bodies, [_least_transient(b, lower_bound(bound_graph(b.imported, inplace), inplace))
                                           for b in bodies])


def read_graph(imported: Any, inplace: bool = False) -> Graph:
    """``imported.graph`` with its bodies in their own order under the memory model ``inplace`` chooses (the
    importer counts them without in-place reuse): the input's own peak."""
    bodies = getattr(imported, "bodies", ())
    if not bodies or not inplace:
        return imported.graph
    return _with_bodies(imported, bodies, [
        transient_bytes(read_graph(b.imported, inplace), np.arange(b.imported.graph.n_ops), inplace, b.resident)
        for b in bodies])


def order_bodies(imported: Any, ctx: PassContext, method: str, seconds: float, run: Callable[..., Any],
                 where: str = "") -> tuple[Any, OrderedBodies, list[dict[str, Any]]] | None:
    """Order the bodies of ``imported``'s control-flow ops with ``run`` (:func:`onnx_sched.api.schedule_graph`)
    and ``method`` in at most ``seconds``, the largest first: the import with each body's schedule and its op's new
    transient bytes, the :class:`OrderedBodies` problem, and a report row per body (nested ones named
    ``op.attribute/op.attribute``); ``None`` without bodies.  Once ``seconds`` are spent, the bodies left keep their
    order, as does a body whose new order would not lower its op's transient bytes."""
    bodies = getattr(imported, "bodies", ())
    if not bodies:
        return None
    end = work_clock() + seconds
    total = ops_within(imported)
    graph = imported.graph
    names = {int(idx): graph.op_names[op] for op, idx in enumerate(imported.op_node)}
    done: dict[int, tuple[Any, int, int, list[dict[str, Any]]]] = {}
    for i in sorted(range(len(bodies)), key=lambda i: -ops_within(bodies[i].imported)):
        body = bodies[i]
        share = seconds * ops_within(body.imported) / total if total else 0.0
        start = work_clock()
        name = f"{where}{names[body.node]}.{body.attribute}"
        inner = order_bodies(body.imported, ctx, method, share * bodies_share(body.imported), run, f"{name}/")
        nested, problem, inner_rows = inner if inner else (body.imported, None, [])
        sub = nested.graph
        schedule, report = None, {}
        if sub.n_ops and end - work_clock() >= MIN_BODY_SECONDS:
            left = min(share - (work_clock() - start), end - work_clock())
            body_ctx = replace(ctx, time_limit=max(left, MIN_BODY_SECONDS), source=nested, problem=problem)
            try:
                schedule, report = run(sub, "peak-mem", method, body_ctx)
            except (OnnxSchedError, TimeLimitError, RuntimeError, ValueError):  # e.g. a learned method's encoder
                schedule, report = None, {}  # past the body's share: the body keeps its order
        own = Schedule(order=np.arange(sub.n_ops), method="file")
        need = transient_bytes(sub, own.order, ctx.inplace, body.resident)
        chosen = transient_bytes(sub, schedule.order, ctx.inplace, body.resident) if schedule is not None else need
        if chosen < need:
            need = chosen
        else:  # no gain for the op (a lower peak may even hold more beside outputs made early): the body as it is
            schedule = own
            if report:
                peak = report["peak_bytes"]
                report = {**report, "method_used": "file", "kept_input_order": True, "optimal": False,
                          "certificate": "kept its own order (the new one did not lower the op's transient bytes)",
                          "peak_bytes": {**peak, "output": peak["input"]}, "reduction": 0.0,
                          "gap": (peak["input"] - peak["lower_bound"]) / peak["lower_bound"]
                          if peak["lower_bound"] else 0.0}
        bound = max(int(report.get("peak_bytes", {}).get("lower_bound", 0)),
                    lower_bound(problem.bound_graph if problem else sub, ctx.inplace))
        row = {"body": name, "ops": sub.n_ops, "reordered": not np.array_equal(schedule.order, np.arange(sub.n_ops)),
               **{k: v for k, v in report.items() if k != "unused_options"}}
        done[i] = (replace(body, imported=nested, schedule=schedule), need,
                   _least_transient(replace(body, imported=nested), bound), [row, *inner_rows])
    ordered = [done[i][0] for i in range(len(bodies))]
    problem = OrderedBodies(read_graph=read_graph(imported, ctx.inplace),
                            bound_graph=_with_bodies(imported, bodies, [done[i][2] for i in range(len(bodies))]))
    rows = [row for i in range(len(bodies)) for row in done[i][3]]
    return (replace(imported, graph=_with_bodies(imported, bodies, [done[i][1] for i in range(len(bodies))]),
                    bodies=tuple(ordered)), problem, rows)
