"""The ``measured`` target: candidate schedules run for real by the ONNX Runtime split executor.

Each distinct placement among the candidates is timed with
:func:`~onnx_sched.bench.runtimes.placement_timing.speedups_over` (one
pinned core per device, interleaved runs, outputs checked) beside the
reference, the whole model on device 0 alone; a candidate's target speedup is
``median reference seconds / median candidate seconds``.

What is measured is the placement: inside each part ONNX Runtime runs nodes
in its own order, as a deployed model would.  Candidates that share a placement
share a measurement, and so do the pass and the objective's report after it
(:func:`~onnx_sched.bench.runtimes.placement_timing.memo_speedups`).  Within a time limit the proxy-best candidate and the references are
always measured, the other candidates in proxy order while the runs still end in time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, lanes_of
from onnx_sched.passes import PassContext

__all__ = ["measured_speedups"]


def measured_speedups(problem: ms.MakespanProblem, chains: Chains, ctx: PassContext, repeats: int = 10,
                      deadline: Any = None, first: Sequence[int] = ()) -> np.ndarray:
    """``single-device seconds / placed seconds`` of each chain schedule, measured (see module docstring).

    With a ``deadline``, the placements of the chains ``first`` are always measured, the others in chain order
    while the run still ends in time; chains left unmeasured get NaN."""
    from onnx_sched.bench.runtimes.placement_timing import memo_speedups

    units = lanes_of(problem).unit[chains.lane]
    distinct, which = np.unique(units, axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    priority, required = list(range(len(distinct))), None
    if deadline is not None:  # distinct placements of ``first``, then the others in chain order
        priority = list(dict.fromkeys([*(int(which[c]) for c in first), *(int(w) for w in which)]))
        required = len({int(which[c]) for c in first})
    single = np.zeros(problem.n_ops, np.int64)
    measured = memo_speedups(ctx.source, single, distinct[priority], problem.device_names, repeats, seed=ctx.seed,
                             deadline=deadline, required=required)
    speedups = np.empty(len(distinct))
    speedups[priority] = measured
    return speedups[which]
