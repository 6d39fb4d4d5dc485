"""onnx-sched: operator ordering and device placement passes for ONNX and OpenVINO graphs."""

from __future__ import annotations

from typing import Any

from onnx_sched.numba_cache import ensure_cache_dir

ensure_cache_dir()  # before any kernel module loads: see onnx_sched.numba_cache

__version__ = "0.1.0"
__all__ = ["__version__", "optimize"]


def optimize(model: Any, objective: str = "peak-mem", **kwargs: Any) -> Any:
    """Reorder ``model`` (``onnx.ModelProto`` or ``onnx_ir.Model``) for ``objective``;
    returns the same type.  See :func:`onnx_sched.api.optimize`."""
    from onnx_sched.api import optimize as _optimize

    return _optimize(model, objective=objective, **kwargs)
