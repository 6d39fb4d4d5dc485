"""Keep numba compilation off the clock.

onnx-sched's kernels are numba functions compiled on first use (about 9 s of CPU for the
peak-memory portfolio) and cached on disk.  A pass must give the same answer on its first
call as on its hundredth, so compilation must never eat a time budget:

* :func:`work_clock` is ``time.perf_counter`` with the time spent compiling taken out
  (numba's ``numba:compile`` events, outermost only).  Every budget check of the passes
  (:class:`onnx_sched.deadline.Deadline`, the beam and exact searches, the GA, the
  policy search) reads it, so a kernel compiled in the middle of a search costs nothing.
* :func:`warm_up` runs a method once on a tiny instance before the budget starts, so
  kernels are compiled (or loaded from numba's cache, which the events do not count)
  up front; :func:`announce_compilation` shows a spinner while that happens.

numba's cache lives beside the package (``__pycache__``); when that folder is not
writable numba falls back to a per-user cache directory, and ``NUMBA_CACHE_DIR``
overrides both.

Example:
    >>> t0 = work_clock()
    >>> work_clock() >= t0
    True
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from numba.core import event

__all__ = ["announce_compilation", "compile_seconds", "warm_up", "work_clock"]


class _CompileTimer(event.Listener):
    """Adds up wall time inside outermost ``numba:compile`` events (nested ones are inside them)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.started = 0.0
        self.total = 0.0
        self.on_first_start: Callable[[], None] | None = None

    def on_start(self, ev: event.Event) -> None:
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            self.started = time.perf_counter()
            hook, self.on_first_start = self.on_first_start, None
        if hook is not None:
            hook()

    def on_end(self, ev: event.Event) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                self.total += time.perf_counter() - self.started

    def seconds(self) -> float:
        with self.lock:
            running = time.perf_counter() - self.started if self.depth else 0.0
            return self.total + running


_TIMER = _CompileTimer()
event.register("numba:compile", _TIMER)


def compile_seconds() -> float:
    """Seconds this process has spent compiling numba kernels so far."""
    return _TIMER.seconds()


def work_clock() -> float:
    """``time.perf_counter()`` minus the compile time so far: the clock every budget is measured on."""
    return time.perf_counter() - _TIMER.seconds()


@contextmanager
def announce_compilation(start: Callable[[], None], stop: Callable[[], None]) -> Iterator[None]:
    """Call ``start()`` when the first kernel starts compiling inside the block, ``stop()`` at its end
    (only if ``start`` was called).  The CLI passes a rich spinner's start / stop."""
    started = threading.Event()

    def hook() -> None:
        started.set()
        start()

    _TIMER.on_first_start = hook
    try:
        yield
    finally:
        _TIMER.on_first_start = None
        if started.is_set():
            stop()


def warm_up(run: Callable[[], object]) -> tuple[float, float]:
    """Run ``run()`` (a method on a tiny instance) so its kernels are compiled or loaded from cache.

    Returns ``(wall seconds, of which compiling)``."""
    t0, c0 = time.perf_counter(), compile_seconds()
    run()
    return time.perf_counter() - t0, compile_seconds() - c0
