"""What the memory model predicts for a model file as it stands, for ``bench`` to check.

``onnx-sched bench`` measures the live heap of a real run; this is the number it
is compared to: the peak of the tensor-lifetime model (:mod:`onnx_sched.cost.memory`)
over the model's *file order*, with the caller-owned graph inputs (live the whole
run, allocated before it) separated out, because the runner's heap window does
not see them.  Both memory models are given: plain, and with in-place reuse of a
dying same-sized input (``inplace``), so the report shows which one the runtime
follows.

The prediction is for the graph in the file.  It is the graph ONNX Runtime runs
only when ORT's graph optimizations are off for it (a model saved by
``optimize --ort-graph``, which bench runs that way); otherwise ORT first rewrites
the graph, and the prediction is approximate (:attr:`PredictedPeak.graph_is_run`).

Example:
    >>> p = predict_file_order("out.onnx")            # doctest: +SKIP
    >>> p.activation_bytes, p.inputs_bytes            # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from onnx_sched.bench.heap import downsample_max

__all__ = ["AGREEMENT_TOLERANCE", "PredictedPeak", "SavingComparison", "compare_savings", "predict_file_order"]

#: Measured and predicted savings agree when they differ by at most this share of the predicted one.
AGREEMENT_TOLERANCE = 0.05


@dataclass(frozen=True)
class PredictedPeak:
    """The memory model's peak over a model's file order (bytes)."""

    peak_bytes: int  # inputs included (the model's own peak)
    inputs_bytes: int  # caller-owned graph inputs, live all run
    peak_bytes_inplace: int  # with in-place reuse of dying inputs
    ops: int
    graph_is_run: bool  # the runtime runs this very graph (ORT optimizations off)
    curve: tuple[int, ...]  # activation bytes over the steps (inputs excluded), plain model, downsampled

    @property
    def activation_bytes(self) -> int:
        """Peak minus the caller-owned inputs: what a heap window around one run can see."""
        return self.peak_bytes - self.inputs_bytes

    @property
    def activation_bytes_inplace(self) -> int:
        return self.peak_bytes_inplace - self.inputs_bytes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["curve"] = list(self.curve)
        d["activation_bytes"] = self.activation_bytes
        d["activation_bytes_inplace"] = self.activation_bytes_inplace
        return d


def predict_file_order(
    path: str | os.PathLike[str], dims: Mapping[str, int] | None = None, *, graph_is_run: bool = True
) -> PredictedPeak:
    """Import ``path`` (ONNX) and profile its file order under both memory models.

    Raises the importer's one-line errors (:class:`~onnx_sched.errors.ModelLoadError`, ...).
    """
    from onnx_sched.cost.memory import profile
    from onnx_sched.importers.onnx import import_onnx

    graph = import_onnx(path, dims=dict(dims or {}), check=False, weights_in_file=True).graph
    order = np.arange(graph.n_ops, dtype=np.int64)
    plain = profile(graph, order)
    inplace = profile(graph, order, inplace=True)
    return PredictedPeak(
        peak_bytes=plain.peak,
        inputs_bytes=plain.base,
        peak_bytes_inplace=inplace.peak,
        ops=graph.n_ops,
        graph_is_run=graph_is_run,
        curve=downsample_max(plain.step - plain.base),
    )


@dataclass(frozen=True)
class SavingComparison:
    """IN's peak minus OUT's, predicted (activation bytes) and measured (heap peak bytes)."""

    predicted_bytes: int
    predicted_bytes_inplace: int
    measured_bytes: int
    predicted_share: float  # predicted saving / IN's predicted activation peak

    @property
    def error(self) -> float:
        """|measured - predicted| / |predicted| (0 when both are 0, inf when only the prediction is)."""
        if self.predicted_bytes == 0:
            return 0.0 if self.measured_bytes == 0 else float("inf")
        return abs(self.measured_bytes - self.predicted_bytes) / abs(self.predicted_bytes)

    @property
    def agrees(self) -> bool:
        """Within :data:`AGREEMENT_TOLERANCE` of the prediction."""
        return self.error <= AGREEMENT_TOLERANCE

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error": self.error, "agrees": self.agrees, "tolerance": AGREEMENT_TOLERANCE}


def compare_savings(pred_in: PredictedPeak, pred_out: PredictedPeak, heap_in: int, heap_out: int) -> SavingComparison:
    """How far the measured heap saving of OUT over IN is from the predicted one.

    >>> a = PredictedPeak(1100, 100, 1100, 3, True, ())
    >>> b = PredictedPeak(700, 100, 700, 3, True, ())
    >>> c = compare_savings(a, b, heap_in=1010, heap_out=615)
    >>> c.predicted_bytes, c.measured_bytes, round(c.error, 4), c.agrees
    (400, 395, 0.0125, True)
    """
    predicted = pred_in.activation_bytes - pred_out.activation_bytes
    return SavingComparison(
        predicted_bytes=predicted,
        predicted_bytes_inplace=pred_in.activation_bytes_inplace - pred_out.activation_bytes_inplace,
        measured_bytes=heap_in - heap_out,
        predicted_share=predicted / pred_in.activation_bytes if pred_in.activation_bytes else 0.0,
    )
