"""An Olive pass that reorders an ONNX model's nodes with onnx-sched.

When ``olive-ai`` is installed, :class:`OnnxSchedOlivePass` is an
``olive.passes.Pass`` usable in an Olive workflow config as::

    "passes": {"schedule": {"type": "OnnxSchedOlivePass", "objective": "peak-mem", "time_limit": 10}}

Olive finds a pass's class only through its package config, so the workflow runs
with :func:`package_config` (Olive's own passes plus this one)::

    olive.workflows.run(workflow, package_config=olive_pass.package_config())

or, from the shell, ``python -m onnx_sched.plugins.olive_pass PKG.json`` writes it
for ``olive run --config WORKFLOW.json --package-config PKG.json``.  Its config is
``objective``, ``method``, ``time_limit``, ``seed``, ``inplace``, the objective's
problem (``machines`` for makespan, ``profiles`` for latency, ``devices``,
``memory_limits`` (``"GPU=4GiB,CPU=8GiB"``), ``latency_mode``; lists
comma-separated) plus Olive's usual external-data options; it calls
:func:`onnx_sched.api.optimize` and saves the reordered model with Olive's helpers.

Without Olive (or with an Olive that fails to import) this module still imports,
so tooling can list plugins, but using :class:`OnnxSchedOlivePass` raises an
``ImportError`` that says what to install and why the import failed.  Tested with
Olive 0.13 (``tests/test_plugins.py`` runs ``examples/olive_pass.py``'s workflow
through Olive's engine); both the dict configs of older Olive releases and the
attribute configs of newer ones are accepted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from onnx_sched.devices import device_names, parse_memory_limits

__all__ = ["HAVE_OLIVE", "OLIVE_IMPORT_ERROR", "PASS_MODULE_CONFIG", "OnnxSchedOlivePass", "package_config",
           "problem_arguments", "require_olive"]

_INSTALL_HINT = (
    "OnnxSchedOlivePass needs Olive: pip install olive-ai "
    "(onnx-sched's own API works without it: onnx_sched.api.optimize)"
)

try:
    from olive.passes import Pass as _OlivePass
    from olive.passes.pass_config import PassConfigParam as _PassConfigParam
except Exception as _exc:  # noqa: BLE001 - olive-ai is optional, and an installed one fails to import when a
    # dependency of its own is broken (torchmetrics imports a torchvision built for another torch: RuntimeError)
    HAVE_OLIVE = False
    OLIVE_IMPORT_ERROR: Exception | None = _exc
else:
    HAVE_OLIVE = True
    OLIVE_IMPORT_ERROR = None


def require_olive() -> None:
    """Raise a clear ``ImportError`` when Olive is not importable."""
    if not HAVE_OLIVE:
        raise ImportError(f"{_INSTALL_HINT}; import failed with {type(OLIVE_IMPORT_ERROR).__name__}: "
                          f"{OLIVE_IMPORT_ERROR}") from OLIVE_IMPORT_ERROR


#: This pass's entry in an Olive package config (how Olive maps a workflow's pass ``type`` to a class).
PASS_MODULE_CONFIG: dict[str, Any] = {"module_path": "onnx_sched.plugins.olive_pass.OnnxSchedOlivePass",
                                      "supported_providers": ["*"], "supported_accelerators": ["*"],
                                      "supported_precisions": ["*"]}


def package_config() -> dict[str, Any]:
    """Olive's default package config with :class:`OnnxSchedOlivePass` added, for
    ``olive.workflows.run(..., package_config=...)`` or ``olive run --package-config``: a workflow can then name
    ``"type": "OnnxSchedOlivePass"`` beside Olive's own passes."""
    require_olive()
    from olive.package_config import OlivePackageConfig

    config = json.loads(Path(OlivePackageConfig.get_default_config_path()).read_text())
    config.setdefault("passes", {})["OnnxSchedOlivePass"] = dict(PASS_MODULE_CONFIG)
    return config


def _get(config: Any, key: str) -> Any:
    """A config value from Olive's dict (old) or pydantic (new) pass config."""
    if isinstance(config, Mapping):
        return config[key]
    return getattr(config, key)


def problem_arguments(config: Any) -> dict[str, Any]:
    """``optimize``'s problem arguments from the pass config (comma-separated strings split into lists).

    >>> problem_arguments({"machines": None, "profiles": "a.json,b.json", "devices": "CPU,GPU",
    ...                    "memory_limits": "GPU=1KiB", "latency_mode": "sequential"})  # doctest: +NORMALIZE_WHITESPACE
    {'machines': None, 'profiles': ('a.json', 'b.json'), 'devices': ('CPU', 'GPU'), 'memory_limits': {'GPU': 1024},
     'latency_mode': 'sequential'}
    """
    def split(key: str) -> list[str]:
        return [v.strip() for v in (_get(config, key) or "").split(",") if v.strip()]

    return {"machines": _get(config, "machines"), "profiles": tuple(split("profiles")),
            "devices": device_names(_get(config, "devices") or None),
            "memory_limits": parse_memory_limits(_get(config, "memory_limits") or "", "memory_limits") or None,
            "latency_mode": _get(config, "latency_mode")}


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
                "memory_limits": _PassConfigParam(
                    type_=str, default_value=None,
                    description="peak-mem over devices: per-device limits, comma-separated DEVICE=SIZE (GPU=4GiB)",
                ),
                "latency_mode": _PassConfigParam(
                    type_=str, default_value="sequential", description="latency: sequential or concurrent"
                ),
                **_external_data_config(),
            }

        def _run_for_config(self, model: Any, config: Any, output_model_path: str) -> Any:
            from olive.passes.onnx.common import model_proto_to_olive_model

            try:
                from olive.model.utils import resolve_onnx_path
            except ImportError:  # older Olive releases kept it beside model_proto_to_olive_model
                from olive.passes.onnx.common import resolve_onnx_path

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


def main(argv: list[str] | None = None) -> int:
    """``python -m onnx_sched.plugins.olive_pass PKG.json``: write :func:`package_config` to ``PKG.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m onnx_sched.plugins.olive_pass PKG.json  (Olive's package config plus "
              "OnnxSchedOlivePass, for olive run --package-config PKG.json)", file=sys.stderr)
        return 2
    try:
        config = package_config()
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    from onnx_sched.cli._common import write_json_atomic

    try:
        write_json_atomic(config, args[0])
    except OSError as exc:
        print(f"error: cannot write {args[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {args[0]}: Olive's package config with OnnxSchedOlivePass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
