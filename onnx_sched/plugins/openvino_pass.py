"""An OpenVINO ``ModelPass`` that schedules an in-memory ``ov.Model`` with onnx-sched.

:class:`OnnxSchedOpenVINOPass` runs :func:`onnx_sched.api.optimize_model` (the
entry point of the CLI) on the model it is given and writes the result into that
model's rt_info, as the IR exporter does (:mod:`onnx_sched.exporters.openvino_ir`):
``onnx_sched/<key>`` metadata, ``onnx_sched/order`` and, when the schedule places
ops, ``onnx_sched/placement`` -- which it then applies as per-op affinity
(:func:`~onnx_sched.plugins.openvino_affinity.apply_affinity`), so the model can go
straight to ``compile_model(model, hetero_device_string(model))``.  No op is
reordered: OpenVINO plans its own order (measured; the report's ``notes`` say so).

Example:
    >>> from openvino.passes import Manager                                 # doctest: +SKIP
    >>> p = OnnxSchedOpenVINOPass("latency", profiles=["cpu_gpu.json"], time_limit=5)  # doctest: +SKIP
    >>> m = Manager(); m.register_pass(p); m.run_passes(model); p.last_report  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openvino.passes import ModelPass

__all__ = ["OnnxSchedOpenVINOPass"]


class OnnxSchedOpenVINOPass(ModelPass):
    """Schedule the model for ``objective`` and record (and, for placements, apply) the result.

    Keyword arguments are those of :func:`onnx_sched.api.optimize_model` (``time_limit``,
    ``seed``, ``options``, ``machines``, ``profiles``, ``devices``, ``latency_mode``...), checked when the pass is
    built (a ``ValueError`` naming the argument).  ``apply_placement`` turns a placement into per-op affinity right
    away.
    """

    def __init__(self, objective: str = "peak-mem", method: str = "auto", *, apply_placement: bool = True,
                 **kwargs: Any) -> None:
        from onnx_sched.api import checked_arguments

        super().__init__()
        kwargs = checked_arguments("OnnxSchedOpenVINOPass", objective, method, **kwargs)
        self.objective = objective
        self.method = method
        self.apply_placement = apply_placement
        self.kwargs = kwargs
        self.last_report: Mapping[str, Any] | None = None

    def run_on_model(self, model: Any) -> bool:  # noqa: D102 - OpenVINO API
        from onnx_sched.api import optimize_model
        from onnx_sched.errors import NothingToScheduleError
        from onnx_sched.exporters.openvino_ir import export_ir
        from onnx_sched.plugins.openvino_affinity import apply_affinity

        try:
            result = optimize_model(model, self.objective, self.method, **self.kwargs)
        except NothingToScheduleError:  # only constants: nothing to order or place
            self.last_report = None
            return False
        names = getattr(result.problem, "device_names", None)
        export_ir(result.imported, result.schedule, result.metadata, names, ov_model=model)
        if result.schedule.placement is not None and self.apply_placement:
            apply_affinity(model)
        self.last_report = dict(result.report)
        return True
