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
from onnx_sched.report import fmt_times
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
    labels = [problem.graph.op_names[v] + (f" x{problem.demand[v]}" if problem.demand[v] > 1 else "") for v in range(n)]
    bars = [_Bar(row_of[(int(place[v]), int(lane[v]))], start[v], dur[v], int(place[v]), labels[v]) for v in range(n)]
    names = problem.device_names
    seconds = problem.in_seconds
    times = (res.makespan, res.lower_bound)
    span, bound = fmt_times(*times) if seconds else [f"{t:.4g}" for t in times]
    _draw(path, [f"{names[p]}[{k}]" for p, k in rows], bars, res.makespan, lower_bound=res.lower_bound,
          seconds=seconds,
          title=title or f"{problem.graph.name}: {schedule.method}, makespan {span} (lower bound {bound}, speedup "
                         f"{res.speedup:.2f})")


def plot_latency(problem: Any, placement: np.ndarray, path: str | os.PathLike, title: str = "",
                 order: np.ndarray | None = None) -> None:
    """Draw a latency placement (:class:`~onnx_sched.cost.latency.PlacementProblem`) as its mode runs it, a PNG at
    ``path``: concurrent, the Gantt chart of :func:`~onnx_sched.cost.latency.concurrent_schedule`; sequential, the
    ops one after another in ``order`` (default: a topological order) on their devices' rows and the transfers on
    a row of their own (:func:`~onnx_sched.cost.latency.sequential_timeline`)."""
    from onnx_sched.cost.latency import concurrent_schedule, sequential_timeline

    p = np.asarray(placement, np.int64)
    name = problem.graph.name
    if problem.mode == "concurrent":
        mp, start, makespan = concurrent_schedule(problem, p)
        mp = dataclasses.replace(mp, source="profile")  # seconds, from the device profiles
        schedule = Schedule(order=np.argsort(start, kind="stable"), method="placement", placement=p, start=start)
        plot_gantt(mp, schedule, path, title or f"{name}: concurrent latency {makespan * 1e3:.4g} ms")
        return
    start, moves = sequential_timeline(problem, p, order)
    seconds = problem.op_time[np.arange(len(p)), p]
    end = max(float((start + seconds).max(initial=0.0)), max((t + d for t, d, *_ in moves), default=0.0))
    names = list(problem.device_names)
    bars = [_Bar(int(p[v]), start[v], seconds[v], int(p[v]), problem.graph.op_names[v]) for v in range(len(p))]
    bars += [_Bar(len(names), t, d, src, "", alpha=0.5) for t, d, _, src, _ in moves]  # on the transfers row
    _draw(path, [*names, "transfers"], bars, end, seconds=True,
          title=title or f"{name}: sequential latency {end * 1e3:.4g} ms ({len(moves)} transfers)")


@dataclasses.dataclass(frozen=True)
class _Bar:
    """One bar of a timeline: its row, start, length, colour (a device index) and label."""

    row: int
    start: float
    length: float
    colour: int
    label: str
    alpha: float = 1.0


def _draw(path: str | os.PathLike, rows: list[str], bars: list[_Bar], end: float, *, title: str, seconds: bool,
          lower_bound: float | None = None) -> None:
    """A timeline PNG: ``bars`` on ``rows`` (top to bottom), a red line at ``end`` (and a dashed one at
    ``lower_bound``); labels on bars of at least 3 % of ``end`` when there are at most 80 bars with labels."""
    from onnx_sched.plot import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.35 * len(rows)))
    cmap = plt.get_cmap("tab10")
    labelled = sum(1 for b in bars if b.label) <= 80
    for b in bars:
        ax.barh(b.row, b.length, left=b.start, height=0.8, color=cmap(b.colour % 10), alpha=b.alpha,
                edgecolor="black", linewidth=0.3)
        if labelled and b.label and b.length > 0.03 * end:
            ax.text(b.start + b.length / 2, b.row, b.label, ha="center", va="center", fontsize=6, clip_on=True)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(end, color="red", linewidth=0.8)
    if lower_bound is not None:
        ax.axvline(lower_bound, color="gray", linestyle="--", linewidth=0.8)
    if seconds and end < 1:  # model runs take milliseconds: tick labels in ms
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x * 1e3:g}"))
    ax.set_xlabel(("time (ms)" if end < 1 else "time (s)") if seconds else "time")
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)
