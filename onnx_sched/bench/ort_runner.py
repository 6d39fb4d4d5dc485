"""Run one ONNX model in ONNX Runtime and print one JSON line of measurements.

Meant to run in a *fresh* process (``python -m onnx_sched.bench.ort_runner``) so
that peak RSS reflects only this model: memory freed by a previous model, an arena
grown by another session or Python objects of the parent never leak into the
number.  :mod:`onnx_sched.bench.measure` starts it and reads its stdout.

Execution order is ``PRIORITY_BASED`` so ORT runs nodes in the order of the file
(what onnx-sched decides); ``--opt-level none`` keeps ORT from rewriting the graph
first (needed when the model already is ORT's optimized graph).

Peak memory is the RSS high-water mark during the timed runs minus the RSS just
before the first run (after the session was created and inputs loaded).  It is
measured two ways and the larger is kept: a background thread sampling
``psutil`` RSS (ORT releases the GIL while it runs) and ``getrusage`` ``ru_maxrss``
(exact, but a lifetime maximum, so it only counts when the runs raised it).

Usage::

    python -m onnx_sched.bench.ort_runner MODEL INPUTS.npz --outputs OUT.npz \
        [--repeats 10] [--warmup 2] [--arena/--no-arena] [--opt-level all] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["OPT_LEVELS", "main", "make_session_options", "run_measurement"]


OPT_LEVELS = ("none", "basic", "extended", "all")


def make_session_options(*, arena: bool, opt_level: str, threads: int, profile_prefix: str | None = None) -> Any:
    """ORT session options for a measurement: file-order execution, arena on/off,
    graph optimization level one of :data:`OPT_LEVELS`."""
    import onnxruntime as ort

    levels = {
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    if opt_level not in levels:
        raise ValueError(f"ORT optimization level must be one of {OPT_LEVELS}, got {opt_level!r}")

    so = ort.SessionOptions()
    so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_cpu_mem_arena = arena
    so.graph_optimization_level = levels[opt_level]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _maxrss_bytes() -> int:
    # Linux reports kilobytes, macOS bytes.
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


class _PeakSampler:
    """Background thread recording the highest RSS seen while it runs."""

    def __init__(self, interval_s: float = 0.0005) -> None:
        import psutil

        self._proc = psutil.Process()
        self._interval = interval_s
        self._stop = threading.Event()
        self.peak = 0
        self.samples = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            rss = self._proc.memory_info().rss
            self.samples += 1
            if rss > self.peak:
                self.peak = rss
            self._stop.wait(self._interval)

    def __enter__(self) -> _PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_measurement(
    model_path: str,
    inputs: dict[str, np.ndarray],
    *,
    repeats: int,
    warmup: int,
    arena: bool,
    opt_level: str = "all",
    threads: int = 1,
    profile_dir: str | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Create a session, measure peak RSS delta and latency; return (report, outputs).

    The warmup runs are inside the memory window too: the first run is where
    buffers (and, with the arena on, the arena) are allocated, which is exactly
    what the order changes.
    """
    import onnxruntime as ort

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    t0 = time.perf_counter()
    so = make_session_options(arena=arena, opt_level=opt_level, threads=threads)
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - t0
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    missing = [i.name for i in sess.get_inputs() if i.name not in inputs]
    if missing:
        raise ValueError(f"{model_path}: no input data for {missing}")
    out_names = [o.name for o in sess.get_outputs()]

    rss_before = _rss()
    maxrss_before = _maxrss_bytes()
    latencies: list[float] = []
    outputs: list[Any] = []
    with _PeakSampler() as sampler:
        for i in range(warmup + repeats):
            t = time.perf_counter()
            outputs = sess.run(out_names, feed)
            dt = time.perf_counter() - t
            if i >= warmup:
                latencies.append(dt)
    maxrss_after = _maxrss_bytes()
    rss_after = _rss()
    sampled_delta = max(0, sampler.peak - rss_before)
    # ru_maxrss is a lifetime maximum: it tells about the runs only if they raised it.
    maxrss_delta = max(0, maxrss_after - rss_before) if maxrss_after > maxrss_before else 0
    lat = np.asarray(latencies, dtype=np.float64)
    report: dict[str, Any] = {
        "model": model_path,
        "ort_version": ort.__version__,
        "arena": arena,
        "opt_level": opt_level,
        "threads": threads,
        "execution_order": "PRIORITY_BASED",
        "repeats": repeats,
        "warmup": warmup,
        "session_create_s": session_s,
        "rss_before": rss_before,
        "rss_after": rss_after,
        "peak_rss_delta": max(sampled_delta, maxrss_delta),
        "peak_rss_delta_sampled": sampled_delta,
        "peak_rss_delta_maxrss": maxrss_delta,
        "rss_samples": sampler.samples,
        # measure.py sets it; without it glibc keeps freed big buffers in the heap.
        "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        "latency_s": lat.tolist(),
        "latency_median_s": float(np.median(lat)),
        "latency_p90_s": float(np.percentile(lat, 90)),
        "outputs": out_names,
    }
    if profile_dir:
        # One extra, separate run with ORT's profiler: which order ORT really used and
        # ORT's own per-node byte counters.  Kept out of the timed window.
        so_p = make_session_options(
            arena=arena, opt_level=opt_level, threads=threads, profile_prefix=os.path.join(profile_dir, "ort_profile")
        )
        sess_p = ort.InferenceSession(model_path, sess_options=so_p, providers=["CPUExecutionProvider"])
        sess_p.run(out_names, feed)
        prof = sess_p.end_profiling()
        report["ort_profile"] = _summarize_profile(prof)
    return report, dict(zip(out_names, outputs))


def _summarize_profile(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        events = json.load(fh)
    order: list[str] = []
    output_bytes = 0
    activation_bytes = 0
    for ev in events:
        name = str(ev.get("name", ""))
        if ev.get("cat") == "Node" and name.endswith("_kernel_time"):
            order.append(name[: -len("_kernel_time")])
            args = ev.get("args", {})
            output_bytes += int(args.get("output_size", 0) or 0)
            activation_bytes += int(args.get("activation_size", 0) or 0)
    return {
        "file": path,
        "executed_nodes": order,
        "sum_output_size": output_bytes,
        "sum_activation_size": activation_bytes,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnx_sched.bench.ort_runner", description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("inputs", help=".npz file with one array per graph input")
    parser.add_argument("--outputs", help="write the outputs of the last run to this .npz")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--arena", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--opt-level", choices=OPT_LEVELS, default="all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile-dir", help="also run once with ORT profiling, writing the profile here")
    args = parser.parse_args(argv)
    with np.load(args.inputs, allow_pickle=False) as data:
        inputs = {k: data[k] for k in data.files}
    report, outputs = run_measurement(
        args.model,
        inputs,
        repeats=args.repeats,
        warmup=args.warmup,
        arena=args.arena,
        opt_level=args.opt_level,
        threads=args.threads,
        profile_dir=args.profile_dir,
    )
    if args.outputs:
        np.savez(args.outputs, **{f"o{i}": outputs[n] for i, n in enumerate(report["outputs"])})
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
