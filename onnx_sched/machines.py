"""Machine descriptions for the time objectives: load and validate a JSON file.

Two kinds of description (format in ``docs/machines.md``):

* **machine types** (paper 001 section 2.1): every op runs on the one machine
  type it is assigned to; type ``j`` offers ``capacity`` resource units and an op
  holds ``demand`` units while it runs.  No transfer costs.  Ops get their type
  from ``op_types`` (ONNX op type -> machine type name, ``"*"`` the default) or,
  for synthetic graphs, from :func:`onnx_sched.synth.attrs.makespan_attrs`.
* **devices** (heterogeneous, HEFT-style): an op may run on any device that can
  run it; its duration depends on the device; a tensor read on a device other
  than its producer's pays ``latency + bytes / bandwidth`` of the link between
  them.  A device runs ``streams`` ops at once (default 1).

Either kind may give per-unit roofline numbers (``peak_flops`` in FLOP/s,
``mem_bandwidth`` in bytes/s, ``overhead`` in s per op) so op durations can be
estimated from :attr:`Graph.op_flops` / :attr:`Graph.op_bytes`.

:func:`load_machines` raises one ``ValueError`` naming the file and the first
problem found.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Link", "Machines", "Unit", "identical_devices", "load_machines", "machines_from_dict", "machine_types"]


@dataclass(frozen=True)
class Unit:
    """One resource pool: a machine type or a device."""

    name: str
    capacity: int = 1  # resource units (types) or concurrent streams (devices)
    peak_flops: float | None = None  # FLOP/s, for roofline durations
    mem_bandwidth: float | None = None  # bytes/s, for roofline durations
    overhead: float = 0.0  # seconds added to every op (launch cost)


@dataclass(frozen=True)
class Link:
    """Data movement from one device to another: ``latency + bytes / bandwidth`` seconds."""

    latency: float
    bandwidth: float  # bytes/s

    def seconds(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


@dataclass(frozen=True)
class Machines:
    """A validated machine description.

    ``kind`` is ``"types"`` or ``"devices"``.  ``links[(i, j)]`` exists for every
    ordered pair of distinct devices (kind ``"devices"`` only).  ``op_types`` maps
    ONNX op types to unit indices (kind ``"types"``; ``"*"`` is the default);
    ``supports`` maps a device index to the op types it can run (absent = all).
    """

    kind: str
    units: tuple[Unit, ...]
    links: Mapping[tuple[int, int], Link] = field(default_factory=dict)
    op_types: Mapping[str, int] = field(default_factory=dict)
    supports: Mapping[int, frozenset[str]] = field(default_factory=dict)
    name: str = "machines"
    illustrative: bool = False
    profile: str | None = None  # per-op duration profile (absolute path), optional

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(u.name for u in self.units)

    @property
    def capacities(self) -> tuple[int, ...]:
        return tuple(u.capacity for u in self.units)

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"unknown {self.unit_word()} {name!r}; known: {', '.join(self.names)}") from None

    def unit_word(self) -> str:
        """"machine type" or "device", for messages."""
        return "machine type" if self.kind == "types" else "device"

    def type_of(self, op_type: str) -> int:
        """Machine-type index for an ONNX op type (kind ``"types"``)."""
        if op_type in self.op_types:
            return self.op_types[op_type]
        if "*" in self.op_types:
            return self.op_types["*"]
        raise ValueError(f"machine description {self.name!r}: no machine type for op type {op_type!r} and no '*' default")


def machine_types(capacities: tuple[int, ...] | list[int], name: str = "types") -> Machines:
    """A machine-type description with the given capacities (names ``type0``, ``type1`` ...)."""
    units = []
    for j, c in enumerate(capacities):
        if int(c) != c or c <= 0:
            raise ValueError(f"machine type {j}: capacity must be a positive integer, got {c!r}")
        units.append(Unit(f"type{j}", int(c)))
    if not units:
        raise ValueError("machine_types: need at least one machine type")
    return Machines(kind="types", units=tuple(units), name=name)


def identical_devices(count: int, name: str = "devices") -> Machines:
    """``count`` identical devices ``D0``, ``D1`` ... whose links move data for free (paper 002's proxy:
    homogeneous devices, zero latency, infinite bandwidth)."""
    if int(count) != count or count < 1:
        raise ValueError(f"identical_devices: need a positive device count, got {count!r}")
    units = tuple(Unit(f"D{i}") for i in range(count))
    free = Link(latency=0.0, bandwidth=math.inf)
    links = {(i, j): free for i in range(count) for j in range(count) if i != j}
    return Machines(kind="devices", units=units, links=links, name=name)


def _num(where: str, obj: Mapping[str, Any], key: str, *, required: bool, positive: bool = True,
         default: float | None = None) -> float | None:
    if key not in obj:
        if required:
            raise ValueError(f"{where}: missing {key!r}")
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}: {key!r} must be a finite number, got {v!r}")
    if positive and v <= 0:
        raise ValueError(f"{where}: {key!r} must be > 0, got {v!r}")
    if not positive and v < 0:
        raise ValueError(f"{where}: {key!r} must be >= 0, got {v!r}")
    return float(v)


def _capacity(where: str, obj: Mapping[str, Any], key: str) -> int:
    v = obj.get(key, 1)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{where}: {key!r} must be a positive integer, got {v!r}")
    return int(v)


def _unit(where: str, obj: Any, cap_key: str, known: set[str]) -> Unit:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: missing or empty 'name'")
    if name in known:
        raise ValueError(f"{where}: duplicate name {name!r}")
    allowed = {"name", cap_key, "peak_flops", "mem_bandwidth", "overhead", "supports", "comment"}
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ValueError(f"{where} ({name}): unknown keys {extra}; allowed: {sorted(allowed)}")
    return Unit(
        name=name,
        capacity=_capacity(f"{where} ({name})", obj, cap_key),
        peak_flops=_num(f"{where} ({name})", obj, "peak_flops", required=False),
        mem_bandwidth=_num(f"{where} ({name})", obj, "mem_bandwidth", required=False),
        overhead=_num(f"{where} ({name})", obj, "overhead", required=False, positive=False, default=0.0) or 0.0,
    )


def machines_from_dict(data: Any, source: str = "<dict>", base_dir: str | os.PathLike | None = None) -> Machines:
    """Validate a parsed machine description; ``ValueError`` names ``source`` and the problem."""
    try:
        return _from_dict(data, base_dir)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def _from_dict(data: Any, base_dir: str | os.PathLike | None) -> Machines:
    if not isinstance(data, Mapping):
        raise ValueError(f"top level must be a JSON object, got {type(data).__name__}")
    top_allowed = {"name", "machine_types", "devices", "links", "op_types", "illustrative", "profile", "comment"}
    extra = sorted(set(data) - top_allowed)
    if extra:
        raise ValueError(f"unknown top-level keys {extra}; allowed: {sorted(top_allowed)}")
    has_types, has_devices = "machine_types" in data, "devices" in data
    if has_types == has_devices:
        raise ValueError("give exactly one of 'machine_types' or 'devices'")
    name = str(data.get("name", "machines"))
    profile = data.get("profile")
    if profile is not None:
        if not isinstance(profile, str) or not profile:
            raise ValueError(f"'profile' must be a file path, got {profile!r}")
        p = Path(profile)
        if not p.is_absolute() and base_dir is not None:
            p = Path(base_dir) / p
        profile = str(p)
    common = {"name": name, "illustrative": bool(data.get("illustrative", False)), "profile": profile}
    key = "machine_types" if has_types else "devices"
    raw = data[key]
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{key!r} must be a non-empty list")
    units: list[Unit] = []
    for i, obj in enumerate(raw):
        units.append(_unit(f"{key}[{i}]", obj, "capacity" if has_types else "streams", {u.name for u in units}))
    names = [u.name for u in units]
    if has_types:
        if "links" in data:
            raise ValueError("'links' are for 'devices'; machine types have no transfer costs")
        op_map: dict[str, int] = {}
        raw_map = data.get("op_types", {})
        if not isinstance(raw_map, Mapping):
            raise ValueError("'op_types' must map ONNX op types to machine type names")
        for op_type, tname in raw_map.items():
            if tname not in names:
                raise ValueError(f"op_types[{op_type!r}] names unknown machine type {tname!r}; known: {names}")
            op_map[str(op_type)] = names.index(tname)
        if any("supports" in obj for obj in raw):
            raise ValueError("'supports' is for devices; machine types take ops through 'op_types'")
        return Machines(kind="types", units=tuple(units), op_types=op_map, **common)
    if "op_types" in data:
        raise ValueError("'op_types' is for 'machine_types'; devices list what they run in 'supports'")
    supports: dict[int, frozenset[str]] = {}
    for i, obj in enumerate(raw):
        if "supports" in obj:
            s = obj["supports"]
            if not isinstance(s, list) or not all(isinstance(x, str) for x in s):
                raise ValueError(f"devices[{i}] ({names[i]}): 'supports' must be a list of op type names")
            supports[i] = frozenset(s)
    explicit: dict[tuple[int, int], Link] = {}
    implied: dict[tuple[int, int], Link] = {}
    raw_links = data.get("links", [])
    if not isinstance(raw_links, list):
        raise ValueError("'links' must be a list of {from, to, latency, bandwidth}")
    for k, obj in enumerate(raw_links):
        where = f"links[{k}]"
        if not isinstance(obj, Mapping):
            raise ValueError(f"{where}: expected an object")
        extra = sorted(set(obj) - {"from", "to", "latency", "bandwidth", "symmetric", "comment"})
        if extra:
            raise ValueError(f"{where}: unknown keys {extra}")
        for end in ("from", "to"):
            if obj.get(end) not in names:
                raise ValueError(f"{where}: {end!r} = {obj.get(end)!r} is not a device; known: {names}")
        a, b = names.index(obj["from"]), names.index(obj["to"])
        if a == b:
            raise ValueError(f"{where}: link from {obj['from']!r} to itself (same-device reads are free)")
        link = Link(
            latency=_num(where, obj, "latency", required=True, positive=False),  # type: ignore[arg-type]
            bandwidth=_num(where, obj, "bandwidth", required=True),  # type: ignore[arg-type]
        )
        if (a, b) in explicit:
            raise ValueError(f"{where}: duplicate link {names[a]} -> {names[b]}")
        explicit[(a, b)] = link
        if obj.get("symmetric", True):
            implied[(b, a)] = link
    links = {**implied, **explicit}  # an explicit link beats one implied by symmetry
    for a in range(len(units)):
        for b in range(len(units)):
            if a != b and (a, b) not in links:
                raise ValueError(f"no link from device {names[a]!r} to {names[b]!r}; every pair needs one")
    return Machines(kind="devices", units=tuple(units), links=links, supports=supports, **common)


def load_machines(path: str | os.PathLike) -> Machines:
    """Read and validate a machine description JSON (see ``docs/machines.md``).

    Raises ``ValueError`` with the path and the problem (unreadable file, bad
    JSON, missing or wrong field).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{p}: cannot read machine description ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a machine description (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    return machines_from_dict(data, str(p), base_dir=p.parent)
