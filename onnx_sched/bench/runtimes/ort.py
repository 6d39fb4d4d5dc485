"""ONNX Runtime bench of a placement: the split executor against one whole-model session.

:func:`bench_ort` runs the model cut at device boundaries by
:class:`~onnx_sched.bench.split_executor.SplitExecutor` (one session per part,
one worker thread per device, concurrent unless ``concurrent=False``) and, as the
reference, the whole model in one session on the first device.
:func:`bench_ort_interleaved` alternates the two runs, so load drift on a shared
machine hits both alike.

A device whose :class:`~onnx_sched.bench.split_executor.DeviceSpec` names a
``torch_device`` (``cuda:N``, ``torch:cpu``) runs its parts through PyTorch
(:mod:`onnx_sched.bench.runtimes.torch_parts`); the reference is then still one
ONNX Runtime CPU session, and outputs are compared within that module's
:data:`~onnx_sched.bench.runtimes.torch_parts.TOLERANCE` instead of 1e-5.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnx_sched.bench.outputs import compare_outputs, output_tolerance, outputs_informative, random_outputs
from onnx_sched.bench.timing import summarize, time_calls

__all__ = ["bench_ort", "bench_ort_interleaved"]


def bench_ort(imported: Any, placement: np.ndarray, devices: Sequence[Any], *, warmup: int = 2, repeats: int = 10,
              concurrent: bool = True, seed: int = 0, opt_level: str = "all",
              reference: bool = True) -> dict[str, Any]:
    """Split-executor run of ``placement`` on ``devices`` (:class:`DeviceSpec` list: ORT or torch);
    the reference is the whole model in one ORT session on ``devices[0]``'s provider and cores."""
    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.split_executor import SplitExecutor, check_devices, iter_parts

    check_devices(devices)
    feed = import_feed(imported, seed)
    outputs = [o.name for o in imported.model.graph.output]
    report: dict[str, Any] = {"runtime": "ort", "devices": [d.name for d in devices], "concurrent": concurrent}
    torch_devices = [d.torch_device for d in devices if getattr(d, "torch_device", "")]
    if torch_devices:
        report["torch_devices"] = torch_devices
    gpu_kinds = [d.kernels for d in devices if d.kernels]  # devices whose kernels are not ORT's CPU ones
    ref_out = None
    if reference:
        ref_times, ref_out = _time_reference(imported, devices[0], feed, outputs, warmup, repeats, opt_level)
        report["single_device"] = summarize(ref_times)
    # the parts are built after the reference session is gone, and only the executor holds them
    with SplitExecutor(iter_parts(imported, placement), devices, outputs, concurrent=concurrent,
                       opt_level=opt_level) as ex:
        report["sub_models"] = ex.n_parts
        per_dev: list[dict[str, float]] = []

        def run_split() -> dict[str, np.ndarray]:
            out = ex.run(feed)
            per_dev.append(dict(ex.last_device_seconds))
            return out

        times, out = time_calls(run_split, warmup, repeats)
    per_dev = per_dev[warmup:]
    report["split"] = summarize(times)
    report["device_seconds"] = {k: float(np.median([d.get(k, 0.0) for d in per_dev])) for k in per_dev[0]}
    if ref_out is not None:
        unchecked = random_outputs(imported.model)
        if unchecked:
            report["unchecked_outputs"] = sorted(unchecked)
            ref_out = {k: v for k, v in ref_out.items() if k not in unchecked}  # for outputs_close and the check below
        ok, err = compare_outputs(ref_out, out, output_tolerance(imported.model))
        if gpu_kinds:  # other kernels than ORT's CPU ones: the torch / CUDA tolerance
            from onnx_sched.bench.runtimes.torch_parts import outputs_close, tolerance

            rtol, atol = tolerance(gpu_kinds)
            ok = outputs_close(ref_out, out, rtol, atol)
            report["tolerance"] = {"rtol": rtol, "atol": atol}
        report["outputs_equal"] = ok
        report["max_abs_error"] = err
        report["outputs_informative"] = outputs_informative(ref_out)
    return report


def _time_reference(imported: Any, spec: Any, feed: dict[str, np.ndarray], outputs: list[str], warmup: int,
                    repeats: int, opt_level: str) -> tuple[list[float], dict[str, np.ndarray]]:
    """``(run seconds, outputs)`` of the whole model in one session on ``spec``'s provider, pinned to its cores like
    device 0; the session is gone when this returns, before the split executor builds its own."""
    import threading

    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.ort_session import import_session
    from onnx_sched.bench.split_executor import _Worker

    so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
    sess = import_session(imported, so, spec.providers)

    def run_ref() -> dict[str, np.ndarray]:
        return dict(zip(outputs, sess.run(outputs, feed)))

    if not (spec.cores and hasattr(os, "sched_setaffinity")):
        return time_calls(run_ref, warmup, repeats)
    worker = _Worker(spec.cores)
    worker.start()
    box: dict[str, Any] = {}
    done = threading.Event()

    def job() -> None:
        box["r"] = time_calls(run_ref, warmup, repeats)
        done.set()

    worker.jobs.put(job)
    done.wait()
    worker.jobs.put(None)
    return box["r"]


def bench_ort_interleaved(imported: Any, placement: np.ndarray, devices: Sequence[Any], *, warmup: int = 3,
                          repeats: int = 20, seed: int = 0, opt_level: str = "all") -> dict[str, Any]:
    """One whole-model session on ``devices[0]`` versus the concurrent split executor,
    runs interleaved (single, split, single, split ...) so load drift on a shared
    machine hits both alike.  Reports medians, p90s, ``speedup`` = median single /
    median split and ``split_faster_share`` = share of the interleaved pairs where the
    split run was the faster one (a paired comparison: 0.5 = no difference)."""
    import threading

    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.ort_session import import_session
    from onnx_sched.bench.split_executor import SplitExecutor, _Worker, check_devices, iter_parts

    check_devices(devices)
    feed = import_feed(imported, seed)
    outputs = [o.name for o in imported.model.graph.output]
    spec = devices[0]
    so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
    sess = import_session(imported, so, spec.providers)
    worker = _Worker(spec.cores)
    worker.start()

    def run_single() -> float:
        box: dict[str, float] = {}
        done = threading.Event()

        def job() -> None:
            t0 = time.perf_counter()
            box["out"] = sess.run(outputs, feed)
            box["t"] = time.perf_counter() - t0
            done.set()

        worker.jobs.put(job)
        done.wait()
        return box["t"]

    single, split = [], []
    try:
        with SplitExecutor(iter_parts(imported, placement), devices, outputs, concurrent=True,
                           opt_level=opt_level) as ex:
            n_parts = ex.n_parts
            for i in range(warmup + repeats):
                ts = run_single()
                t0 = time.perf_counter()
                ex.run(feed)
                tp = time.perf_counter() - t0
                if i >= warmup:
                    single.append(ts)
                    split.append(tp)
    finally:
        worker.jobs.put(None)
    a, b = summarize(single), summarize(split)
    faster = float(np.mean(np.asarray(split) < np.asarray(single)))
    return {"sub_models": n_parts, "single_device": a, "split": b, "speedup": a["median_s"] / b["median_s"],
            "split_faster_share": faster,
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
