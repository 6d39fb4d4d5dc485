"""What a pass returns: an op order, optionally a device per op and start times.

A :class:`Schedule` says nothing about how it was scored; reports pair it with a
cost computed by :mod:`onnx_sched.cost`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Schedule"]


@dataclass(frozen=True, eq=False)
class Schedule:
    """An op order over a :class:`~onnx_sched.graph.Graph`.

    ``order``: op ids in execution order.  ``placement``: device index per op id
    (``None`` = single device).  ``start``: start time per op id for time
    objectives.  ``lower_bound``: a bound on the objective the pass proved, if any;
    ``optimal``: the pass proved this schedule optimal for its objective.
    ``steps``: when ops on several devices exchange tensors, every step in execution
    order, transfers included (:class:`onnx_sched.cost.device_memory.Step`); ``order``
    is then the op steps alone.
    """

    order: np.ndarray
    method: str
    placement: np.ndarray | None = None
    start: np.ndarray | None = None
    optimal: bool = False
    lower_bound: float | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    steps: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        order = np.ascontiguousarray(np.asarray(self.order, dtype=np.int64))
        order.setflags(write=False)
        object.__setattr__(self, "order", order)
        if self.placement is not None:
            placement = np.asarray(self.placement, dtype=np.int64)
            if len(placement) != len(order):
                raise ValueError(f"placement has {len(placement)} entries for {len(order)} ops")
            object.__setattr__(self, "placement", placement)

    def with_(self, **changes: Any) -> Schedule:
        """A copy with some fields replaced."""
        from dataclasses import replace

        return replace(self, **changes)
