"""Time several placements of one model against each other: split-executor runs, interleaved, on pinned cores.

Each placement (a device index per graph op) is cut into per-device parts and
run by :class:`~onnx_sched.bench.split_executor.SplitExecutor`, one worker
thread per device, concurrently, device ``i`` pinned to CPU core ``i mod cores``
(on this machine two pinned cores are a real two-device target).  The runs are
interleaved -- placement 1, 2, ..., k, then 1, 2, ... again -- so load drift on a
shared machine hits all alike, and every placement's outputs are checked
against the first one's (``ValueError`` if they differ).  This is what the
``measured`` target of the makespan and latency objectives runs:
:func:`memo_speedups` remembers each placement's speedup, so a pass that chose
on the target and the objective's report after it share one measurement, and
:func:`measuring_seconds` says beforehand about how long the runs will take, so
a time limit can hold that time back from the search.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from onnx_sched.errors import first_line

__all__ = ["RunCost", "interleaved_seconds", "measured_target_seconds", "measuring_seconds", "memo_speedups", "release",
           "run_cost", "speedups_over"]


#: Timed rounds a deadline never cuts below: the median of 3 runs (each placement also ran once, checked, first).
MIN_REPEATS = 3


def interleaved_seconds(imported: Any, placements: np.ndarray, device_names: Sequence[str], repeats: int = 10,
                        warmup: int = 2, seed: int = 0, deadline: Any = None,
                        required: int | None = None) -> np.ndarray:
    """Seconds ``(placements, repeats)`` of interleaved runs of each row of ``placements`` (see module docstring).

    With a ``deadline`` (:class:`~onnx_sched.deadline.Deadline`), the rows after the first ``required`` (default:
    all) are set up only while the run still ends in time: a row is added when, after it, the slowest setup and
    check run so far plus ``warmup + repeats`` runs of every row kept still fit.  Rows left out are NaN.  When
    even the required rows' rounds would end after the deadline (a large model, seconds per run), the warm-up
    rounds go first, then timed rounds down to :data:`MIN_REPEATS`; the columns not run are NaN."""
    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.outputs import compare_outputs, random_outputs
    from onnx_sched.bench.split_executor import SplitExecutor, iter_parts

    _check_runnable(imported)
    placements = np.atleast_2d(placements)
    required = len(placements) if required is None else max(1, int(required))
    specs = _pinned_specs(device_names)
    outputs = [o.name for o in imported.model.graph.output]
    feed = import_feed(imported, seed)
    tol = _tolerance(imported.model, specs)
    unchecked = random_outputs(imported.model)
    kept: list[tuple[int, Any]] = []
    run_seconds, setup_seconds = 0.0, 0.0  # one run of every kept row; the slowest setup + check run
    times = np.full((len(placements), repeats), np.nan)
    try:
        reference = None
        for k, p in enumerate(placements):
            if k >= required and deadline is not None and \
                    deadline.left() < setup_seconds + (warmup + repeats) * run_seconds * (len(kept) + 1) / len(kept):
                break  # another row would end the run after the deadline
            t0 = time.perf_counter()
            ready = _take_ready(imported, device_names, p, seed)  # built and run by run_cost: not again
            if ready is not None:
                kept.append((k, ready.executor))
                out, run_seconds = ready.outputs, run_seconds + ready.run_s
                setup_seconds = max(setup_seconds, ready.build_s)
            else:
                ex = SplitExecutor(iter_parts(imported, p), specs, outputs)
                kept.append((k, ex))
                t1 = time.perf_counter()
                out = ex.run(feed)
                run_seconds += time.perf_counter() - t1
                setup_seconds = max(setup_seconds, time.perf_counter() - t0)
            if reference is None:
                reference = out
                continue
            ok, err = compare_outputs(reference, out, tol, unchecked)
            if not ok:
                raise ValueError(f"measured target: a placement's outputs differ from the reference (max abs {err:.3g})")
        if deadline is not None:  # runs too slow for every round: fewer warm-ups, then fewer repeats (>= MIN)
            rounds = int(deadline.left() // max(run_seconds, 1e-9))
            warmup = min(warmup, max(0, rounds - MIN_REPEATS))
            repeats = max(min(repeats, MIN_REPEATS), min(repeats, rounds - warmup))
        for r in range(warmup + repeats):
            for k, ex in kept:
                t0 = time.perf_counter()
                ex.run(feed)
                if r >= warmup:
                    times[k, r - warmup] = time.perf_counter() - t0
    finally:
        for _, ex in kept:
            ex.close()
    return times


@dataclass(frozen=True)
class RunCost:
    """What one placement costs in :func:`interleaved_seconds`, on the slowest of the devices: building its split
    executor with its checked first run (``setup_s``; a torch device's includes converting the parts), then each
    further run (``run_s``); and what starting the torch devices took once (``start_s``: importing torch, CUDA's
    context and libraries), already paid."""

    setup_s: float
    run_s: float
    start_s: float = 0.0


class _Ready(NamedTuple):
    """A single-device executor :func:`run_cost` built and ran, open for the measuring run to take over."""

    executor: Any
    build_s: float  # building it with its first (checked) run
    run_s: float  # its second run
    outputs: dict[str, Any]  # of its first run, on the seeded feed


_COSTS: weakref.WeakKeyDictionary[Any, dict[tuple[tuple[str, ...], int], RunCost]] = weakref.WeakKeyDictionary()
_READY: dict[str, Any] = {}  # the import run_cost last timed, and its _Ready executors by (devices, placement, seed)


def run_cost(imported: Any, device_names: Sequence[str], seed: int = 0, keep: Sequence[int] | None = None) -> RunCost:
    """The :class:`RunCost` of the whole model on each device, timed once per import and devices (the first call
    also checks that ONNX Runtime loads the model: bad input is a ``ValueError`` here, before any search).  The
    single-device executors of the devices in ``keep`` (default: all) stay open for the run that times those
    placements (:func:`interleaved_seconds` takes them over), so they are not built twice; the others are closed at
    once.  A device other than the first that cannot run the whole model (too little memory, an op its runtime
    lacks) is left out of the estimate: a split may still run there."""
    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.split_executor import SplitExecutor, iter_parts

    key = (tuple(device_names), int(seed))
    known = _COSTS.setdefault(_check_runnable(imported), {})
    if key not in known:
        if _READY.get("source") is not imported:
            release()
            _READY.update(source=imported, executors={})
        feed, outputs, setup, run = import_feed(imported, seed), [o.name for o in imported.model.graph.output], 0.0, 0.0
        t0 = time.perf_counter()
        _start_torch_devices(device_names)
        start = time.perf_counter() - t0
        for d in range(len(device_names)):
            single = np.full(imported.graph.n_ops, d, np.int64)
            t0, ex = time.perf_counter(), None
            try:
                ex = SplitExecutor(iter_parts(imported, single), _pinned_specs(device_names), outputs)
                first = ex.run(feed)
                t1 = time.perf_counter()
                ex.run(feed)
                t2 = time.perf_counter()
            except Exception as exc:  # noqa: BLE001 - the first device is the reference: it must run; others may not
                if ex is not None:
                    ex.close()
                if d == 0:
                    raise ValueError(f"the model does not run on {device_names[0]} with seeded inputs (so its "
                                     f"placements cannot be timed): {first_line(exc)}") from exc
                continue
            setup, run = max(setup, t1 - t0), max(run, t2 - t1)
            if keep is None or d in keep:
                _READY["executors"][(tuple(device_names), single.tobytes(), int(seed))] = _Ready(ex, t1 - t0, t2 - t1,
                                                                                                 first)
            else:
                ex.close()
        known[key] = RunCost(setup_s=setup, run_s=run, start_s=start)
    return known[key]


def measuring_seconds(imported: Any, device_names: Sequence[str], rows: int, singles: int = 1, repeats: int = 10,
                      warmup: int = 2, seed: int = 0, keep: Sequence[int] | None = None) -> float:
    """About how long :func:`memo_speedups` takes for ``rows`` placements beside ``singles`` single-device ones (the
    reference among them), from :func:`run_cost` (``keep``: the devices whose single-device executors a run will
    take over), whose executors the single-device placements reuse: what a pass or a caller holds back from its
    search when it must measure.  Costs are the slowest device's."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"--option repeats={repeats}: a measured target needs at least 1 timed run per placement")
    cost = run_cost(imported, device_names, seed, keep=keep)
    return rows * cost.setup_s + (rows + singles) * (warmup + repeats) * cost.run_s


def measured_target_seconds(ctx: Any, device_names: Sequence[str], rows: int, singles: int = 1,
                            keep: Sequence[int] | None = None) -> float:
    """:func:`measuring_seconds` for a pass context (its model, ``repeats`` option and seed): 0 unless its
    ``--target`` is ``measured``, and on the warm-up instance, which runs nothing."""
    if str(ctx.option("target", "proxy")) != "measured" or ctx.options.get("warm_up"):
        return 0.0
    return measuring_seconds(ctx.source, device_names, rows=rows, singles=singles,
                             repeats=int(ctx.option("repeats", 10)), seed=ctx.seed, keep=keep)


def _start_torch_devices(device_names: Sequence[str]) -> None:
    from onnx_sched.bench.runtimes.torch_parts import start_device, torch_device
    from onnx_sched.bench.split_executor import check_devices

    check_devices(_pinned_specs(device_names))  # one line for a device this machine cannot run
    for name in device_names:
        if torch_device(name):
            start_device(torch_device(name))


def _take_ready(imported: Any, device_names: Sequence[str], placement: np.ndarray, seed: int) -> _Ready | None:
    """What :func:`run_cost` built and ran for this placement and feed, handed over (``None`` when nothing)."""
    if _READY.get("source") is not imported:
        return None
    return _READY["executors"].pop((tuple(device_names), np.asarray(placement, np.int64).tobytes(), int(seed)), None)


def release() -> None:
    """A caller done measuring: close the executors :func:`run_cost` built that no run took over, and forget the
    model's measurements (they hold the model)."""
    for ready in _READY.get("executors", {}).values():
        ready.executor.close()
    _READY.clear()
    _MEMO.clear()


_MEMO: dict[str, Any] = {}  # the setting measured last, and its speedups by placement


def memo_speedups(imported: Any, reference: np.ndarray, placements: np.ndarray, device_names: Sequence[str],
                  repeats: int = 10, seed: int = 0, deadline: Any = None, required: int | None = None) -> np.ndarray:
    """:func:`speedups_over`, remembering each placement's speedup for this model, reference and setting (one
    model at a time), so a placement is timed once however often it is asked for: the placements not known yet are
    timed in one run, in the order of their first rows.  With a ``deadline`` the new ones among the first
    ``required`` rows (default: all) are always timed, the others while the run ends in time (NaN otherwise)."""
    placements = np.atleast_2d(np.asarray(placements, np.int64))
    reference = np.asarray(reference, np.int64)
    setting = (tuple(device_names), reference.tobytes(), int(repeats), int(seed))
    if _MEMO.get("source") is not imported or _MEMO.get("setting") != setting:
        _MEMO.clear()
        _MEMO.update(source=imported, setting=setting, speedups={reference.tobytes(): 1.0})  # the reference itself
    known: dict[bytes, float] = _MEMO["speedups"]
    keys = [p.tobytes() for p in placements]
    new = list(dict.fromkeys(k for k in keys if k not in known))
    if new:
        rows = {k: i for i, k in reversed(list(enumerate(keys)))}  # first row of each placement
        must = len({k for k in keys[:len(keys) if required is None else required] if k in new})
        got = speedups_over(imported, reference, placements[[rows[k] for k in new]], device_names, repeats,
                            seed=seed, deadline=deadline, required=None if deadline is None else max(must, 1))
        known.update((k, float(v)) for k, v in zip(new, got) if np.isfinite(v))
    return np.array([known.get(k, np.nan) for k in keys], dtype=float)


def _check_runnable(imported: Any) -> Any:
    """``imported`` when the split executor can run it (an ONNX model ONNX Runtime loads), else a ``ValueError``."""
    import onnx

    if imported is None or not isinstance(getattr(imported, "model", None), onnx.ModelProto):
        raise ValueError("a measured target runs the model in ONNX Runtime's split executor: give an ONNX model "
                         "(not a synthetic graph; an OpenVINO IR's placements are timed by `bench-placement "
                         "--runtime openvino`)")
    _check_loads(imported)
    return imported


def _pinned_specs(device_names: Sequence[str]) -> list[Any]:
    """One single-threaded device per name, device ``i`` pinned to core ``i mod cores``."""
    from onnx_sched.bench.split_executor import device_spec

    ncpu = os.cpu_count() or 1
    return [device_spec(name, threads=1, cores=(i % ncpu,)) for i, name in enumerate(device_names)]


def _tolerance(model: Any, devices: Sequence[Any]) -> float:
    """``rtol = atol`` between two placements' outputs: the model's own (:func:`output_tolerance`), loosened to the
    torch tolerance when a device is a torch device, and to the CUDA one for an ONNX Runtime GPU provider (their
    kernels are not ONNX Runtime's CPU ones: ``DeviceSpec.kernels``).

    >>> from onnx import helper
    >>> from onnx_sched.bench.split_executor import device_spec
    >>> model = helper.make_model(helper.make_graph([], "g", [], []))
    >>> [_tolerance(model, [device_spec("CPU"), device_spec(d)])
    ...  for d in ("CPUB", "cuda:0", "torch:cpu", "CUDAExecutionProvider")]
    [1e-05, 0.001, 0.0001, 0.001]
    """
    from onnx_sched.bench.outputs import output_tolerance
    from onnx_sched.bench.runtimes.torch_parts import TOLERANCE

    return max([output_tolerance(model), *(max(TOLERANCE[d.kernels]) for d in devices if d.kernels in TOLERANCE)])


_LOADS: weakref.WeakSet[Any] = weakref.WeakSet()  # imports ONNX Runtime has loaded once


def _check_loads(imported: Any) -> None:
    """One line (``ModelLoadError``) if ONNX Runtime cannot load the whole model, before it is split: a model ORT
    rejects is bad input; a part ORT rejects would be a bug of the split.  Once per import: the latency
    objective's measured target times several placements of one model, each through here."""
    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.ort_session import import_session

    if imported in _LOADS:
        return
    import_session(imported, make_session_options(arena=False, opt_level="none", threads=1), ["CPUExecutionProvider"])
    _LOADS.add(imported)


def speedups_over(imported: Any, reference: np.ndarray, placements: np.ndarray, device_names: Sequence[str],
                  repeats: int = 10, seed: int = 0, deadline: Any = None, required: int | None = None) -> np.ndarray:
    """``median reference seconds / median seconds`` of each placement, all interleaved in one run; with a
    ``deadline``, placements after the first ``required`` only while they fit (NaN for the others)."""
    rows = np.vstack([reference, placements])
    times = interleaved_seconds(imported, rows, device_names, repeats, seed=seed, deadline=deadline,
                                required=None if required is None else 1 + required)
    timed = ~np.isnan(times).all(axis=1)
    seconds = np.full(len(rows), np.nan)
    seconds[timed] = np.nanmedian(times[timed], axis=1)  # a deadline may have cut the rounds: NaN columns
    return seconds[0] / seconds[1:]
