"""An Olive pass that reorders an ONNX model's nodes with onnx-sched.

When ``olive-ai`` is installed, :class:`OnnxSchedOlivePass` is an
``olive.passes.Pass`` usable in an Olive workflow config as::

    "passes": {"schedule": {"type": "onnx_sched.plugins.olive_pass.OnnxSchedOlivePass",
                            "objective": "peak-mem", "time_limit": 10}}

(or registered in Olive's pass registry under any name).  Its config is
``objective``, ``method``, ``time_limit``, ``seed``, ``inplace``, the objective's
problem (``machines`` for makespan, ``profiles`` for latency, ``devices``,
``latency_mode``; lists comma-separated) plus Olive's usual external-data
options; it calls :func:`onnx_sched.api.optimize` and saves the reordered model
with Olive's helpers.

Without Olive this module still imports (so tooling can list plugins), but
using :class:`OnnxSchedOlivePass` raises an ``ImportError`` that says what to
install.  Written against Olive's documented Pass API
(``_default_config(cls, accelerator_spec)``, ``_run_for_config(self, model,
config, output_model_path)``); both the dict configs of older Olive releases
and the attribute configs of newer ones are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from onnx_sched.devices import device_names

__all__ = ["HAVE_OLIVE", "OLIVE_IMPORT_ERROR", "OnnxSchedOlivePass", "problem_arguments", "require_olive"]

_INSTALL_HINT = (
    "OnnxSchedOlivePass needs Olive: pip install olive-ai "
    "(onnx-sched's own API works without it: onnx_sched.api.optimize)"
)

try:
    from olive.passes import Pass as _OlivePass
    from olive.passes.pass_config import PassConfigParam as _PassConfigParam
except ImportError as _exc:  # olive-ai is optional
    HAVE_OLIVE = False
    OLIVE_IMPORT_ERROR: ImportError | None = _exc
else:
    HAVE_OLIVE = True
    OLIVE_IMPORT_ERROR = None


def require_olive() -> None:
    """Raise a clear ``ImportError`` when Olive is not importable."""
    if not HAVE_OLIVE:
        raise ImportError(f"{_INSTALL_HINT}; import failed with: {OLIVE_IMPORT_ERROR}") from OLIVE_IMPORT_ERROR


def _get(config: Any, key: str) -> Any:
    """A config value from Olive's dict (old) or pydantic (new) pass config."""
    if isinstance(config, Mapping):
        return config[key]
    return getattr(config, key)


def problem_arguments(config: Any) -> dict[str, Any]:
    """``optimize``'s problem arguments from the pass config (comma-separated strings split into lists).

    >>> problem_arguments({"machines": None, "profiles": "a.json,b.json", "devices": "CPU,GPU",
    ...                    "latency_mode": "sequential"})
    {'machines': None, 'profiles': ('a.json', 'b.json'), 'devices': ('CPU', 'GPU'), 'latency_mode': 'sequential'}
    """
    def split(key: str) -> list[str]:
        return [v.strip() for v in (_get(config, key) or "").split(",") if v.strip()]

    return {"machines": _get(config, "machines"), "profiles": tuple(split("profiles")),
            "devices": device_names(_get(config, "devices") or None), "latency_mode": _get(config, "latency_mode")}


def _external_data_config() -> dict[str, Any]:
    try:
        from olive.passes.onnx.common import get_external_data_config
    except ImportError:  # very old Olive: no external-data options
        return {}
    return get_external_data_config()


if HAVE_OLIVE:

    class OnnxSchedOlivePass(_OlivePass):  # type: ignore[valid-type,misc]
        """Reorder the model's nodes for peak memory (or makespan/latency) with onnx-sched."""

        @classmethod
        def _default_config(cls, accelerator_spec: Any) -> dict[str, Any]:
            return {
                "objective": _PassConfigParam(
                    type_=str, default_value="peak-mem", description="peak-mem, makespan or latency"
                ),
                "method": _PassConfigParam(
                    type_=str, default_value="auto", description="onnx-sched method name, or auto"
                ),
                "time_limit": _PassConfigParam(
                    type_=float, default_value=10.0, description="seconds the scheduler may spend"
                ),
                "seed": _PassConfigParam(type_=int, default_value=0, description="random seed"),
                "inplace": _PassConfigParam(
                    type_=bool, default_value=False, description="model in-place ops in the memory model"
                ),
                "machines": _PassConfigParam(
                    type_=str, default_value=None, description="makespan: machine description JSON"
                ),
                "profiles": _PassConfigParam(
                    type_=str, default_value=None, description="latency: device profile JSON files, comma-separated"
                ),
                "devices": _PassConfigParam(
                    type_=str, default_value=None,
                    description="comma-separated devices (latency: profiled devices; peak-mem: split over them)",
                ),
                "latency_mode": _PassConfigParam(
                    type_=str, default_value="sequential", description="latency: sequential or concurrent"
                ),
                **_external_data_config(),
            }

        def _run_for_config(self, model: Any, config: Any, output_model_path: str) -> Any:
            from olive.passes.onnx.common import model_proto_to_olive_model, resolve_onnx_path

            from onnx_sched.api import optimize

            proto = model.load_model()
            reordered = optimize(
                proto,
                objective=_get(config, "objective"),
                method=_get(config, "method"),
                time_limit=float(_get(config, "time_limit")),
                seed=int(_get(config, "seed")),
                inplace=bool(_get(config, "inplace")),
                **problem_arguments(config),
            )
            out_path = resolve_onnx_path(output_model_path, Path(model.model_path).name)
            return model_proto_to_olive_model(reordered, out_path, config)

else:

    class OnnxSchedOlivePass:  # type: ignore[no-redef]
        """Placeholder used when Olive is missing: any use raises ``ImportError``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            require_olive()

        def __init_subclass__(cls, **kwargs: Any) -> None:
            require_olive()
