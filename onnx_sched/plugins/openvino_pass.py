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


#: The keyword arguments of :func:`onnx_sched.api.optimize_model` that describe the objective's problem.
_PROBLEM_OPTIONS = ("machines", "profiles", "devices", "latency_mode", "memory_limits")


class OnnxSchedOpenVINOPass(ModelPass):
    """Schedule the model for ``objective`` and record (and, for placements, apply) the result.

    Keyword arguments are those of :func:`onnx_sched.api.optimize_model` (``time_limit``,
    ``seed``, ``options``, ``machines``, ``profiles``, ``devices``, ``latency_mode``...), checked when the pass is
    built (a ``ValueError`` naming the argument).  ``apply_placement`` turns a placement into per-op affinity right
    away.
    """

    def __init__(self, objective: str = "peak-mem", method: str = "auto", *, apply_placement: bool = True,
                 **kwargs: Any) -> None:
        from onnx_sched.api import check_objective_and_method, check_seed
        from onnx_sched.deadline import positive_seconds
        from onnx_sched.devices import device_names

        super().__init__()
        if "time_limit" in kwargs:
            kwargs["time_limit"] = positive_seconds(kwargs["time_limit"], "OnnxSchedOpenVINOPass: time_limit")
        if "seed" in kwargs:
            kwargs["seed"] = check_seed(kwargs["seed"], "OnnxSchedOpenVINOPass: seed")
        if kwargs.get("devices") is not None:
            kwargs["devices"] = device_names(kwargs["devices"], "OnnxSchedOpenVINOPass: devices")
        check_objective_and_method(objective, method, **{k: kwargs[k] for k in _PROBLEM_OPTIONS if k in kwargs})
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
