"""A wall-clock budget that passes and portfolios share (``time.perf_counter``)."""

from __future__ import annotations

import time

__all__ = ["Deadline"]


class Deadline:
    """Wall-clock budget measured from construction (``time.perf_counter``)."""

    def __init__(self, seconds: float) -> None:
        self.start = time.perf_counter()
        self.seconds = float(seconds)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def expired(self) -> bool:
        return self.left() <= 0.0
