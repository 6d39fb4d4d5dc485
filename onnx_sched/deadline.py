"""A wall-clock budget that passes and portfolios share, measured on :func:`onnx_sched.jit.work_clock`
(wall time with numba compilation taken out)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from onnx_sched.jit import work_clock

__all__ = ["Deadline", "positive_seconds"]


def positive_seconds(value: object, what: str = "time_limit") -> float:
    """``value`` as a positive, finite number of seconds, else a ``ValueError`` naming ``what``
    (``float`` accepts ``nan`` and ``inf``, which no clock can keep).

    >>> positive_seconds("2.5")
    2.5
    >>> positive_seconds(float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: time_limit nan: expected a positive, finite number of seconds
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{what} {value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{what} {value!r}: expected a positive, finite number of seconds")
    return seconds


class Deadline:
    """Wall-clock budget measured from construction, compile time excluded."""

    def __init__(self, seconds: float) -> None:
        self.start = work_clock()
        self.seconds = float(seconds)

    def elapsed(self) -> float:
        return work_clock() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def expired(self) -> bool:
        return self.left() <= 0.0

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside the block does not count (e.g. warming up kernels)."""
        t0 = work_clock()
        try:
            yield
        finally:
            self.start += work_clock() - t0
