"""The ``measured`` target: candidate schedules run for real by the ONNX Runtime split executor.

Each distinct placement among the candidates is cut into per-device parts and
run by :class:`~onnx_sched.bench.split_executor.SplitExecutor`, one worker
thread per device, concurrently, each device pinned to its own CPU core
(device ``i`` of the problem on core ``i mod cores``), so on this machine two
pinned cores are a real two-device target.  The reference is the whole model
on device 0 alone.  Runs are interleaved (reference, candidate 1, candidate 2,
..., reference, ...) so load drift hits all alike; a candidate's target speedup
is ``median reference seconds / median candidate seconds``.  Outputs of every
placement are checked against the reference (``ValueError`` if they differ).

What is measured is the placement: inside each part ONNX Runtime runs nodes
in its own order, as a deployed model would.  Candidates that share a placement
share a measurement.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, lanes_of
from onnx_sched.passes import PassContext

__all__ = ["measured_speedups", "measured_seconds"]


def measured_seconds(imported: Any, placements: np.ndarray, device_names: tuple[str, ...], repeats: int = 10,
                     warmup: int = 2, seed: int = 0) -> np.ndarray:
    """Median seconds of each placement (rows of ``placements``; unit index per graph op), interleaved."""
    from onnx_sched.bench.outputs import compare_outputs
    from onnx_sched.bench.split_executor import SplitExecutor, device_spec, random_feed, split_model

    ncpu = os.cpu_count() or 1
    specs = [device_spec(name, threads=1, cores=(i % ncpu,)) for i, name in enumerate(device_names)]
    outputs = [o.name for o in imported.model.graph.output]
    feed = random_feed(imported.model, seed)
    executors = [SplitExecutor(split_model(imported, p), specs, outputs) for p in placements]
    times = np.zeros((len(executors), repeats))
    try:
        reference = executors[0].run(feed)
        for ex in executors[1:]:
            ok, err = compare_outputs(reference, ex.run(feed))
            if not ok:
                raise ValueError(f"measured target: a placement's outputs differ from the reference (max abs {err:.3g})")
        for r in range(warmup + repeats):
            for k, ex in enumerate(executors):
                t0 = time.perf_counter()
                ex.run(feed)
                if r >= warmup:
                    times[k, r - warmup] = time.perf_counter() - t0
    finally:
        for ex in executors:
            ex.close()
    return np.median(times, axis=1)


def measured_speedups(problem: ms.MakespanProblem, chains: Chains, ctx: PassContext, repeats: int = 10) -> np.ndarray:
    """``single-device seconds / placed seconds`` of each chain schedule, measured (see module docstring)."""
    if ctx.source is None or not hasattr(ctx.source, "model"):
        raise ValueError("--target measured runs the model: give an ONNX model file (not a synthetic graph)")
    units = lanes_of(problem).unit[chains.lane]
    distinct, which = np.unique(units, axis=0, return_inverse=True)
    single = np.zeros((1, problem.n_ops), np.int64)
    seconds = measured_seconds(ctx.source, np.vstack([single, distinct]), problem.device_names, repeats,
                               seed=ctx.seed)
    return seconds[0] / seconds[1:][np.asarray(which).reshape(-1)]
