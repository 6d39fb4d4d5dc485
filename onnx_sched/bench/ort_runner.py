"""Run one ONNX model in ONNX Runtime and print one JSON line of measurements.

Meant to run in a *fresh* process (``python -m onnx_sched.bench.ort_runner``) so
that peak RSS reflects only this model; :mod:`onnx_sched.bench.measure` starts it
and reads its stdout.  What every runner shares (the peak-RSS window, latency
fields, the command line) is in :mod:`onnx_sched.bench.runtimes.fresh_process`.

Execution order is ``PRIORITY_BASED`` so ORT runs nodes in the order of the file
(what onnx-sched decides); ``--opt-level none`` keeps ORT from rewriting the graph
first (needed when the model already is ORT's optimized graph).

Peak memory is the RSS high-water mark during the warm-up and timed runs minus
the RSS just before the first run (after the session was created and inputs
loaded).  With ``--heap``, a second session of the same model then runs under the
heap tracker (:func:`onnx_sched.bench.heap.heap_fields`): ``heap_peak_bytes`` is
the live heap peak of one ``run`` after warm-up (arena off: the activation peak,
plus the outputs handed back and kernel scratch), ``heap_reserved_bytes`` what the
session holds at most from its first run on (arena on: what the arena reserves).

Usage::

    python -m onnx_sched.bench.ort_runner MODEL INPUTS.npz --outputs OUT.npz \
        [--repeats 10] [--warmup 2] [--arena/--no-arena] [--opt-level all] [--threads 1] [--heap]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnx_sched.bench.heap import heap_fields
from onnx_sched.bench.ort_load import ort_loads
from onnx_sched.bench.runtimes.fresh_process import PeakRssWindow, latency_fields, runner_main, runner_parser
from onnx_sched.bench.timing import time_calls

__all__ = ["OPT_LEVELS", "main", "make_session_options", "run_measurement"]


OPT_LEVELS = ("none", "basic", "extended", "all")


def make_session_options(
    *, arena: bool, opt_level: str, threads: int, profile_prefix: str | None = None, mem_pattern: bool = True
) -> Any:
    """ORT session options for a measurement: file-order execution, arena on/off,
    graph optimization level one of :data:`OPT_LEVELS`, ORT's memory pattern on/off.

    The memory pattern (ORT's default, on) makes each run allocate its
    activations as one block laid out by ORT's planner for this order; off, every
    tensor is its own allocation (what the tensor-lifetime model describes)."""
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
    so.enable_mem_pattern = mem_pattern
    so.graph_optimization_level = levels[opt_level]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 4  # fatal only: its errors come back as exceptions, reported in one line
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


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
    heap: bool = False,
    mem_pattern: bool = True,
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
    so = make_session_options(arena=arena, opt_level=opt_level, threads=threads, mem_pattern=mem_pattern)
    with ort_loads(model_path):  # the user's model: ORT refusing it is one line on stderr
        sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - t0
    missing = [i.name for i in sess.get_inputs() if i.name not in inputs]
    if missing:
        raise ValueError(f"{model_path}: no input data for {missing}")
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    out_names = [o.name for o in sess.get_outputs()]

    with PeakRssWindow() as mem, ort_loads(model_path, "run"):
        times, outputs = time_calls(lambda: sess.run(out_names, feed), warmup, repeats)
    report: dict[str, Any] = {
        "model": model_path,
        "ort_version": ort.__version__,
        "arena": arena,
        "opt_level": opt_level,
        "mem_pattern": mem_pattern,
        "threads": threads,
        "execution_order": "PRIORITY_BASED",
        "repeats": repeats,
        "warmup": warmup,
        "session_create_s": session_s,
        **mem.fields(),
        **latency_fields(times),
        "outputs": out_names,
    }
    if heap:
        # A fresh session under the heap tracker, after the timed window (the tracker slows runs down).
        del sess
        sess_h = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
        report.update(heap_fields(lambda: sess_h.run(out_names, feed), warmup))
        del sess_h
    if profile_dir:
        # One extra, separate run with ORT's profiler: which order ORT really used and
        # ORT's own per-node byte counters.  Kept out of the timed window.
        so_p = make_session_options(arena=arena, opt_level=opt_level, threads=threads, mem_pattern=mem_pattern,
                                    profile_prefix=os.path.join(profile_dir, "ort_profile"))
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
    parser = runner_parser("python -m onnx_sched.bench.ort_runner", __doc__)
    parser.add_argument("--arena", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--opt-level", choices=OPT_LEVELS, default="all")
    parser.add_argument("--profile-dir", help="also run once with ORT profiling, writing the profile here")
    parser.add_argument("--heap", action="store_true", help="also measure live heap bytes of one run (memray)")
    parser.add_argument("--mem-pattern", action=argparse.BooleanOptionalAction, default=True,
                        help="ORT's memory pattern (one planned block per run; ORT's default)")

    def measure(args: argparse.Namespace, inputs: dict[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
        return run_measurement(args.model, inputs, repeats=args.repeats, warmup=args.warmup, arena=args.arena,
                               opt_level=args.opt_level, threads=args.threads, profile_dir=args.profile_dir,
                               heap=args.heap, mem_pattern=args.mem_pattern)

    return runner_main(parser, measure, argv)


if __name__ == "__main__":
    sys.exit(main())
