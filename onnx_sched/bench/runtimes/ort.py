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

from onnx_sched.bench.outputs import compare_outputs, output_tolerance, outputs_informative
from onnx_sched.bench.timing import summarize, time_calls
from onnx_sched.importers.onnx_weights import with_weights

__all__ = ["bench_ort", "bench_ort_interleaved"]


def bench_ort(imported: Any, placement: np.ndarray, devices: Sequence[Any], *, warmup: int = 2, repeats: int = 10,
              concurrent: bool = True, seed: int = 0, opt_level: str = "all",
              reference: bool = True) -> dict[str, Any]:
    """Split-executor run of ``placement`` on ``devices`` (:class:`DeviceSpec` list: ORT or torch);
    the reference is the whole model in one ORT session on ``devices[0]``'s provider and cores."""
    import onnxruntime as ort

    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.split_executor import SplitExecutor, check_devices, split_model

    check_devices(devices)
    feed = import_feed(imported, seed)
    outputs = [o.name for o in imported.model.graph.output]
    parts = split_model(imported, placement)
    report: dict[str, Any] = {"runtime": "ort", "devices": [d.name for d in devices], "sub_models": len(parts),
                              "concurrent": concurrent}
    torch_devices = [d.torch_device for d in devices if getattr(d, "torch_device", "")]
    if torch_devices:
        report["torch_devices"] = torch_devices
    gpu_kinds = [d.kernels for d in devices if d.kernels]  # devices whose kernels are not ORT's CPU ones
    ref_out = None
    if reference:
        spec = devices[0]
        so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
        sess = ort.InferenceSession(with_weights(imported).SerializeToString(), so, providers=spec.providers)

        def run_ref() -> dict[str, np.ndarray]:
            return dict(zip(outputs, sess.run(outputs, feed)))

        if spec.cores and hasattr(os, "sched_setaffinity"):
            from onnx_sched.bench.split_executor import _Worker

            # run the reference on a worker pinned like device 0
            w = _Worker(spec.cores)
            w.start()
            box: dict[str, Any] = {}
            import threading

            ev = threading.Event()

            def job() -> None:
                box["r"] = time_calls(run_ref, warmup, repeats)
                ev.set()

            w.jobs.put(job)
            ev.wait()
            w.jobs.put(None)
            ref_times, ref_out = box["r"]
        else:
            ref_times, ref_out = time_calls(run_ref, warmup, repeats)
        report["single_device"] = summarize(ref_times)
    with SplitExecutor(parts, devices, outputs, concurrent=concurrent, opt_level=opt_level) as ex:
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


def bench_ort_interleaved(imported: Any, placement: np.ndarray, devices: Sequence[Any], *, warmup: int = 3,
                          repeats: int = 20, seed: int = 0, opt_level: str = "all") -> dict[str, Any]:
    """One whole-model session on ``devices[0]`` versus the concurrent split executor,
    runs interleaved (single, split, single, split ...) so load drift on a shared
    machine hits both alike.  Reports medians, p90s, ``speedup`` = median single /
    median split and ``split_faster_share`` = share of the interleaved pairs where the
    split run was the faster one (a paired comparison: 0.5 = no difference)."""
    import threading

    import onnxruntime as ort

    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.split_executor import SplitExecutor, _Worker, check_devices, split_model

    check_devices(devices)
    feed = import_feed(imported, seed)
    outputs = [o.name for o in imported.model.graph.output]
    parts = split_model(imported, placement)
    spec = devices[0]
    so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
    sess = ort.InferenceSession(with_weights(imported).SerializeToString(), so, providers=spec.providers)
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
        with SplitExecutor(parts, devices, outputs, concurrent=True, opt_level=opt_level) as ex:
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
    return {"sub_models": len(parts), "single_device": a, "split": b, "speedup": a["median_s"] / b["median_s"],
            "split_faster_share": faster,
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
