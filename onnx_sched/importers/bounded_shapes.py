"""Data-dependent shapes sized at their upper bound.

Some ops' output sizes depend on the values they read: ``NonZero`` (at most one index per input
element), ``NonMaxSuppression`` (at most ``max_output_boxes_per_class`` per class), ``TopK`` with a
computed ``k``, ``Unique``, ``Compress``.  No static shape exists, but OpenVINO's shape inference
carries an interval per dimension (``[2, ..128]``) through the ops downstream.  A memory plan for
the worst case is what a planner must give for such a model, so each importer sizes these tensors
at the interval's upper end and says so (``Graph.metadata["upper_bound_tensors"]``); a dimension
with no finite bound still makes the size unknown.
"""

from __future__ import annotations

from typing import Any

__all__ = ["upper_bound_shape"]


def upper_bound_shape(partial_shape: Any) -> tuple[int, ...] | None:
    """The largest shape an OpenVINO ``PartialShape`` allows; ``None`` for a dynamic rank or a
    dimension without a finite upper bound.

    >>> import openvino as ov
    >>> upper_bound_shape(ov.PartialShape([ov.Dimension(2), ov.Dimension(0, 128)]))
    (2, 128)
    >>> upper_bound_shape(ov.PartialShape([ov.Dimension(2), ov.Dimension()])) is None
    True
    """
    if partial_shape.rank.is_dynamic:
        return None
    dims = []
    for d in partial_shape:
        hi = d.get_length() if d.is_static else d.get_max_length()
        if hi < 0:
            return None
        dims.append(int(hi))
    return tuple(dims)
