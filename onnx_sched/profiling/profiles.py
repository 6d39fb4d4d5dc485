"""Device profiles: the data types and their JSON files.

A :class:`DeviceProfile` holds what one device costs:

* ``op_seconds``: measured seconds per op name of one model (OpenVINO
  ``PERF_COUNT`` / ``get_profiling_info()`` mapped back to the ONNX nodes through
  the runtime model's ``originalLayersNames``; or ONNX Runtime's profiling JSON,
  :mod:`onnx_sched.profiling.runtimes`);
* a fitted rate model (``flops_per_s`` for compute-bound op classes,
  ``bytes_per_s`` for memory-bound ones, ``op_overhead_s`` per op) that prices ops
  of *other* models, so one profile serves the whole corpus
  (:mod:`onnx_sched.profiling.rates`);
* ``class_speedup``/``extra_overhead_s`` when the profile is **simulated**: derived
  from a measured profile by documented scaling factors
  (:mod:`onnx_sched.profiling.simulated`) for a device this machine lacks.
  ``simulated`` is then true and every result computed from it says so.

A :class:`ProfileSet` is several devices plus a :class:`TransferModel` per
ordered device pair (``latency_s + bytes / bandwidth_Bps``), calibrated by
timing real copies (:mod:`onnx_sched.profiling.transfer`).  Files are JSON
(``format: onnx-sched-profiles/1``, :func:`load_profiles` / :func:`save_profiles`);
a single-device file from ``onnx-sched profile`` is a ProfileSet with one device.
The op classes (:func:`op_class`) that rates and speed-ups are given for are
defined here because every other profiling module uses them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import DeviceError, OnnxSchedError

__all__ = [
    "CLASSES",
    "COMPUTE_OPS",
    "FORMAT",
    "DeviceProfile",
    "ProfileSet",
    "TransferModel",
    "load_profiles",
    "op_class",
    "save_profiles",
]

FORMAT = "onnx-sched-profiles/1"
# Op classes for the rate model and for simulated speed-ups.
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Convolution", "GroupConvolution", "FusedMatMul",
                         "ConvolutionBackpropData", "Einsum"})
_REDUCE_OPS = frozenset({"Softmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
                         "GroupNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "GlobalAveragePool",
                         "AveragePool", "MaxPool", "MVN", "NormalizeL2"})
_SHAPE_OPS = frozenset({"Shape", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Gather", "Slice", "Concat",
                        "Transpose", "Expand", "Identity", "Cast", "Split", "Range", "ConstantOfShape", "Where",
                        "Equal", "ShapeOf", "StridedSlice"})


def op_class(op_type: str) -> str:
    """``compute`` (GEMM-like), ``reduce`` (normalization / pooling), ``data`` (shape and
    data movement) or ``elementwise``: the classes rates and speed-ups are given for."""
    if op_type in COMPUTE_OPS:
        return "compute"
    if op_type in _REDUCE_OPS or op_type.startswith("Reduce"):
        return "reduce"
    if op_type in _SHAPE_OPS:
        return "data"
    return "elementwise"


CLASSES = ("compute", "reduce", "data", "elementwise")


@dataclass(frozen=True)
class TransferModel:
    """Time to move ``n`` bytes between two devices: ``latency_s + n / bandwidth_Bps``."""

    latency_s: float
    bandwidth_Bps: float

    def seconds(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        return self.latency_s + np.asarray(nbytes, dtype=np.float64) / self.bandwidth_Bps

    def __post_init__(self) -> None:
        if not 0 <= self.latency_s < math.inf or not self.bandwidth_Bps > 0:
            raise ValueError(f"transfer model needs a finite latency >= 0 and bandwidth > 0, got {self}")


@dataclass(frozen=True)
class DeviceProfile:
    """What one device costs (see module docstring).  Times are seconds."""

    name: str
    kind: str = "cpu"
    full_name: str = ""
    backend: str = ""
    simulated: bool = False
    model: str = ""
    op_seconds: Mapping[str, float] = field(default_factory=dict)
    flops_per_s: Mapping[str, float] = field(default_factory=dict)  # per op class
    bytes_per_s: float = 10e9
    op_overhead_s: float = 2e-6
    class_speedup: Mapping[str, float] = field(default_factory=dict)  # simulated: base time / speedup
    extra_overhead_s: float = 0.0  # simulated: per-op launch cost added
    total_seconds: float | None = None  # measured end-to-end latency of ``model``
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["op_seconds"] = dict(self.op_seconds)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> DeviceProfile:
        known = {f for f in DeviceProfile.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"device profile {d.get('name')!r}: unknown fields {sorted(unknown)}")
        if "name" not in d:
            raise ValueError("device profile without a 'name'")
        times = d.get("op_seconds", {})
        if not isinstance(times, Mapping) or not all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t < math.inf for t in times.values()):
            raise ValueError(f"device profile {d['name']!r}: op_seconds must map op names to seconds >= 0")
        return DeviceProfile(**{k: v for k, v in d.items()})


@dataclass(frozen=True)
class ProfileSet:
    """Devices (index = device id in placements) plus transfer models between them.

    ``transfers[(src, dst)]`` for device names; a missing pair falls back to
    ``default_transfer``.  ``host`` is the device that holds graph inputs and
    receives graph outputs (the CPU).
    """

    devices: tuple[DeviceProfile, ...]
    transfers: Mapping[tuple[str, str], TransferModel] = field(default_factory=dict)
    default_transfer: TransferModel = TransferModel(10e-6, 10e9)
    host: str = ""

    def __post_init__(self) -> None:
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names):
            raise ValueError(f"profile set: duplicate device names {names}")
        if not self.host and names:
            cpu = [d.name for d in self.devices if d.kind == "cpu"]
            object.__setattr__(self, "host", cpu[0] if cpu else names[0])
        if self.host and self.host not in names:
            raise ValueError(f"profile set: host {self.host!r} is not one of {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    @property
    def simulated(self) -> bool:
        return any(d.simulated for d in self.devices)

    def transfer(self, src: str, dst: str) -> TransferModel:
        if src == dst:
            return TransferModel(0.0, float("inf"))
        return self.transfers.get((src, dst), self.default_transfer)

    def subset(self, names: Sequence[str]) -> ProfileSet:
        """The same profiles restricted to ``names`` (in that order)."""
        by = {d.name: d for d in self.devices}
        missing = [n for n in names if n not in by]
        if missing:
            raise DeviceError(f"no profile for device(s) {missing}; profiles have {list(by)}")
        host = self.host if self.host in names else ""
        return ProfileSet(tuple(by[n] for n in names), self.transfers, self.default_transfer, host)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "host": self.host,
            "simulated": self.simulated,
            "devices": [d.to_dict() for d in self.devices],
            "transfers": [
                {"src": s, "dst": t, "latency_s": m.latency_s, "bandwidth_Bps": m.bandwidth_Bps}
                for (s, t), m in self.transfers.items()
            ],
            "default_transfer": asdict(self.default_transfer),
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> ProfileSet:
        if d.get("format") != FORMAT:
            raise ValueError(f"not an onnx-sched profile file (format {d.get('format')!r}, expected {FORMAT!r})")
        listed = d.get("devices", [])
        if not isinstance(listed, list) or not all(isinstance(x, Mapping) for x in listed):
            raise ValueError("'devices' must be a list of device profiles (JSON objects)")
        devices = tuple(DeviceProfile.from_dict(x) for x in listed)
        if not devices:
            raise ValueError("profile file lists no devices")
        transfers = {(t["src"], t["dst"]): TransferModel(float(t["latency_s"]), float(t["bandwidth_Bps"]))
                     for t in d.get("transfers", [])}
        dt = d.get("default_transfer") or {"latency_s": 10e-6, "bandwidth_Bps": 10e9}
        return ProfileSet(devices, transfers, TransferModel(float(dt["latency_s"]), float(dt["bandwidth_Bps"])),
                          d.get("host", ""))

    def merged(self, other: ProfileSet) -> ProfileSet:
        """Devices of both sets (``other`` wins on name clashes), transfers of both."""
        by = {d.name: d for d in self.devices}
        by.update({d.name: d for d in other.devices})
        return ProfileSet(tuple(by.values()), {**self.transfers, **other.transfers}, self.default_transfer,
                          self.host or other.host)

    @staticmethod
    def with_hosts(device: DeviceProfile, transfer: TransferModel, hosts: Sequence[str]) -> ProfileSet:
        """A one-device set whose transfers to and from each of ``hosts`` (the device itself apart) are
        ``transfer``, which is also the default: how a device profiled beside a host writes its measured boundary,
        for each name a host profile of another file may have."""
        pairs = {pair: transfer for h in hosts if h != device.name for pair in ((h, device.name), (device.name, h))}
        return ProfileSet((device,), pairs, transfer)


def load_profiles(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> ProfileSet:
    """Read one or more profile files into one :class:`ProfileSet` (later files win)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: ProfileSet | None = None
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise OnnxSchedError(f"{path}: profile file not found")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise OnnxSchedError(f"{path}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise OnnxSchedError(f"{path}: not an onnx-sched profile file (a JSON {type(data).__name__}, not an object)")
        try:
            ps = ProfileSet.from_dict(data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise OnnxSchedError(f"{path}: {exc}") from None
        out = ps if out is None else out.merged(ps)
    if out is None:
        raise OnnxSchedError("no profile file given")
    return out


def save_profiles(ps: ProfileSet, path: str | os.PathLike) -> None:
    from onnx_sched.cli._common import write_json_atomic

    write_json_atomic(ps.to_dict(), path)
