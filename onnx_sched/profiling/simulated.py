"""Simulated devices: profiles for hardware this machine lacks, derived from a measured one.

:func:`derive_profile` divides a measured profile's times by a per-op-class
speed-up and adds a per-op launch overhead; :data:`SIMULATED_PRESETS` documents
the factors for an Intel iGPU and dGPU, and :func:`add_simulated` adds such
devices (with their transfer models) to a profile set.  Every derived profile
is marked ``simulated`` so results computed from it say so.  :func:`scaled_to`
rescales a profile to a measured end-to-end latency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from onnx_sched.profiling.profiles import CLASSES, DeviceProfile, ProfileSet, TransferModel

__all__ = ["SIMULATED_PRESETS", "add_simulated", "derive_profile", "scaled_to"]


def derive_profile(base: DeviceProfile, name: str, kind: str, class_speedup: Mapping[str, float],
                   extra_overhead_s: float, full_name: str = "", notes: str = "") -> DeviceProfile:
    """A *simulated* device: ``base`` times divided by a per-class speed-up plus a
    per-op launch overhead.  The factors are data in the result (and in the file)."""
    for cls, s in class_speedup.items():
        if cls not in CLASSES or not s > 0:
            raise ValueError(f"derive_profile: speed-up for class {cls!r} must be > 0 and class one of {CLASSES}")
    return replace(base, name=name, kind=kind, full_name=full_name or f"simulated {kind} from {base.name}",
                   simulated=True, class_speedup=dict(class_speedup), extra_overhead_s=float(extra_overhead_s),
                   total_seconds=None, notes=notes)


# Documented scaling factors for simulated Intel GPUs, relative to a measured CPU
# profile (orders of magnitude from public specs: an Iris Xe class iGPU has ~2x
# the GEMM throughput of a client CPU and shares its memory; an Arc A770 class
# dGPU ~6x, behind PCIe 4.0 x16).  Every op also pays a kernel-launch overhead.
SIMULATED_PRESETS: dict[str, dict[str, Any]] = {
    "igpu": {
        "name": "GPU.0", "full_name": "simulated Intel iGPU (Iris Xe class)",
        "class_speedup": {"compute": 2.0, "reduce": 1.5, "elementwise": 1.2, "data": 0.8},
        "extra_overhead_s": 15e-6,
        "transfer": TransferModel(20e-6, 20e9),  # shared memory: map/unmap cost, no PCIe
    },
    "dgpu": {
        "name": "GPU.1", "full_name": "simulated Intel dGPU (Arc A770 class)",
        "class_speedup": {"compute": 6.0, "reduce": 3.0, "elementwise": 3.0, "data": 1.0},
        "extra_overhead_s": 25e-6,
        "transfer": TransferModel(30e-6, 12e9),  # PCIe 4.0 x16, effective
    },
}


def add_simulated(ps: ProfileSet, kinds: Sequence[str], base: str | None = None) -> ProfileSet:
    """``ps`` plus simulated devices (``igpu``/``dgpu`` presets) derived from its host
    (or ``base``) profile, with host<->device transfers from the presets and
    GPU<->GPU transfers through the host (sum of both legs)."""
    by = {d.name: d for d in ps.devices}
    src = by.get(base or ps.host)
    if src is None:
        raise ValueError(f"add_simulated: no base profile {base or ps.host!r}")
    devices = list(ps.devices)
    transfers = dict(ps.transfers)
    added: list[tuple[str, TransferModel]] = []
    for kind in kinds:
        preset = SIMULATED_PRESETS.get(kind)
        if preset is None:
            raise ValueError(f"unknown simulated device kind {kind!r}; choose from {sorted(SIMULATED_PRESETS)}")
        dev = derive_profile(src, preset["name"], kind, preset["class_speedup"], preset["extra_overhead_s"],
                             preset["full_name"], notes=f"simulated from {src.name} by SIMULATED_PRESETS[{kind!r}]")
        devices.append(dev)
        tm = preset["transfer"]
        transfers[(src.name, dev.name)] = tm
        transfers[(dev.name, src.name)] = tm
        for other, otm in added:
            via = TransferModel(tm.latency_s + otm.latency_s, 1.0 / (1.0 / tm.bandwidth_Bps + 1.0 / otm.bandwidth_Bps))
            transfers[(dev.name, other)] = via
            transfers[(other, dev.name)] = via
        added.append((dev.name, tm))
    return ProfileSet(tuple(devices), transfers, ps.default_transfer, ps.host)


def scaled_to(profile: DeviceProfile, seconds: float, note: str = "") -> DeviceProfile:
    """``profile`` with its per-op times scaled so they sum to ``seconds``: e.g. a profile taken
    with graph optimizations off (one event per ONNX node) calibrated to the measured latency of
    the optimized model, so a planner weighs op times against transfer costs at the right scale."""
    total = float(sum(profile.op_seconds.values()))
    if total <= 0 or seconds <= 0:
        raise ValueError(f"scaled_to: need positive times, profile sums to {total}, target {seconds}")
    k = seconds / total
    return replace(profile, op_seconds={n: t * k for n, t in profile.op_seconds.items()},
                   flops_per_s={c: r / k for c, r in profile.flops_per_s.items()}, op_overhead_s=profile.op_overhead_s * k,
                   total_seconds=seconds, notes=(profile.notes + f"; scaled x{k:.3f} to {seconds * 1e3:.3f} ms {note}").strip())
