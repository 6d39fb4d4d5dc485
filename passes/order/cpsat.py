"""``cpsat``: a CP-SAT model of the minimum-peak order (OR-Tools), hinted by a heuristic.

Position model: every op gets a distinct position ``p[v]`` (``AddAllDifferent``),
respecting dependencies.  Every tensor produced by an op occupies memory over
the interval ``[p[producer], last consumer position + 1)`` (to the end for graph
outputs, one step for unread outputs), every op's transient parameter bytes
(eq. 15) over ``[p[v], p[v] + 1)``; one ``AddCumulative`` with a variable
capacity ``C`` then states that the memory at every step is at most ``C``, and
the peak is ``graph-input bytes + C``.  This is exactly the model of
:mod:`onnx_sched.cost.memory`: with ``ctx.inplace`` an op whose in-place
candidate input dies at this op (all its other consumers have a smaller
position) starts its output interval one step later, so the two buffers are not
counted together.

The hint is the best cheap heuristic order.  Graphs above ``max_ops`` ops
(default 300; the model has O(n + E) variables but the search degrades) are
not modelled: the hint is returned with ``info["note"]`` saying so.

Options: ``max_ops`` (300), ``workers`` (search threads, default 1).
"""

from __future__ import annotations

import math

import numpy as np

from onnx_sched.cost.memory import memory_arrays
from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.cp_sat import cp_solver
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule, peak_of
from onnx_sched.passes.order._portfolio import best_of, cheap_orders
from onnx_sched.schedule import Schedule

__all__ = ["run", "solve_cpsat"]

DEFAULT_MAX_OPS = 300


def solve_cpsat(
    graph: Graph, hint: np.ndarray, *, inplace: bool, time_limit: float, seed: int = 0, workers: int = 1
) -> tuple[np.ndarray | None, int | None, int, str]:
    """(order or None, its peak, proven lower bound, solver status name)."""
    from ortools.sat.python import cp_model

    n = graph.n_ops
    a = memory_arrays(graph, inplace)
    m = cp_model.CpModel()
    pos = [m.NewIntVar(0, n - 1, f"p{v}") for v in range(n)]
    m.AddAllDifferent(pos)
    for u, v in graph.edges.tolist():
        m.Add(pos[u] < pos[v])
    cons = graph.tensor_consumers
    intervals, demands = [], []
    reuse: dict[int, cp_model.IntVar | int] = {}
    for v in range(n):
        cands = a.inplace_idx[a.inplace_ptr[v] : a.inplace_ptr[v + 1]].tolist()
        if not cands:
            continue
        lits = []
        always = False
        for t in cands:
            others = [int(c) for c in cons.row(t).tolist() if c != v]
            if not others:
                always = True  # v is the only consumer: it always runs in place
                break
            q = m.NewBoolVar(f"last_{t}_{v}")
            for c in others:
                m.Add(pos[c] < pos[v]).OnlyEnforceIf(q)
            before = [m.NewBoolVar(f"b_{c}_{v}") for c in others]
            for c, b in zip(others, before, strict=True):
                m.Add(pos[c] < pos[v]).OnlyEnforceIf(b)
                m.Add(pos[c] > pos[v]).OnlyEnforceIf(b.Not())
            m.AddBoolAnd(before).OnlyEnforceIf(q)
            m.AddBoolOr([b.Not() for b in before] + [q])
            lits.append(q)
        if always:
            reuse[v] = 1
        else:
            r = m.NewBoolVar(f"reuse_{v}")
            m.AddMaxEquality(r, lits)
            reuse[v] = r
    for v in range(n):
        outs = a.out_idx[a.out_ptr[v] : a.out_ptr[v + 1]].tolist()
        for k, t in enumerate(outs):
            size = int(a.size[t])
            if size == 0:
                continue
            if a.keep[t]:
                end: cp_model.IntVar | int = n
            elif a.n_consumers[t] == 0:
                end = pos[v] + 1
            else:
                end = m.NewIntVar(1, n, f"end{t}")
                m.AddMaxEquality(end, [pos[int(c)] + 1 for c in cons.row(t).tolist()])
            start = pos[v]
            if k == 0 and v in reuse:
                start = m.NewIntVar(0, n, f"start{t}")
                m.Add(start == pos[v] + reuse[v])
            length = m.NewIntVar(0, n, f"len{t}")
            intervals.append(m.NewIntervalVar(start, length, end, f"live{t}"))
            demands.append(size)
        if a.param[v] > 0:
            intervals.append(m.NewFixedSizeIntervalVar(pos[v], 1, f"param{v}"))
            demands.append(int(a.param[v]))
    total = int(sum(demands))
    cap = m.NewIntVar(0, max(total, 0), "cap")
    if intervals:
        m.AddCumulative(intervals, demands, cap)
    m.Minimize(cap)
    where = np.empty(n, dtype=np.int64)
    where[hint] = np.arange(n)
    for v in range(n):
        m.AddHint(pos[v], int(where[v]))
    solver = cp_solver(time_limit, seed, workers, model=m)
    status = solver.Solve(m)
    name = solver.StatusName(status)
    bound = a.base + max(0, math.ceil(solver.BestObjectiveBound() - 1e-9)) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else 0
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, None, bound, name
    order = np.argsort([solver.Value(p) for p in pos], kind="stable").astype(np.int64)
    return order, a.base + int(solver.ObjectiveValue()), bound, name


@register("cpsat", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    t0 = work_clock()
    max_ops = int(ctx.option("max_ops", DEFAULT_MAX_OPS))
    hint_name, hint, hint_peak = best_of(graph, cheap_orders(graph, ctx.inplace), ctx.inplace)
    graph_lb = int(lower_bound(graph, ctx.inplace))
    if graph.n_ops > max_ops:
        return make_schedule(
            graph, hint, "cpsat", ctx.inplace, hint=hint_name,
            note=f"graph has {graph.n_ops} ops > max_ops={max_ops}: CP-SAT not run, returned the {hint_name} hint",
        )
    budget = max(ctx.time_limit - (work_clock() - t0), 0.01)
    order, model_peak, bound, status = solve_cpsat(
        graph, hint, inplace=ctx.inplace, time_limit=budget, seed=ctx.seed, workers=int(ctx.option("workers", 1))
    )
    lb = max(graph_lb, bound)
    if order is None or peak_of(graph, order, ctx.inplace) >= hint_peak:
        chosen, optimal = hint, status == "OPTIMAL" and model_peak is not None and model_peak >= hint_peak
    else:
        chosen, optimal = order, status == "OPTIMAL"
    return make_schedule(
        graph, chosen, "cpsat", ctx.inplace, optimal=optimal, bound=min(lb, peak_of(graph, chosen, ctx.inplace)),
        hint=hint_name, hint_peak=hint_peak, status=status, model_peak=model_peak,
        seconds=round(work_clock() - t0, 4),
    )
