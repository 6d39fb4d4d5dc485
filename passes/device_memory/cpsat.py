"""``cpsat``: an exact CP-SAT model of joint placement + schedule with transfers (paper 003's CP SAT baseline).

Data: the graph, the devices, optional memory limits.  Variables: ``x[j, d]`` (op
``j`` on device ``d``, exactly one per op); a position per op and per possible
transfer of a tensor to a device; every step is a unit interval and no two
present steps share a position (``AddNoOverlap``), dependencies order them (a
transfer after its producer, before the readers on its destination).
Constraints: per device, every copy of a tensor occupies memory from the step
that makes it (its producer on the home device, its transfer elsewhere) through
its last reader there (and, at home, its last outgoing transfer; graph outputs to
the end, unread outputs one step), and every op's transient bytes at its own
step; one ``AddCumulative`` per device with a variable capacity.  Objective: the
largest device peak (graph inputs live on the host throughout).  This is the
model of :mod:`onnx_sched.cost.device_memory`, so an ``OPTIMAL`` status proves
the optimum; the schedule it returns is rebuilt from the positions and walked by
that module.  Tensors of zero bytes only need their transfers for validity: they
are sent right after they are made.

Hinted with the best of the host-only input order and the partition + DFS
solutions.  Graphs above ``max_ops`` (default 60) are not modelled: the hint is
returned with ``info["note"]`` saying so.  Options: ``max_ops``, ``workers``.
"""

from __future__ import annotations

import math

import numpy as np

from onnx_sched.cost import device_memory as dm
from onnx_sched.cp_sat import cp_solver
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory import partition_dfs
from onnx_sched.passes.device_memory._common import make_schedule, problem_of
from onnx_sched.schedule import Schedule

__all__ = ["improve", "run", "solve"]

DEFAULT_MAX_OPS = 60


def _hint_steps(problem: dm.DeviceMemoryProblem, seed: int) -> tuple[dm.Step, ...]:
    n = problem.graph.n_ops
    candidates = [tuple(dm.Step("op", j, 0) for j in range(n)), *partition_dfs.candidates(problem, seed).values()]
    scores = [float(dm.fitness(problem, dm.walk(problem, c).per_device_peak)[0]) for c in candidates]
    return candidates[int(np.argmin(scores))]


def solve(problem: dm.DeviceMemoryProblem, hint: tuple[dm.Step, ...], *, time_limit: float, seed: int = 0,
          workers: int = 1) -> tuple[tuple[dm.Step, ...] | None, int, str]:
    """(steps or None, proven lower bound on the peak, solver status name)."""
    from ortools.sat.python import cp_model

    g, a = problem.graph, problem.arrays
    n, nd = g.n_ops, problem.n_devices
    ptr, readers = problem.consumers
    producer = np.asarray(g.tensor_producer, dtype=np.int64)
    moved = [t for t in range(g.n_tensors) if ptr[t + 1] > ptr[t] and a.size[t] > 0]
    horizon = n + len(moved) * nd
    m = cp_model.CpModel()
    x = [[m.NewBoolVar(f"x{j}_{d}") for d in range(nd)] for j in range(n)]
    for j in range(n):
        m.AddExactlyOne(x[j])
    pos = [m.NewIntVar(0, horizon - 1, f"p{j}") for j in range(n)]
    steps = [m.NewFixedSizeIntervalVar(pos[j], 1, f"s{j}") for j in range(n)]
    for u, v in g.edges.tolist():
        m.Add(pos[u] < pos[v])
    per_device: list[list[tuple[cp_model.IntervalVar, int]]] = [[] for _ in range(nd)]
    tpos: dict[tuple[int, int], cp_model.IntVar] = {}
    xfer: dict[tuple[int, int], cp_model.IntVar] = {}

    def on(t: int, d: int):  # noqa: ANN202 - home literal (an int for graph inputs)
        p = int(producer[t])
        return x[p][d] if p >= 0 else int(d == 0)

    for t in moved:
        p, rs = int(producer[t]), [int(r) for r in readers[ptr[t]: ptr[t + 1]]]
        for d in range(nd):
            need = m.NewBoolVar(f"need{t}_{d}")
            m.AddMaxEquality(need, [x[r][d] for r in rs])
            home = on(t, d)
            if isinstance(home, int) and home == 1:
                continue
            sent = m.NewBoolVar(f"xfer{t}_{d}")
            m.AddImplication(sent, need)
            if isinstance(home, int):
                m.Add(sent == need)
            else:
                m.AddBoolOr([need.Not(), home, sent])
                m.AddImplication(sent, home.Not())
            q = m.NewIntVar(0, horizon - 1, f"tp{t}_{d}")
            steps.append(m.NewOptionalFixedSizeIntervalVar(q, 1, sent, f"ts{t}_{d}"))
            if p >= 0:
                m.Add(q > pos[p]).OnlyEnforceIf(sent)
            for r in rs:
                m.Add(pos[r] > q).OnlyEnforceIf([sent, x[r][d]])
            tpos[t, d], xfer[t, d] = q, sent
    m.AddNoOverlap(steps)
    for t in moved:
        p, rs = int(producer[t]), [int(r) for r in readers[ptr[t]: ptr[t + 1]]]
        size = int(a.size[t])
        for d in range(nd):
            copies = [] if p < 0 else [(on(t, d), pos[p], True)]
            if (t, d) in xfer:
                copies.append((xfer[t, d], tpos[t, d], False))
            for present, start, at_home in copies:
                end = m.NewIntVar(0, horizon, f"e{t}_{d}_{int(at_home)}")
                m.Add(end >= start)
                for r in rs:
                    m.Add(end >= pos[r]).OnlyEnforceIf(x[r][d])
                if at_home:
                    for e in range(nd):
                        if (t, e) in xfer and e != d:
                            m.Add(end >= tpos[t, e]).OnlyEnforceIf(xfer[t, e])
                    if a.keep[t]:
                        m.Add(end == horizon)
                length = m.NewIntVar(1, horizon + 1, f"l{t}_{d}_{int(at_home)}")
                m.Add(length == end - start + 1)
                interval = m.NewOptionalIntervalVar(start, length, end + 1, present, f"i{t}_{d}_{int(at_home)}")
                per_device[d].append((interval, size))
    moved_set = set(moved)
    for j in range(n):
        unread = [int(t) for t in a.out_idx[a.out_ptr[j]: a.out_ptr[j + 1]] if t not in moved_set and a.size[t] > 0]
        transient = int(a.param[j]) + int(sum(a.size[t] for t in unread if not a.keep[t]))  # at its own step
        kept = int(sum(a.size[t] for t in unread if a.keep[t]))  # graph outputs nobody reads: to the end
        for d in range(nd):
            if transient:
                per_device[d].append((m.NewOptionalFixedSizeIntervalVar(pos[j], 1, x[j][d], f"t{j}_{d}"), transient))
            if kept:
                length = m.NewIntVar(1, horizon + 1, f"kl{j}_{d}")
                m.Add(length == horizon + 1 - pos[j])
                per_device[d].append((m.NewOptionalIntervalVar(pos[j], length, horizon + 1, x[j][d], f"k{j}_{d}"),
                                      kept))
    total = int(a.size.sum() + a.param.sum())
    peak = m.NewIntVar(0, total + a.base, "peak")
    for d in range(nd):
        cap = m.NewIntVar(0, total, f"cap{d}")
        if per_device[d]:
            m.AddCumulative([i for i, _ in per_device[d]], [s for _, s in per_device[d]], cap)
        base = a.base if d == 0 else 0
        m.Add(peak >= cap + base)
        if problem.capacity[d] > 0:
            m.Add(cap + base <= int(problem.capacity[d]))
    m.Minimize(peak)
    _add_hint(m, problem, hint, x, pos, tpos)
    solver = cp_solver(time_limit, seed, workers, model=m)
    status = solver.Solve(m)
    name = solver.StatusName(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, 0, name
    bound = max(0, math.ceil(solver.BestObjectiveBound() - 1e-9))
    placement = np.array([[solver.Value(v) for v in row].index(1) for row in x], dtype=np.int64)
    events = [(solver.Value(pos[j]), 0, dm.Step("op", j, int(placement[j]))) for j in range(n)]
    for (t, d), sent in xfer.items():
        if solver.Value(sent):
            home = int(placement[producer[t]]) if producer[t] >= 0 else 0
            events.append((solver.Value(tpos[t, d]), 0, dm.Step("transfer", t, d, home)))
    events += _zero_byte_transfers(problem, placement, {j: solver.Value(pos[j]) for j in range(n)})
    return tuple(step for _, _, step in sorted(events, key=lambda e: (e[0], e[1]))), bound, name


def _zero_byte_transfers(problem: dm.DeviceMemoryProblem, placement: np.ndarray,
                         at: dict[int, int]) -> list[tuple[int, int, dm.Step]]:
    """Transfers of tensors that take no memory, right after their producer (inputs: first)."""
    g, a = problem.graph, problem.arrays
    ptr, readers = problem.consumers
    out = []
    for t in range(g.n_tensors):
        if a.size[t] > 0 or ptr[t + 1] == ptr[t]:
            continue
        p = int(g.tensor_producer[t])
        home = int(placement[p]) if p >= 0 else 0
        for d in sorted({int(placement[r]) for r in readers[ptr[t]: ptr[t + 1]]} - {home}):
            out.append((at[p] if p >= 0 else -1, 1, dm.Step("transfer", t, d, home)))
    return out


def _add_hint(m, problem: dm.DeviceMemoryProblem, hint: tuple[dm.Step, ...], x, pos, tpos) -> None:  # noqa: ANN001
    for k, s in enumerate(hint):
        if s.kind == "op":
            for d in range(problem.n_devices):
                m.AddHint(x[s.item][d], int(d == s.device))
            m.AddHint(pos[s.item], k)
        elif (s.item, s.device) in tpos:
            m.AddHint(tpos[s.item, s.device], k)


def improve(problem: dm.DeviceMemoryProblem, hint: tuple[dm.Step, ...], method: str, *, time_limit: float,
            seed: int = 0, workers: int = 1, **info: object) -> Schedule:
    """CP-SAT hinted with ``hint``: its schedule if no worse than the hint, else the hint; ``optimal``
    when the peak meets CP-SAT's bound (valid whatever its status) or the problem's lower bound.
    ``info`` gains the solver ``status``, its ``model_bound`` and the ``hint_peak``."""
    steps, bound, status = solve(problem, hint, time_limit=max(time_limit, 0.01), seed=seed, workers=workers)
    hint_peak = dm.walk(problem, hint).peak
    if steps is None or dm.walk(problem, steps).peak > hint_peak:
        steps = hint
    schedule = make_schedule(problem, steps, method, status=status, model_bound=bound, hint_peak=hint_peak, **info)
    lower = max(bound, dm.lower_bound(problem))
    peak = max(schedule.info["per_device_peak"].values())
    return schedule.with_(optimal=peak <= lower, lower_bound=float(lower))


@register("cpsat", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    clock = Deadline(ctx.time_limit)
    hint = _hint_steps(problem, ctx.seed)
    max_ops = int(ctx.option("max_ops", DEFAULT_MAX_OPS))
    if graph.n_ops > max_ops:
        return make_schedule(problem, hint, "cpsat",
                             note=f"graph has {graph.n_ops} ops > max_ops={max_ops}: CP-SAT not run, returned the hint")
    return improve(problem, hint, "cpsat", time_limit=clock.left(), seed=ctx.seed,
                   workers=int(ctx.option("workers", 1)))
