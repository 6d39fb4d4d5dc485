"""Per-op cost from a device profile: fit a rate model to measurements, price the ops of any graph.

:func:`fit_rates` explains measured op times by per-class FLOP/s, a memory
bandwidth and a per-op overhead; :func:`op_seconds_vector` /
:func:`op_seconds_matrix` price every op of a graph on one / every device of a
:class:`~onnx_sched.profiling.profiles.ProfileSet`, using the measurements where
the profile was taken on this very model and the rate model elsewhere, then a
simulated device's speed-ups.  The placement and makespan cost models take
their op times from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.profiling.profiles import CLASSES, DeviceProfile, ProfileSet, op_class

__all__ = ["fit_rates", "measured_on", "measured_ops", "op_seconds_matrix", "op_seconds_vector"]


def fit_rates(graph: Graph, op_seconds: Mapping[str, float]) -> dict[str, Any]:
    """Rates that explain measured op times: per-class FLOP/s (median of ops with
    measurable work), memory bytes/s, and the per-op overhead (10th percentile).

    Returns keyword arguments for :class:`DeviceProfile`.
    """
    idx = {n: i for i, n in enumerate(graph.op_names)}
    times = {idx[n]: float(t) for n, t in op_seconds.items() if n in idx and t > 0}
    if not times:
        return {}
    ts = np.array(list(times.values()))
    overhead = float(np.percentile(ts, 10))
    rates: dict[str, float] = {}
    for cls in CLASSES:
        vals = [graph.op_flops[i] / max(t - overhead, 1e-9) for i, t in times.items()
                if op_class(graph.op_types[i]) == cls and graph.op_flops[i] > 0]
        if vals:
            rates[cls] = float(np.median(vals))
    bw = [graph.op_bytes[i] / max(t - overhead, 1e-9) for i, t in times.items()
          if op_class(graph.op_types[i]) != "compute" and graph.op_bytes[i] > 0]
    out: dict[str, Any] = {"flops_per_s": rates, "op_overhead_s": overhead}
    if bw:
        out["bytes_per_s"] = float(np.median(bw))
    return out


def _rate_seconds(graph: Graph, prof: DeviceProfile) -> np.ndarray:
    """Rate-model seconds per op (no speed-ups applied)."""
    n = graph.n_ops
    out = np.empty(n)
    default_flops = prof.flops_per_s.get("compute", 50e9)
    for i in range(n):
        cls = op_class(graph.op_types[i])
        rate = prof.flops_per_s.get(cls, default_flops if cls == "compute" else 5e9)
        out[i] = prof.op_overhead_s + max(graph.op_flops[i] / rate, graph.op_bytes[i] / prof.bytes_per_s)
    return out


def op_seconds_vector(graph: Graph, prof: DeviceProfile) -> np.ndarray:
    """Seconds per op of ``graph`` on ``prof``'s device.

    Ops named in ``prof.op_seconds`` use the measurement when the profile was
    measured on this model (:func:`measured_on`); others use the fitted rate model.
    Simulated speed-ups and extra overhead are applied last.
    """
    out = _rate_seconds(graph, prof)
    if measured_on(graph, prof):
        for i, name in enumerate(graph.op_names):
            t = prof.op_seconds.get(name)
            if t is not None:
                out[i] = float(t)
    if prof.class_speedup or prof.extra_overhead_s:
        for i in range(graph.n_ops):
            s = float(prof.class_speedup.get(op_class(graph.op_types[i]), 1.0))
            out[i] = out[i] / s + prof.extra_overhead_s
    return out


def measured_on(graph: Graph, prof: DeviceProfile) -> bool:
    """Whether ``prof``'s op times were measured on ``graph``: the profile names no model or this one, or it
    times exactly this graph's ops (the same model read from a file of another name, or handed over in memory
    by a pipeline, whose graph carries the model's own name).  A partial overlap of op names is not enough:
    unnamed ops get generic names (``Relu:y``) that another model can share."""
    if not prof.op_seconds:
        return False
    return not prof.model or prof.model == graph.name or set(prof.op_seconds) == set(graph.op_names)


def measured_ops(graph: Graph, prof: DeviceProfile) -> int:
    """How many of ``graph``'s ops take their time from ``prof``'s measurements (the rest from its fitted rates):
    none when the profile was measured on another model (:func:`measured_on`)."""
    if not measured_on(graph, prof):
        return 0
    return sum(name in prof.op_seconds for name in graph.op_names)


def op_seconds_matrix(graph: Graph, profiles: ProfileSet) -> np.ndarray:
    """``(n_ops, n_devices)`` seconds of every op on every device."""
    if not profiles.devices:
        return np.zeros((graph.n_ops, 0))
    return np.stack([op_seconds_vector(graph, p) for p in profiles.devices], axis=1)
