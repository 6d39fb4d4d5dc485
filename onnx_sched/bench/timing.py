"""Latency timing for the runtime benches: warm-ups, timed calls, median / p90 summary.

:func:`time_calls` runs a callable ``warmup`` times untimed then ``repeats`` times
timed with ``time.perf_counter``; :func:`summarize` reduces the seconds to the
median, p90 and min that every bench report holds.  One place, so every runtime
is timed the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["summarize", "time_calls"]


def summarize(times: Sequence[float]) -> dict[str, float]:
    t = np.asarray(times, np.float64)
    return {"median_s": float(np.median(t)), "p90_s": float(np.percentile(t, 90)), "min_s": float(t.min()),
            "runs": int(len(t))}


def time_calls(fn: Any, warmup: int, repeats: int) -> tuple[list[float], Any]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones, and the last result."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out
