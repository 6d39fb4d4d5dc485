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

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from onnx_sched.errors import OnnxSchedError, TimeLimitError
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.importers.control_flow import transient_bytes
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.passes import PassContext

__all__ = ["OrderedBodies", "ops_within", "order_bodies"]

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


def _least_transient(graph: Graph, lower_bound: int) -> int:
    """Transient bytes no order of the body ``graph`` goes below: its peak's lower bound less its inputs and
    outputs (:func:`~onnx_sched.importers.control_flow.transient_bytes` of any order is at least that)."""
    kind = graph.tensor_kind
    made = graph.tensor_producer >= 0
    outer = int(graph.tensor_bytes[(kind == TensorKind.INPUT)].sum())
    outputs = int(graph.tensor_bytes[(kind == TensorKind.OUTPUT) & made].sum())
    return max(0, lower_bound - outer - outputs)


def order_bodies(imported: Any, ctx: PassContext, method: str, seconds: float, run: Callable[..., Any],
                 where: str = "") -> tuple[Any, OrderedBodies, list[dict[str, Any]]] | None:
    """Order the bodies of ``imported``'s control-flow ops with ``run`` (:func:`onnx_sched.api.schedule_graph`)
    and ``method`` in at most ``seconds``: the import with each body's schedule and its op's new transient bytes,
    the :class:`OrderedBodies` problem, and a report row per body (nested ones named ``op.attribute/op.attribute``);
    ``None`` without bodies."""
    bodies = getattr(imported, "bodies", ())
    if not bodies:
        return None
    total = ops_within(imported)
    graph = imported.graph
    op_of_node = {int(idx): op for op, idx in enumerate(imported.op_node)}
    read, now, least = (np.zeros(graph.n_ops, np.int64) for _ in range(3))
    ordered, rows = [], []
    for body in bodies:
        share = seconds * ops_within(body.imported) / total
        start = time.perf_counter()
        name = f"{where}{graph.op_names[op_of_node[body.node]]}.{body.attribute}"
        inner = order_bodies(body.imported, ctx, method, share * (1 - body.imported.graph.n_ops /
                                                                  ops_within(body.imported)), run, f"{name}/")
        nested, problem, inner_rows = inner if inner else (body.imported, None, [])
        sub = nested.graph
        schedule, report = None, {}
        if sub.n_ops:
            body_ctx = replace(ctx, time_limit=max(share - (time.perf_counter() - start), MIN_BODY_SECONDS),
                               source=nested, problem=problem)
            try:
                schedule, report = run(sub, "peak-mem", method, body_ctx)
            except (OnnxSchedError, TimeLimitError):  # e.g. a learned method's encoder past the body's share
                pass
        schedule = schedule or Schedule(order=np.arange(sub.n_ops), method="file")
        op = op_of_node[body.node]
        read[op] = max(read[op], transient_bytes(body.imported.graph, np.arange(sub.n_ops)))
        now[op] = max(now[op], transient_bytes(sub, schedule.order))
        least[op] = max(least[op], _least_transient(sub, int(report.get("peak_bytes", {}).get("lower_bound", 0))))
        ordered.append(replace(body, imported=nested, schedule=schedule))
        rows += [{"body": name, "ops": sub.n_ops,
                  "reordered": not np.array_equal(schedule.order, np.arange(sub.n_ops)),
                  **{k: v for k, v in report.items() if k != "unused_options"}}, *inner_rows]
    base = graph.op_param_bytes - read  # the model's own transient bytes, the bodies' apart
    bodies_problem = OrderedBodies(read_graph=graph, bound_graph=replace(graph, op_param_bytes=base + least))
    return (replace(imported, graph=replace(graph, op_param_bytes=base + now), bodies=tuple(ordered)),
            bodies_problem, rows)
