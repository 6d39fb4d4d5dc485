"""The ``measured`` target: candidate schedules run for real by the ONNX Runtime split executor.

Each distinct placement among the candidates is timed with
:func:`~onnx_sched.bench.runtimes.placement_timing.speedups_over` (one
pinned core per device, interleaved runs, outputs checked) beside the
reference, the whole model on device 0 alone; a candidate's target speedup is
``median reference seconds / median candidate seconds``.

What is measured is the placement: inside each part ONNX Runtime runs nodes
in its own order, as a deployed model would.  Candidates that share a placement
share a measurement.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, lanes_of
from onnx_sched.passes import PassContext

__all__ = ["measured_speedups"]


def measured_speedups(problem: ms.MakespanProblem, chains: Chains, ctx: PassContext, repeats: int = 10) -> np.ndarray:
    """``single-device seconds / placed seconds`` of each chain schedule, measured (see module docstring)."""
    from onnx_sched.bench.runtimes.placement_timing import speedups_over

    units = lanes_of(problem).unit[chains.lane]
    distinct, which = np.unique(units, axis=0, return_inverse=True)
    single = np.zeros(problem.n_ops, np.int64)
    speedups = speedups_over(ctx.source, single, distinct, problem.device_names, repeats, seed=ctx.seed)
    return speedups[np.asarray(which).reshape(-1)]
