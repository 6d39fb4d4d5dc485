"""Peak live heap bytes of a block of code, from every native allocation it makes.

``onnx-sched bench`` uses this in its fresh runner processes to measure what a
runtime really allocates during ``session.run`` (ORT) or ``infer`` (OpenVINO):
the activation peak that an operator order changes.  Peak RSS is too coarse for
that (pages, allocator caches, a few MB of noise against savings of a few MB);
a heap tracker sees every ``malloc``/``free`` of the runtime's kernels.

The tracker is memray (Bloomberg, maintained, ``pip install memray``; here the
``[bench]`` extra): it intercepts ``malloc``, ``free``, ``realloc``,
``posix_memalign``, ``aligned_alloc``, ``mmap`` and friends in *every thread* of
the process at the native level, which is where ONNX Runtime and OpenVINO
allocate, and needs no rebuilt runtime.  ``tracemalloc`` sees only Python's own
allocator, and a ``LD_PRELOAD`` counter would need a compiled shim of our own.
memray runs on Linux and macOS.

Only allocations made *inside* the window count: memory allocated before it
(the session, its weights, the caller's inputs) is not seen, and freeing it
inside the window does not lower the count.  So :attr:`HeapTrace.peak_bytes` of
one run is the high-water mark of what that run allocated on top of what was
already there.

Example:
    >>> outputs, trace = trace_heap(lambda: session.run(None, feed))   # doctest: +SKIP
    >>> trace.peak_bytes, len(trace.curve)                             # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from onnx_sched.errors import OnnxSchedError

__all__ = [
    "HEAP_TRACKER",
    "MISSING_TRACKER",
    "HeapTrace",
    "downsample_max",
    "heap_fields",
    "heap_tracker_available",
    "live_bytes_curve",
    "trace_heap",
]

T = TypeVar("T")

HEAP_TRACKER = "memray"
#: What bench prints when the tracker is not installed.
MISSING_TRACKER = "heap peaks need memray: pip install 'onnx-sched[bench]' (or pip install memray)"
#: Points kept of a live-bytes curve (each the maximum of its stretch of events, so the peak survives).
CURVE_POINTS = 1000


@dataclass(frozen=True)
class HeapTrace:
    """Live heap bytes allocated inside one window, and how they evolved."""

    peak_bytes: int  # high-water mark of live bytes allocated in the window
    end_bytes: int  # of those, still live when the window closed
    allocations: int  # allocation events in the window
    curve: tuple[int, ...]  # live bytes over the window's events, downsampled (max per stretch)


def heap_tracker_available() -> bool:
    """Whether memray can be imported here."""
    try:
        import memray  # noqa: F401
    except ImportError:
        return False
    return True


def _require_memray() -> Any:
    try:
        import memray
    except ImportError:
        raise OnnxSchedError(MISSING_TRACKER) from None
    return memray


def live_bytes_curve(events: Iterable[tuple[str, int, int]]) -> tuple[np.ndarray, int]:
    """Live bytes after each ``(kind, address, size)`` event, and the bytes live at the end.

    ``kind`` is ``"alloc"`` or ``"free"``; a free of an address allocated before
    the window (unknown here) changes nothing; ``munmap`` may free part of a
    mapping, so a free releases at most the bytes known at that address.

    >>> live_bytes_curve([("alloc", 1, 100), ("alloc", 2, 50), ("free", 1, 0), ("free", 9, 0)])
    (array([100, 150,  50,  50]), 50)
    """
    live: dict[int, int] = {}
    current = 0
    out: list[int] = []
    for kind, address, size in events:
        if kind == "free":
            held = live.pop(address, 0)
            released = held if size <= 0 else min(size, held)
            if held > released:  # a partial munmap keeps the rest of the mapping
                live[address + released] = held - released
            current -= released
        else:
            current += size - live.get(address, 0)
            live[address] = size
        out.append(current)
    return np.asarray(out, dtype=np.int64), current


def _events(reader: Any, memray: Any) -> Iterable[tuple[str, int, int]]:
    kinds = memray.AllocatorType
    frees = {kinds.FREE, kinds.MUNMAP, kinds.PYMALLOC_FREE}
    for rec in reader.get_allocation_records():
        if rec.allocator in frees:
            yield "free", rec.address, rec.size if rec.allocator == kinds.MUNMAP else 0
        else:
            yield "alloc", rec.address, rec.size


def downsample_max(curve: np.ndarray, points: int = CURVE_POINTS) -> tuple[int, ...]:
    """At most ``points`` values of ``curve``, each the maximum of its stretch (the peak survives).

    >>> downsample_max(np.array([1, 5, 2, 2, 7, 1]), 3)
    (5, 2, 7)
    """
    if len(curve) <= points:
        return tuple(int(v) for v in curve)
    edges = np.linspace(0, len(curve), points + 1).astype(np.int64)
    return tuple(int(v) for v in np.maximum.reduceat(curve, edges[:-1]))


def trace_heap(fn: Callable[[], T], *, curve_points: int = CURVE_POINTS) -> tuple[T, HeapTrace]:
    """Run ``fn`` under memray; return its result and the :class:`HeapTrace` of the window.

    The capture file lives in a temporary directory removed afterwards.
    """
    memray = _require_memray()
    with tempfile.TemporaryDirectory(prefix="onnx_sched_heap_") as tmp:
        capture = os.path.join(tmp, "capture.bin")
        with memray.Tracker(capture):
            result = fn()
        reader = memray.FileReader(capture)
        curve, end = live_bytes_curve(_events(reader, memray))
        peak = int(reader.metadata.peak_memory)
        n = int(reader.metadata.total_allocations)
        reader.close()
    return result, HeapTrace(peak_bytes=peak, end_bytes=end, allocations=n, curve=downsample_max(curve, curve_points))


def heap_fields(run: Callable[[], Any], warmup: int, setup: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Report fields of a heap measurement of ``run`` (one inference), for a runner.

    Two windows, one after the other: ``setup`` (if given) and ``max(warmup, 1)``
    runs, then one more run.  ``heap_peak_bytes`` is the peak of that last run,
    what one inference allocates once warmed up (arena off: the activation
    peak).  ``heap_reserved_bytes`` is the peak over both windows counted from
    the first: what the runtime holds at most from the first run on (arena on:
    what the arena reserves).  ``heap_curve`` is the last run's live bytes.
    """
    import memray

    def first_runs() -> None:
        if setup is not None:
            setup()
        for _ in range(max(warmup, 1)):
            run()

    _, first = trace_heap(first_runs)
    _, last = trace_heap(run)
    return {
        "heap_tracker": f"{HEAP_TRACKER} {memray.__version__}",
        "heap_peak_bytes": last.peak_bytes,
        "heap_reserved_bytes": max(first.peak_bytes, first.end_bytes + last.peak_bytes),
        "heap_first_runs_peak_bytes": first.peak_bytes,
        "heap_allocations": last.allocations,
        "heap_curve": list(last.curve),
    }
