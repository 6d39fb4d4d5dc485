"""The makespan problem: what ops cost on which units, and how to build it from a graph and machines.

A :class:`MakespanProblem` holds, for ``n`` ops and ``P`` resource pools
("units": machine types or devices),

* ``durations[v, p]``: how long op ``v`` runs on unit ``p`` (``inf`` = cannot);
* ``demand[v]``: resource units ``v`` holds while it runs; ``capacity[p]``;
* ``edge_bytes``: bytes op ``v`` reads from each predecessor (aligned with
  ``graph.op_preds``), and per-unit-pair ``latency`` / ``inv_bandwidth``: a
  tensor read on another device than its producer's arrives
  ``latency + bytes / bandwidth`` after its producer finishes.  Links do not
  serialize transfers (latency-bandwidth model without contention), so a tensor
  moved to a device arrives at the same time for every consumer there and is
  *charged once per (tensor, destination device)* in the transfer totals.

Machine types (paper 001) are the special case where every op may run on one
unit only and there are no links.  Start times are floats in the durations' unit
(seconds for roofline and profiles, abstract units for synthetic graphs).

:func:`makespan_problem` builds one from synthetic attributes, an array, a
roofline model or a duration file (read by :mod:`onnx_sched.profiling.durations`);
:func:`problem_of` is how a pass gets it from its context.  The problem is
immutable; derived data (topological order, kernel arrays, the lower bound) is
memoized per problem by :func:`_cached`.  Everything else in this package takes
a problem, so this module imports none of its siblings.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_sched.dag import kahn_order
from onnx_sched.graph import Graph
from onnx_sched.machines import Machines, machine_types
from onnx_sched.profiling.durations import is_profile_set, load_profile, profile_set_durations

__all__ = ["MakespanProblem", "makespan_problem", "problem_from_attrs", "problem_of"]

INF = math.inf


@dataclass(frozen=True, eq=False)
class MakespanProblem:
    """Everything a makespan pass needs besides the graph's structure (see module docstring)."""

    graph: Graph
    machines: Machines
    durations: np.ndarray  # float64 (n, P), inf where an op cannot run
    demand: np.ndarray  # int64 (n,)
    capacity: np.ndarray  # int64 (P,)
    edge_bytes: np.ndarray  # float64, aligned with graph.op_preds.indices
    latency: np.ndarray  # float64 (P, P), 0 on the diagonal
    inv_bandwidth: np.ndarray  # float64 (P, P), seconds per byte, 0 on the diagonal
    source: str = "array"  # where durations came from: attrs / roofline / profile / array
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def in_seconds(self) -> bool:
        """Whether durations are seconds (a roofline or profiles); a caller's array or synthetic attributes have no
        unit."""
        return self.source in ("roofline", "profile")

    def __post_init__(self) -> None:
        n, p = self.graph.n_ops, len(self.machines.units)
        d = np.ascontiguousarray(self.durations, dtype=np.float64)
        if d.shape != (n, p):
            raise ValueError(f"durations have shape {d.shape}, expected ({n}, {p}) for {n} ops and {p} units")
        if np.isnan(d).any() or (d < 0).any():
            raise ValueError("durations must be >= 0 (inf marks a unit an op cannot use)")
        bad = np.flatnonzero(~np.isfinite(d).any(axis=1)) if n else np.zeros(0, np.int64)
        if len(bad):
            names = [self.graph.op_names[i] for i in bad[:5]]
            raise ValueError(f"{len(bad)} ops can run on no {self.machines.unit_word()}: {names}")
        dem = np.ascontiguousarray(self.demand, dtype=np.int64)
        cap = np.ascontiguousarray(self.capacity, dtype=np.int64)
        if dem.shape != (n,) or cap.shape != (p,):
            raise ValueError(f"demand/capacity shapes {dem.shape}/{cap.shape}, expected ({n},)/({p},)")
        if n and dem.min() <= 0:
            raise ValueError("every op needs a positive resource demand")
        allowed = np.isfinite(d)
        fits = (dem[:, None] <= cap[None, :]) & allowed
        bad = np.flatnonzero(~fits.any(axis=1)) if n else np.zeros(0, np.int64)
        if len(bad):
            v = int(bad[0])
            raise ValueError(
                f"op {self.graph.op_names[v]!r} needs {dem[v]} resource units, more than any unit it may use offers"
            )
        for name, arr in (("durations", d), ("demand", dem), ("capacity", cap)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        for name in ("edge_bytes", "latency", "inv_bandwidth"):
            arr = np.ascontiguousarray(getattr(self, name), dtype=np.float64)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "_cache", {})  # derived data; not a field, so replace() starts afresh

    @property
    def n_ops(self) -> int:
        return self.graph.n_ops

    @property
    def n_units(self) -> int:
        return len(self.machines.units)

    @property
    def kind(self) -> str:
        return self.machines.kind

    @property
    def device_names(self) -> tuple[str, ...]:
        """Unit names, indexed by ``Schedule.placement`` values."""
        return self.machines.names

    @property
    def allowed(self) -> np.ndarray:
        return np.isfinite(self.durations)

    @property
    def fixed_unit(self) -> np.ndarray | None:
        """The one unit of every op when each op has exactly one (machine types), else ``None``."""
        allowed = self.allowed
        if (allowed.sum(axis=1) == 1).all():
            return np.argmax(allowed, axis=1).astype(np.int64)
        return None

    @property
    def has_transfers(self) -> bool:
        return bool((self.latency > 0).any() or (self.inv_bandwidth > 0).any())

    def min_durations(self) -> np.ndarray:
        return self.durations.min(axis=1)

    def mean_durations(self) -> np.ndarray:
        """Mean duration over the units an op may use (HEFT's ``w-bar``)."""
        d = np.where(self.allowed, self.durations, 0.0)
        return d.sum(axis=1) / self.allowed.sum(axis=1)

    def total_work(self) -> float:
        """Sum of op durations on their fastest unit: the numerator of paper 001's speedup."""
        return float(self.min_durations().sum())


def _edge_bytes(graph: Graph) -> np.ndarray:
    """Bytes each op reads from each predecessor, aligned with ``graph.op_preds``."""
    preds = graph.op_preds
    out = np.zeros(len(preds.indices), dtype=np.float64)
    prod = graph.tensor_producer
    for v in range(graph.n_ops):
        lo, hi = preds.indptr[v], preds.indptr[v + 1]
        if lo == hi:
            continue
        pos = {int(u): lo + k for k, u in enumerate(preds.indices[lo:hi])}
        for t in set(graph.op_inputs.row(v).tolist()):
            u = int(prod[t])
            if u in pos:
                out[pos[u]] += float(graph.tensor_bytes[t])
    return out


def _links(machines: Machines) -> tuple[np.ndarray, np.ndarray]:
    p = len(machines.units)
    lat = np.zeros((p, p))
    inv = np.zeros((p, p))
    for (a, b), link in machines.links.items():
        lat[a, b] = link.latency
        inv[a, b] = 1.0 / link.bandwidth
    return lat, inv


def _profile_set_durations(graph: Graph, machines: Machines, path: str | os.PathLike) -> np.ndarray:
    """Per-op seconds from a measured / simulated device profile set (its rate model prices unprofiled ops).

    Units are matched by name; a unit the profile set lacks needs roofline numbers.
    """
    mat, known = profile_set_durations(graph, machines.names, path)
    d = np.empty((graph.n_ops, len(machines.units)))
    roof = None
    for j, u in enumerate(machines.names):
        if u in known:
            d[:, j] = mat[:, known.index(u)]
        else:
            roof = _roofline(graph, machines) if roof is None else roof
            d[:, j] = roof[:, j]
    return d


def _roofline(graph: Graph, machines: Machines) -> np.ndarray:
    """``overhead + max(flops / peak_flops, bytes / mem_bandwidth)`` per op and unit."""
    n, p = graph.n_ops, len(machines.units)
    d = np.empty((n, p))
    for j, u in enumerate(machines.units):
        if u.peak_flops is None or u.mem_bandwidth is None:
            raise ValueError(
                f"{machines.unit_word()} {u.name!r} has no peak_flops / mem_bandwidth: give a duration profile"
                " (machine file 'profile') or synthetic durations"
            )
        d[:, j] = u.overhead + np.maximum(graph.op_flops / u.peak_flops, graph.op_bytes / u.mem_bandwidth)
    return d


def _restrict(graph: Graph, machines: Machines, d: np.ndarray) -> np.ndarray:
    """Mark units an op may not use with ``inf`` (machine types / device ``supports``)."""
    d = d.copy()
    if machines.kind == "types":
        unit = np.fromiter((machines.type_of(t) for t in graph.op_types), dtype=np.int64, count=graph.n_ops)
        mask = np.ones_like(d, dtype=bool)
        mask[np.arange(graph.n_ops), unit] = False
        d[mask] = INF
    else:
        for j, ok in machines.supports.items():
            if "*" in ok:
                continue
            cannot = np.fromiter((t not in ok for t in graph.op_types), dtype=bool, count=graph.n_ops)
            d[cannot, j] = INF
    return d


def makespan_problem(
    graph: Graph,
    machines: Machines,
    durations: Any = None,
    demand: np.ndarray | None = None,
) -> MakespanProblem:
    """Build the makespan problem for ``graph`` on ``machines``.

    ``durations`` may be

    * ``None``: the machine file's ``profile`` if it names one, else the
      roofline model from ``graph.op_flops`` / ``op_bytes`` and per-unit
      ``peak_flops`` / ``mem_bandwidth`` / ``overhead``;
    * a :class:`~onnx_sched.synth.attrs.MakespanAttrs` (synthetic graphs: its
      machine types, durations and demands; its capacities must match);
    * an array ``(n,)`` (same on every allowed unit) or ``(n, P)``;
    * a profile mapping ``op name -> {unit name: seconds}`` (or one number), or a
      path to a profile JSON (:func:`~onnx_sched.profiling.load_profile`); ops missing from it fall back
      to the roofline model when the machine file has its numbers.

    Raises ``ValueError`` when an op can run nowhere or a demand exceeds capacity.
    """
    n, p = graph.n_ops, len(machines.units)
    dem = np.ones(n, np.int64) if demand is None else np.asarray(demand, np.int64)
    source = "array"
    if durations is None and machines.profile is not None:
        durations = machines.profile
    if durations is None:
        d = _restrict(graph, machines, _roofline(graph, machines))
        source = "roofline"
    elif hasattr(durations, "machine_type") and hasattr(durations, "capacities"):
        attrs = durations
        if machines.kind != "types" or tuple(attrs.capacities) != machines.capacities:
            raise ValueError(
                f"synthetic attributes have capacities {tuple(attrs.capacities)}, machine description "
                f"{machines.name!r} has {machines.kind} {machines.capacities}"
            )
        d = np.full((n, p), INF)
        d[np.arange(n), np.asarray(attrs.machine_type)] = np.asarray(attrs.durations, np.float64)
        dem = np.asarray(attrs.demand, np.int64) if demand is None else dem
        source = "attrs"
    elif isinstance(durations, (str, os.PathLike)) and is_profile_set(durations):
        d = _restrict(graph, machines, _profile_set_durations(graph, machines, durations))
        source = "profile"
    elif isinstance(durations, (str, os.PathLike, Mapping)):
        prof = load_profile(durations) if isinstance(durations, (str, os.PathLike)) else durations
        d = np.full((n, p), np.nan)
        missing = []
        for v, name in enumerate(graph.op_names):
            entry = prof.get(name)
            if entry is None:
                missing.append(v)
            elif isinstance(entry, Mapping):
                unknown = set(entry) - set(machines.names)
                if unknown:
                    raise ValueError(f"profile entry {name!r} names unknown units {sorted(unknown)}")
                d[v] = [entry.get(u, INF) for u in machines.names]
            else:
                d[v] = float(entry)
        if missing:
            if all(u.peak_flops is not None and u.mem_bandwidth is not None for u in machines.units):
                d[missing] = _roofline(graph, machines)[missing]
            else:
                raise ValueError(
                    f"profile has no duration for {len(missing)} ops (first: {graph.op_names[missing[0]]!r}) and "
                    "the machine description has no roofline numbers to estimate them"
                )
        d = _restrict(graph, machines, d)
        source = "profile"
    else:
        arr = np.asarray(durations, dtype=np.float64)
        if arr.shape == (n,):
            arr = np.repeat(arr[:, None], p, axis=1)
        if arr.shape != (n, p):
            raise ValueError(f"durations array has shape {arr.shape}, expected ({n},) or ({n}, {p})")
        d = _restrict(graph, machines, arr) if machines.kind == "types" and machines.op_types else arr
    lat, inv = _links(machines)
    return MakespanProblem(
        graph=graph,
        machines=machines,
        durations=d,
        demand=dem,
        capacity=np.asarray(machines.capacities, np.int64),
        edge_bytes=_edge_bytes(graph),
        latency=lat,
        inv_bandwidth=inv,
        source=source,
    )


def problem_from_attrs(graph: Graph, attrs: Any) -> MakespanProblem:
    """Machine-type problem straight from synthetic :class:`MakespanAttrs` (paper 001 setting)."""
    return makespan_problem(graph, machine_types(tuple(attrs.capacities)), attrs)


def _cached(problem: MakespanProblem, key: str, fn):  # noqa: ANN001, ANN202
    """Per-problem memo (the problem is immutable, so results never go stale)."""
    cache = problem._cache  # type: ignore[attr-defined]
    if key not in cache:
        cache[key] = fn()
    return cache[key]


def _topo(problem: MakespanProblem) -> np.ndarray:
    return _cached(problem, "_topo", lambda: kahn_order(problem.graph))


def problem_of(graph: Graph, ctx: Any) -> MakespanProblem:
    """The :class:`MakespanProblem` a makespan pass got through ``ctx.problem``, checked against ``graph``."""
    problem = getattr(ctx, "problem", None)
    if problem is None:
        raise ValueError("makespan passes need a machine description: PassContext(problem=makespan_problem(...))")
    if not isinstance(problem, MakespanProblem):
        raise ValueError(f"ctx.problem is a {type(problem).__name__}, expected a MakespanProblem")
    if problem.n_ops != graph.n_ops:
        raise ValueError(f"ctx.problem has {problem.n_ops} ops, the graph {graph.n_ops}")
    return problem
