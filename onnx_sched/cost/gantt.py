"""Gantt chart of a makespan schedule, and the timeline of a latency placement (matplotlib is optional:
``pip install onnx-sched[plot]``).

One row per resource lane: a machine type or device with capacity ``c`` gets
``c`` lanes, and ops are packed onto lanes by start time (interval
partitioning), so the picture shows where capacity is idle.  Ops demanding more
than one resource unit are drawn on their first lane with the demand in the label.
A latency placement (:func:`plot_latency`) is drawn as its latency model runs it:
concurrent, the Gantt chart of its list schedule; sequential, one op at a time with
the transfers on their own row.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
from typing import Any

import numpy as np

from onnx_sched.cost.makespan import MakespanProblem, evaluate
from onnx_sched.schedule import Schedule

__all__ = ["lanes", "plot_gantt", "plot_latency"]


def lanes(problem: MakespanProblem, start: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """Lane index (within its unit) per op, packing ops by start time onto the first free lane."""
    n = problem.n_ops
    dur = problem.durations[np.arange(n), placement]
    finish = start + dur
    lane = np.zeros(n, np.int64)
    for p in range(problem.n_units):
        ops = np.flatnonzero(placement == p)
        ops = ops[np.lexsort((ops, start[ops]))]
        free: list[tuple[float, int]] = []  # (time the lane frees, lane)
        idle = list(range(int(problem.capacity[p])))
        heapq.heapify(idle)
        extra = int(problem.capacity[p])
        for v in ops:
            while free and free[0][0] <= start[v]:
                heapq.heappush(idle, heapq.heappop(free)[1])
            if idle:
                k = heapq.heappop(idle)
            else:  # only with demands > 1 packed into one lane; keep drawing
                k, extra = extra, extra + 1
            lane[v] = k
            heapq.heappush(free, (float(finish[v]), k))
    return lane


def plot_gantt(problem: MakespanProblem, schedule: Schedule, path: str | os.PathLike, title: str = "") -> None:
    """Draw ``schedule`` as a Gantt chart PNG at ``path`` (one row per resource lane)."""
    from onnx_sched.plot import pyplot, save_figure

    plt = pyplot()
    res = evaluate(problem, schedule)
    start, place = res.start, res.placement
    n = problem.n_ops
    dur = problem.durations[np.arange(n), place]
    lane = lanes(problem, start, place)
    rows = []
    for p in range(problem.n_units):
        used = int(lane[place == p].max()) + 1 if (place == p).any() else 0
        rows.extend((p, k) for k in range(max(int(problem.capacity[p]), used)))
    row_of = {r: i for i, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.35 * len(rows)))
    cmap = plt.get_cmap("tab10")
    for v in range(n):
        y = row_of[(int(place[v]), int(lane[v]))]
        ax.barh(y, dur[v], left=start[v], height=0.8, color=cmap(int(place[v]) % 10), edgecolor="black",
                linewidth=0.3)
        if n <= 80 and dur[v] > 0.03 * res.makespan:
            label = problem.graph.op_names[v] + (f" x{problem.demand[v]}" if problem.demand[v] > 1 else "")
            ax.text(start[v] + dur[v] / 2, y, label, ha="center", va="center", fontsize=6, clip_on=True)
    names = problem.device_names
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{names[p]}[{k}]" for p, k in rows], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(res.makespan, color="red", linewidth=0.8)
    ax.axvline(res.lower_bound, color="gray", linestyle="--", linewidth=0.8)
    ax.set_xlabel("time (s)" if problem.source in ("roofline", "profile") else "time")
    ax.set_title(title or (f"{problem.graph.name}: {schedule.method}, makespan {res.makespan:.4g} "
                           f"(lower bound {res.lower_bound:.4g}, speedup {res.speedup:.2f})"))
    fig.tight_layout()
    save_figure(fig, path)


def plot_latency(problem: Any, placement: np.ndarray, path: str | os.PathLike, title: str = "",
                 order: np.ndarray | None = None) -> None:
    """Draw a latency placement (:class:`~onnx_sched.cost.latency.PlacementProblem`) as its mode runs it, a PNG at
    ``path``: concurrent, the Gantt chart of :func:`~onnx_sched.cost.latency.concurrent_schedule`; sequential, the
    ops one after another in ``order`` (default: a topological order) on their devices' rows and the transfers on
    a row of their own (:func:`~onnx_sched.cost.latency.sequential_timeline`)."""
    from onnx_sched.cost.latency import concurrent_schedule, sequential_timeline
    from onnx_sched.plot import pyplot, save_figure

    p = np.asarray(placement, np.int64)
    name = problem.graph.name
    if problem.mode == "concurrent":
        mp, start, makespan = concurrent_schedule(problem, p)
        mp = dataclasses.replace(mp, source="profile")  # seconds, from the device profiles
        schedule = Schedule(order=np.argsort(start, kind="stable"), method="placement", placement=p, start=start)
        plot_gantt(mp, schedule, path, title or f"{name}: concurrent latency {makespan * 1e3:.4g} ms")
        return
    plt = pyplot()
    start, moves = sequential_timeline(problem, p, order)
    seconds = problem.op_time[np.arange(len(p)), p]
    end = max(float((start + seconds).max(initial=0.0)), max((t + d for t, d, *_ in moves), default=0.0))
    names = list(problem.device_names)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.35 * (len(names) + 1)))
    cmap = plt.get_cmap("tab10")
    for v in range(len(p)):
        ax.barh(int(p[v]), seconds[v], left=start[v], height=0.8, color=cmap(int(p[v]) % 10), edgecolor="black",
                linewidth=0.3)
        if len(p) <= 80 and seconds[v] > 0.03 * end:
            ax.text(start[v] + seconds[v] / 2, int(p[v]), problem.graph.op_names[v], ha="center", va="center",
                    fontsize=6, clip_on=True)
    for t, d, _, src, _ in moves:
        ax.barh(len(names), d, left=t, height=0.8, color=cmap(src % 10), alpha=0.5, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(names) + 1))
    ax.set_yticklabels([*names, "transfers"], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(end, color="red", linewidth=0.8)
    ax.set_xlabel("time (s)")
    ax.set_title(title or f"{name}: sequential latency {end * 1e3:.4g} ms ({len(moves)} transfers)")
    fig.tight_layout()
    save_figure(fig, path)
