"""Helpers shared by the peak-memory ordering passes.

Every peak-memory pass ends the same way: check the order, score it with the one
memory model of :mod:`onnx_sched.cost.memory` (honouring ``ctx.inplace``) and wrap
it in a :class:`~onnx_sched.schedule.Schedule` whose ``info`` says the method,
the peak and the memory model.  Keeping that in one place means every pass
reports its peak the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from onnx_sched.cost.memory import peak_memory
from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.dag import check_order
from onnx_sched.graph import Graph
from onnx_sched.schedule import Schedule

__all__ = ["make_schedule", "peak_of"]


def peak_of(graph: Graph, order: Sequence[int] | np.ndarray, inplace: bool) -> int:
    """Peak bytes of ``order`` under the memory model (``inplace`` chooses ORT-style reuse)."""
    return int(peak_memory(graph, np.asarray(order, dtype=np.int64), inplace=inplace))


def make_schedule(
    graph: Graph,
    order: Sequence[int] | np.ndarray,
    method: str,
    inplace: bool,
    *,
    optimal: bool = False,
    bound: int | None = None,
    **info: Any,
) -> Schedule:
    """Validate ``order`` and build a Schedule with ``info["peak_bytes"]`` and the memory model.

    ``bound`` is a proven lower bound on the peak (defaults to the graph bound of
    :func:`onnx_sched.cost.memory_bound.lower_bound`).  A schedule whose peak equals the
    bound is marked optimal.
    """
    arr = check_order(graph, order)
    peak = peak_of(graph, arr, inplace)
    lb = int(lower_bound(graph, inplace)) if bound is None else int(bound)
    if lb > peak:
        raise ValueError(f"{method}: claimed lower bound {lb} exceeds the achieved peak {peak} (a bug in the pass)")
    optimal = bool(optimal or peak == lb)
    meta = {"peak_bytes": peak, "inplace": bool(inplace), "method": method, **info}
    return Schedule(order=arr, method=method, optimal=optimal, lower_bound=float(lb), info=meta)
