"""The compute devices of this machine, as OpenVINO, ONNX Runtime and PyTorch see them.

``list_devices()`` reports OpenVINO's ``available_devices`` (with each device's
``FULL_DEVICE_NAME``), ONNX Runtime's execution providers and, when torch is
installed and sees CUDA, each ``cuda:N`` (name, memory, compute capability: the
devices ``bench-placement --runtime ort --devices CPU,cuda:0`` and ``profile
--device cuda:0`` run on).  Every runtime is optional: a missing one is reported,
never raised; torch is imported only when it is installed.

A second CPU "device" for real split execution on a CPU-only machine:
OpenVINO can load its CPU plugin library a second time under another device
name (``Core.register_plugin(lib, "CPUB")``).  ``HETERO:CPU,CPUB`` then honours
per-op ``affinity`` and compiles two sub-models, both running on the CPU.  This
is what :func:`register_cpu_alias` does (the OpenVINO runners register ``CPUB``, and ``CPU2``,
``CPU3``, ... for placements over more devices, when a run names them); ``HETERO:CPU`` alone (or
``CPU,CPU``) always compiles one sub-model, and virtual devices (``CPU.1``) do not exist.

Example:
    >>> [d.name for d in list_devices() if d.backend == "openvino"]  # doctest: +SKIP
    ['CPU']
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onnx_sched.errors import DeviceError

__all__ = ["CPU_ALIAS", "DeviceInfo", "device_kind", "device_names", "is_cpu_alias", "list_devices", "openvino_core",
           "parse_memory_limits", "register_cpu_alias"]

CPU_ALIAS = "CPUB"  # second name for the OpenVINO CPU plugin (two-CPU HETERO split)


@dataclass(frozen=True)
class DeviceInfo:
    """One device: ``backend`` is ``openvino``, ``onnxruntime`` or ``torch``; ``kind`` is
    ``cpu``, ``igpu``, ``dgpu``, ``npu`` or ``other``."""

    name: str
    full_name: str
    backend: str
    kind: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "full_name": self.full_name, "backend": self.backend, "kind": self.kind}


def device_names(value: str | Sequence[str] | None, what: str = "devices") -> tuple[str, ...] | None:
    """A device list as the user gave it -- a comma list (``"CPU, GPU"``) or a sequence of names -- as
    stripped names; None stays None (no list given).  A list with no names is a ``ValueError``
    naming ``what`` (the flag or option it came from).

    >>> device_names("CPU, GPU")
    ('CPU', 'GPU')
    >>> device_names(["CPU", "NPU"])
    ('CPU', 'NPU')
    >>> device_names(" , ")
    Traceback (most recent call last):
    ...
    ValueError: devices ' , ': no device names; give a comma list such as CPU,GPU
    >>> device_names("CPU,cpu")
    Traceback (most recent call last):
    ...
    ValueError: devices 'CPU,cpu': 'cpu' names the same device as 'CPU'; give each device once
    """
    if value is None:
        return None
    if not isinstance(value, str) and not (isinstance(value, Sequence) and all(isinstance(v, str) for v in value)):
        raise ValueError(f"{what} {value!r}: give a comma list such as CPU,GPU or a sequence of names")
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(p.strip() for p in parts if p.strip())
    if not names:
        raise ValueError(f"{what} {value!r}: no device names; give a comma list such as CPU,GPU")
    seen: dict[str, str] = {}
    for name in names:
        if name.upper() in seen:
            raise ValueError(f"{what} {value!r}: {name!r} names the same device as {seen[name.upper()]!r}; "
                             "give each device once")
        seen[name.upper()] = name
    return names


def parse_memory_limits(specs: str | Sequence[str], what: str = "--memory-limit") -> dict[str, int]:
    """Memory limits as the user gave them -- ``DEVICE=SIZE`` items, in a sequence or a comma list
    (``"GPU=4GiB, NPU=512MB"``) -- as bytes per device name; a bad item is a ``ValueError`` naming
    ``what`` (the flag or option it came from).

    >>> parse_memory_limits(["GPU=4GiB", "NPU=1.5MB", "CPU=1000"])
    {'GPU': 4294967296, 'NPU': 1500000, 'CPU': 1000}
    >>> parse_memory_limits("GPU=4GiB, CPU=8GiB", what="memory_limits")
    {'GPU': 4294967296, 'CPU': 8589934592}
    """
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    out: dict[str, int] = {}
    for spec in ([s for s in specs.split(",") if s.strip()] if isinstance(specs, str) else specs):
        name, sep, value = spec.partition("=")
        number = value.strip().upper().rstrip("BIKMG")
        unit = value.strip().upper()[len(number):]
        try:
            size = int(float(number) * units[unit])
        except (KeyError, ValueError, OverflowError):  # OverflowError: inf, 1e400
            raise ValueError(f"{what} expects DEVICE=SIZE (e.g. GPU=4GiB), got {spec!r}") from None
        if not sep or not name.strip() or size <= 0:
            raise ValueError(f"{what} expects DEVICE=SIZE with a positive, finite size (e.g. GPU=4GiB), "
                             f"got {spec!r}")
        if name.strip() in out:
            raise ValueError(f"{what}: device {name.strip()!r} is given twice")
        out[name.strip()] = size
    return out


def device_kind(name: str, full_name: str = "", device_type: str = "") -> str:
    """Classify a device name: OpenVINO reports ``DEVICE_TYPE`` integrated/discrete for GPUs."""
    upper = name.upper()
    if upper.startswith("CPU") or "CPUEXECUTIONPROVIDER" in upper:
        return "cpu"
    if upper.startswith("GPU") or "CUDA" in upper or "DML" in upper or "ROCM" in upper:
        t = device_type.lower()
        if "integrated" in t:
            return "igpu"
        if "discrete" in t or "CUDA" in upper or "ROCM" in upper:
            return "dgpu"
        return "igpu" if "graphics" in full_name.lower() and "arc" not in full_name.lower() else "dgpu"
    if upper.startswith("NPU"):
        return "npu"
    return "other"


_CORE: Any = None


def openvino_core() -> Any:
    """A process-wide ``openvino.Core`` (creating one loads plugins: do it once)."""
    global _CORE
    if _CORE is None:
        try:
            import openvino as ov
        except ImportError as exc:
            raise DeviceError("OpenVINO is not installed (pip install 'onnx-sched[openvino]')") from exc
        _CORE = ov.Core()
    return _CORE


def exact_f32(core: Any, device: str) -> dict[str, Any]:
    """OpenVINO properties under which every compile of a model on ``device`` computes in f32: the f32 inference
    precision, and no dynamic quantization where the device has it (the CPU plugin quantizes the activations of a
    MatMul with compressed weights, e.g. 4-bit ones, to int8 per group by default, so one model split two ways
    computed two results)."""
    props: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32"}
    if "DYNAMIC_QUANTIZATION_GROUP_SIZE" in core.get_property(device, "SUPPORTED_PROPERTIES"):
        props["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = 0
    return props


def is_cpu_alias(name: str) -> bool:
    """Whether ``name`` is one of the names the CPU plugin is registered under for splits on a CPU-only
    machine: ``CPUB``, ``CPU2``, ``CPU3``, ...

    >>> [is_cpu_alias(n) for n in ("CPUB", "CPU2", "CPU", "GPU.1")]
    [True, True, False, False]
    """
    return name == CPU_ALIAS or re.fullmatch(r"CPU[0-9]+", name) is not None


def cpu_devices(n: int) -> list[str]:
    """``n`` OpenVINO device names that all run on this machine's CPU: ``CPU``, then its aliases.

    >>> cpu_devices(3)
    ['CPU', 'CPUB', 'CPU2']
    """
    return (["CPU", CPU_ALIAS] + [f"CPU{i}" for i in range(2, n)])[:n]


def register_cpu_alias(core: Any = None, name: str = CPU_ALIAS) -> str:
    """Register the OpenVINO CPU plugin library a second time as device ``name``.

    Returns ``name``.  Idempotent.  Used to run real two-device HETERO splits on
    a CPU-only machine (see module docstring).
    """
    core = core or openvino_core()
    if name in core.available_devices:
        return name
    import openvino as ov

    lib = os.path.join(os.path.dirname(ov.__file__), "libs", "libopenvino_intel_cpu_plugin.so")
    if not os.path.exists(lib):
        raise DeviceError(f"cannot register {name}: OpenVINO CPU plugin library not found at {lib}")
    core.register_plugin(lib, name)
    return name


def _openvino_devices() -> list[DeviceInfo]:
    try:
        core = openvino_core()
    except DeviceError:
        return []
    out = []
    for name in core.available_devices:
        try:
            full = str(core.get_property(name, "FULL_DEVICE_NAME"))
        except Exception:  # noqa: BLE001 - a plugin may not report it
            full = name
        try:
            dtype = str(core.get_property(name, "DEVICE_TYPE"))
        except Exception:  # noqa: BLE001 - CPU has no DEVICE_TYPE
            dtype = ""
        out.append(DeviceInfo(name, full, "openvino", device_kind(name, full, dtype)))
    return out


def _ort_devices() -> list[DeviceInfo]:
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    out = []
    for prov in ort.get_available_providers():
        if prov == "AzureExecutionProvider":  # a remote-call provider, not a compute device
            continue
        out.append(DeviceInfo(prov, f"ONNX Runtime {ort.__version__} {prov}", "onnxruntime", device_kind(prov)))
    return out


def _torch_devices() -> list[DeviceInfo]:
    import importlib.util

    try:
        if importlib.util.find_spec("torch") is None:  # not installed: do not try
            return []
        import torch

        if not torch.cuda.is_available():
            return []
        out = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            full = f"{p.name}, {p.total_memory / 2**30:.1f} GiB, compute capability {p.major}.{p.minor} (torch {torch.__version__})"
            out.append(DeviceInfo(f"cuda:{i}", full, "torch", device_kind(f"cuda:{i}")))
        return out
    except Exception:  # noqa: BLE001 - a broken torch or driver lists nothing
        return []


def list_devices() -> list[DeviceInfo]:
    """Devices of this machine: OpenVINO devices, then ONNX Runtime providers, then torch's CUDA devices."""
    return _openvino_devices() + _ort_devices() + _torch_devices()
