"""Makespan model: problem data, list scheduling, evaluation and bounds (paper 001 section 2).

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

List scheduling, machine types (Graham 1969, paper 001 section 2.2): the
time-driven ("parallel") scheme.  At each decision time the ready ops are
started in priority order while their machine type has free resources; then
time moves to the earliest finish among running ops.  ``_list_types`` is the
numba kernel (about a millisecond for a 1000-op graph).

List scheduling, devices: the serial scheme with earliest-finish-time device
choice; ops are taken in priority order among those whose predecessors are
placed, each on the device (stream) where it finishes first, optionally filling
idle gaps (insertion, as HEFT) and adding an optimistic cost table term (PEFT).
``_list_devices`` is its numba kernel.

Priorities follow paper 001: higher value = scheduled earlier.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numba
import numpy as np

from onnx_sched.dag import kahn_order
from onnx_sched.dag_kernels import release_successors
from onnx_sched.graph import Graph
from onnx_sched.machines import Machines, machine_types
from onnx_sched.schedule import Schedule

__all__ = [
    "MakespanProblem",
    "MakespanResult",
    "cp_logits",
    "cp_priority",
    "evaluate",
    "gumbel_priorities",
    "list_makespans",
    "list_schedule",
    "load_profile",
    "lower_bound",
    "make_schedule",
    "makespan_problem",
    "mopnr_priority",
    "problem_from_attrs",
    "problem_of",
    "run_list",
    "spt_priority",
    "upward_rank",
    "validate",
]

INF = math.inf


# --------------------------------------------------------------------------- problem
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


@dataclass(frozen=True, eq=False)
class MakespanResult:
    """Score of a schedule: ``speedup = total work / makespan`` (paper 001)."""

    makespan: float
    speedup: float
    lower_bound: float
    start: np.ndarray
    placement: np.ndarray
    transfer_bytes: float = 0.0
    transfers: int = 0


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


def load_profile(path: str | os.PathLike) -> dict[str, dict[str, float] | float]:
    """Read a per-op duration profile: ``{"unit": "s"|"ms"|"us", "ops": {op: {unit: t} | t}}``.

    Returns durations in seconds; ``ValueError`` names the file and the bad entry.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{p}: cannot read profile ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("ops"), Mapping):
        raise ValueError(f"{p}: a profile is an object with an 'ops' mapping (op name -> durations)")
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6}.get(data.get("unit", "s"))
    if scale is None:
        raise ValueError(f"{p}: 'unit' must be one of s, ms, us; got {data.get('unit')!r}")
    out: dict[str, dict[str, float] | float] = {}
    for op, entry in data["ops"].items():
        if isinstance(entry, Mapping):
            row = {}
            for unit, t in entry.items():
                if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0 or not math.isfinite(t):
                    raise ValueError(f"{p}: ops[{op!r}][{unit!r}] must be a finite number >= 0, got {t!r}")
                row[str(unit)] = float(t) * scale
            out[str(op)] = row
        elif isinstance(entry, (int, float)) and not isinstance(entry, bool) and math.isfinite(entry) and entry >= 0:
            out[str(op)] = float(entry) * scale
        else:
            raise ValueError(f"{p}: ops[{op!r}] must be a number or a unit -> number object, got {entry!r}")
    return out


def _is_profile_set(path: str | os.PathLike) -> bool:
    """True for a device-profile file of :mod:`onnx_sched.profiling` (``format: onnx-sched-profiles/1``)."""
    from onnx_sched.profiling import FORMAT

    try:
        head = Path(path).read_text(encoding="utf-8")[:4096]
    except OSError:
        return False
    return f'"{FORMAT}"' in head


def _profile_set_durations(graph: Graph, machines: Machines, path: str | os.PathLike) -> np.ndarray:
    """Per-op seconds from a measured / simulated device profile set (its rate model prices unprofiled ops).

    Units are matched by name; a unit the profile set lacks needs roofline numbers.
    """
    from onnx_sched.profiling import load_profiles, op_seconds_matrix

    try:
        ps = load_profiles(path)
    except Exception as exc:  # OnnxSchedError: keep the one-line message
        raise ValueError(str(exc)) from None
    known = [u for u in machines.names if u in ps.names]
    if not known:
        raise ValueError(f"{path}: profiles cover devices {list(ps.names)}, none of {list(machines.names)}")
    sub = ps.subset(known)
    mat = op_seconds_matrix(graph, sub)
    d = np.empty((graph.n_ops, len(machines.units)))
    roof = None
    for j, u in enumerate(machines.names):
        if u in known:
            d[:, j] = mat[:, list(sub.names).index(u)]
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
      path to a profile JSON (:func:`load_profile`); ops missing from it fall back
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
    elif isinstance(durations, (str, os.PathLike)) and _is_profile_set(durations):
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


# ------------------------------------------------------------------- priorities
def _cached(problem: MakespanProblem, key: str, fn):  # noqa: ANN001, ANN202
    """Per-problem memo (the problem is immutable, so results never go stale)."""
    cache = problem._cache  # type: ignore[attr-defined]
    if key not in cache:
        cache[key] = fn()
    return cache[key]


def _topo(problem: MakespanProblem) -> np.ndarray:
    return _cached(problem, "_topo", lambda: kahn_order(problem.graph))


@numba.njit(cache=True)
def _upward(topo, w, pred_ptr, pred_idx, ebytes, lat_bar, inv_bar):  # noqa: ANN001, ANN202
    n = len(w)
    rank = np.empty(n)
    best = np.zeros(n)
    for i in range(n - 1, -1, -1):
        v = topo[i]
        rank[v] = w[v] + best[v]
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[k]
            c = lat_bar + ebytes[k] * inv_bar + rank[v]
            if c > best[u]:
                best[u] = c
    return rank


@numba.njit(cache=True)
def _downward(topo, w, pred_ptr, pred_idx):  # noqa: ANN001, ANN202
    """Longest path from a source to each op, the op included."""
    n = len(w)
    out = np.empty(n)
    for i in range(n):
        v = topo[i]
        b = 0.0
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            if out[pred_idx[k]] > b:
                b = out[pred_idx[k]]
        out[v] = w[v] + b
    return out


def upward_rank(problem: MakespanProblem, durations: np.ndarray | None = None, comm: bool = True) -> np.ndarray:
    """HEFT upward rank: ``w(v) + max_succ (c(v, s) + rank(s))`` with mean durations and mean transfer cost.

    With ``comm=False`` (or no links) this is the critical-path length from the op to a sink.
    """
    w = problem.mean_durations() if durations is None else np.asarray(durations, np.float64)
    lat_bar, inv_bar = _mean_comm(problem) if (comm and problem.has_transfers) else (0.0, 0.0)
    preds = problem.graph.op_preds
    return _upward(_topo(problem), np.ascontiguousarray(w, np.float64), preds.indptr, preds.indices,
                   problem.edge_bytes, lat_bar, inv_bar)


def _mean_comm(problem: MakespanProblem) -> tuple[float, float]:
    """Mean latency and seconds-per-byte over ordered pairs of distinct units (HEFT's ``c-bar``)."""
    p = problem.n_units
    if p < 2:
        return 0.0, 0.0
    off = ~np.eye(p, dtype=bool)
    return float(problem.latency[off].mean()), float(problem.inv_bandwidth[off].mean())


def cp_priority(problem: MakespanProblem) -> np.ndarray:
    """Critical path (paper 001 D.1): longest duration path from the op to a sink (incl. transfers)."""
    return upward_rank(problem)


def mopnr_priority(problem: MakespanProblem) -> np.ndarray:
    """Most operations remaining (paper 001 D.1): ops on the longest path to a sink; ties by critical path."""
    ops = upward_rank(problem, np.ones(problem.n_ops), comm=False)
    cp = cp_priority(problem)
    return ops + cp / (2.0 * max(float(cp.max(initial=0.0)), 1e-300))


def spt_priority(problem: MakespanProblem) -> np.ndarray:
    """Shortest processing time (paper 001 D.1): inverse of the op's (mean) duration."""
    return 1.0 / np.maximum(problem.mean_durations(), 1e-300)


def cp_logits(problem: MakespanProblem, temperature: float = 0.3) -> np.ndarray:
    """Critical path over ``temperature`` x the mean op duration, as logits for Gumbel sampling.

    With unit Gumbel noise, ops whose critical paths differ by less than about
    ``temperature`` mean durations swap often.  0.3 was the best of 0.03 - 3 for
    best-of-256 sampling on 1000-op ER / SBM graphs (3 seeds each; on layered
    graphs any noise lost about 1 % to plain list-cp).
    """
    cp = cp_priority(problem)
    scale = float(problem.mean_durations().mean()) or 1.0
    return cp / (temperature * scale)


def gumbel_priorities(logits: np.ndarray, rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` priority vectors ``logits + Gumbel noise`` (paper 001 eq. 7, Gumbel-top-k)."""
    return np.asarray(logits, np.float64)[None, :] + rng.gumbel(size=(k, len(logits)))


def _rank_keys(priority: np.ndarray) -> np.ndarray:
    """Position of each op when sorted by decreasing priority, ties by op id (smaller key = first)."""
    pr = np.asarray(priority, dtype=np.float64)
    order = np.lexsort((np.arange(len(pr)), -pr))
    key = np.empty(len(pr), np.int64)
    key[order] = np.arange(len(pr))
    return key


# ----------------------------------------------------------------------- kernels
@numba.njit(cache=True)
def _heap_push(hf, hv, nh, f, v):  # noqa: ANN001, ANN202
    i = nh
    hf[i] = f
    hv[i] = v
    while i > 0:
        parent = (i - 1) >> 1
        if hf[parent] > hf[i] or (hf[parent] == hf[i] and hv[parent] > hv[i]):
            hf[parent], hf[i] = hf[i], hf[parent]
            hv[parent], hv[i] = hv[i], hv[parent]
            i = parent
        else:
            break
    return nh + 1


@numba.njit(cache=True)
def _heap_pop(hf, hv, nh):  # noqa: ANN001, ANN202
    v = hv[0]
    nh -= 1
    hf[0] = hf[nh]
    hv[0] = hv[nh]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= nh:
            break
        c = left
        right = left + 1
        if right < nh and (hf[right] < hf[left] or (hf[right] == hf[left] and hv[right] < hv[left])):
            c = right
        if hf[c] < hf[i] or (hf[c] == hf[i] and hv[c] < hv[i]):
            hf[c], hf[i] = hf[i], hf[c]
            hv[c], hv[i] = hv[i], hv[c]
            i = c
        else:
            break
    return v, nh


@numba.njit(cache=True)
def _list_types(key, dur, unit, demand, cap, indeg0, succ_ptr, succ_idx, start):  # noqa: ANN001, ANN202
    """Time-driven list scheduling with one unit per op; fills ``start``; returns the makespan (-1 if stuck)."""
    n = len(key)
    indeg = indeg0.copy()
    free = cap.copy()
    ready = np.empty(n, np.int64)
    nr = 0
    for v in range(n):
        if indeg[v] == 0:
            ready[nr] = v
            nr += 1
    hf = np.empty(n, np.float64)
    hv = np.empty(n, np.int64)
    nh = 0
    t = 0.0
    done = 0
    makespan = 0.0
    keys = np.empty(n, np.int64)
    while done < n:
        if nr > 0:
            for j in range(nr):
                keys[j] = key[ready[j]]
            idx = np.argsort(keys[:nr])
            tmp = ready[:nr].copy()
            m = 0
            for j in idx:
                v = tmp[j]
                u = unit[v]
                if demand[v] <= free[u]:
                    free[u] -= demand[v]
                    start[v] = t
                    f = t + dur[v]
                    if f > makespan:
                        makespan = f
                    nh = _heap_push(hf, hv, nh, f, v)
                else:
                    ready[m] = v
                    m += 1
            nr = m
        if nh == 0:
            return -1.0
        t = hf[0]
        while nh > 0 and hf[0] <= t:
            v, nh = _heap_pop(hf, hv, nh)
            free[unit[v]] += demand[v]
            done += 1
            nr = release_successors(v, succ_ptr, succ_idx, indeg, ready, nr)
    return makespan


@numba.njit(cache=True)
def _list_types_batch(keys, dur, unit, demand, cap, indeg0, succ_ptr, succ_idx):  # noqa: ANN001, ANN202
    out = np.empty(keys.shape[0])
    start = np.empty(keys.shape[1])
    for i in range(keys.shape[0]):
        out[i] = _list_types(keys[i], dur, unit, demand, cap, indeg0, succ_ptr, succ_idx, start)
    return out


@numba.njit(cache=True)
def _list_devices(key, dur, cap, indeg0, succ_ptr, succ_idx, pred_ptr, pred_idx, ebytes, lat, inv,
                  insertion, oct_, start, place):  # noqa: ANN001, ANN202
    """Serial list scheduling with earliest-finish device choice; returns the makespan (-1 if stuck).

    Ops are taken in ``key`` order among those whose predecessors are placed.
    Each goes to the (device, stream) minimising ``finish + oct_[v, p]``; with
    ``insertion`` it may fill an idle gap between already placed ops.
    """
    n, P = dur.shape
    offs = np.zeros(P + 1, np.int64)
    for p in range(P):
        offs[p + 1] = offs[p] + cap[p]
    S = offs[P]
    ivs = np.empty((S, n + 1))
    ive = np.empty((S, n + 1))
    cnt = np.zeros(S, np.int64)
    finish = np.zeros(n)
    indeg = indeg0.copy()
    hf = np.empty(n, np.float64)
    hv = np.empty(n, np.int64)
    nh = 0
    for v in range(n):
        if indeg[v] == 0:
            nh = _heap_push(hf, hv, nh, float(key[v]), v)
    makespan = 0.0
    placed = 0
    while nh > 0:
        v, nh = _heap_pop(hf, hv, nh)
        best_score = np.inf
        best_f = np.inf
        best_s = -1
        best_t = 0.0
        best_p = -1
        for p in range(P):
            d = dur[v, p]
            if d == np.inf:
                continue
            ready_t = 0.0
            for k in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[k]
                pu = place[u]
                a = finish[u]
                if pu != p:
                    a += lat[pu, p] + ebytes[k] * inv[pu, p]
                if a > ready_t:
                    ready_t = a
            for s in range(offs[p], offs[p + 1]):
                c = cnt[s]
                if insertion:
                    cand = ready_t
                    for i in range(c):
                        if ivs[s, i] >= cand + d:
                            break
                        if ive[s, i] > cand:
                            cand = ive[s, i]
                else:
                    cand = ready_t
                    if c > 0 and ive[s, c - 1] > cand:
                        cand = ive[s, c - 1]
                f = cand + d
                score = f + oct_[v, p]
                if score < best_score or (score == best_score and f < best_f):
                    best_score = score
                    best_f = f
                    best_s = s
                    best_t = cand
                    best_p = p
        if best_s < 0:
            return -1.0
        s = best_s
        c = cnt[s]
        i = c
        while i > 0 and ivs[s, i - 1] > best_t:
            ivs[s, i] = ivs[s, i - 1]
            ive[s, i] = ive[s, i - 1]
            i -= 1
        ivs[s, i] = best_t
        ive[s, i] = best_f
        cnt[s] = c + 1
        start[v] = best_t
        finish[v] = best_f
        place[v] = best_p
        if best_f > makespan:
            makespan = best_f
        placed += 1
        for k in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[k]
            indeg[w] -= 1
            if indeg[w] == 0:
                nh = _heap_push(hf, hv, nh, float(key[w]), w)
    if placed < n:
        return -1.0
    return makespan


@numba.njit(cache=True)
def _list_devices_batch(keys, dur, cap, indeg0, succ_ptr, succ_idx, pred_ptr, pred_idx, ebytes, lat, inv,
                        insertion, oct_):  # noqa: ANN001, ANN202
    n = keys.shape[1]
    out = np.empty(keys.shape[0])
    start = np.empty(n)
    place = np.zeros(n, np.int64)
    for i in range(keys.shape[0]):
        out[i] = _list_devices(keys[i], dur, cap, indeg0, succ_ptr, succ_idx, pred_ptr, pred_idx, ebytes, lat, inv,
                               insertion, oct_, start, place)
    return out


# ----------------------------------------------------------------- list schedule
def _arrays(problem: MakespanProblem) -> dict[str, np.ndarray]:
    return _cached(problem, "_arrays", lambda: _build_arrays(problem))


def _build_arrays(problem: MakespanProblem) -> dict[str, np.ndarray]:
    g = problem.graph
    arrays = {
        "indeg": g.op_preds.lengths().astype(np.int64),
        "succ_ptr": g.op_succs.indptr.astype(np.int64),
        "succ_idx": g.op_succs.indices.astype(np.int64),
        "pred_ptr": g.op_preds.indptr.astype(np.int64),
        "pred_idx": g.op_preds.indices.astype(np.int64),
    }
    unit = problem.fixed_unit
    if unit is not None:
        arrays["unit"] = unit
        arrays["dur1"] = np.ascontiguousarray(problem.durations[np.arange(problem.n_ops), unit])
    return arrays


def _uses_time_driven(problem: MakespanProblem) -> bool:
    """Machine types without transfers: paper 001's time-driven list scheduling applies."""
    return problem.fixed_unit is not None and not problem.has_transfers


def run_list(
    problem: MakespanProblem,
    priority: np.ndarray,
    *,
    insertion: bool = False,
    oct_table: np.ndarray | None = None,
    serial: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """List-schedule ``problem`` by ``priority`` (higher first); returns ``(start, placement, makespan)``.

    Machine-type problems use the time-driven scheme of paper 001; problems with
    a device choice (or when ``serial`` / ``insertion`` / ``oct_table`` is given)
    use the serial earliest-finish scheme.
    """
    n = problem.n_ops
    a = _arrays(problem)
    key = _rank_keys(priority)
    start = np.zeros(n)
    use_serial = serial if serial is not None else not _uses_time_driven(problem)
    if insertion or oct_table is not None:
        use_serial = True
    if not use_serial:
        unit = a["unit"]
        ms = _list_types(key, a["dur1"], unit, problem.demand, problem.capacity, a["indeg"], a["succ_ptr"],
                         a["succ_idx"], start)
        place = unit.copy()
    else:
        if (problem.demand != 1).any():
            raise ValueError("serial / insertion list scheduling needs unit resource demands; use time-driven list-*")
        place = np.zeros(n, np.int64)
        oct_ = np.zeros((n, problem.n_units)) if oct_table is None else np.ascontiguousarray(oct_table, np.float64)
        ms = _list_devices(key, problem.durations, problem.capacity, a["indeg"], a["succ_ptr"], a["succ_idx"],
                           a["pred_ptr"], a["pred_idx"], problem.edge_bytes, problem.latency, problem.inv_bandwidth,
                           bool(insertion), oct_, start, place)
    if ms < 0:
        raise ValueError("list scheduling got stuck: an op can never start (resource demand above capacity?)")
    return start, place, float(ms)


def list_makespans(problem: MakespanProblem, priorities: np.ndarray) -> np.ndarray:
    """Makespan of list scheduling for each row of ``priorities`` (``(k, n)``), in one numba call."""
    pr = np.atleast_2d(np.asarray(priorities, np.float64))
    keys = np.empty(pr.shape, np.int64)
    for i in range(len(pr)):
        keys[i] = _rank_keys(pr[i])
    a = _arrays(problem)
    if _uses_time_driven(problem):
        out = _list_types_batch(keys, a["dur1"], a["unit"], problem.demand, problem.capacity, a["indeg"],
                                a["succ_ptr"], a["succ_idx"])
    else:
        oct_ = np.zeros((problem.n_ops, problem.n_units))
        out = _list_devices_batch(keys, problem.durations, problem.capacity, a["indeg"], a["succ_ptr"], a["succ_idx"],
                                  a["pred_ptr"], a["pred_idx"], problem.edge_bytes, problem.latency,
                                  problem.inv_bandwidth, False, oct_)
    if (out < 0).any():
        raise ValueError("list scheduling got stuck: an op can never start")
    return out


def list_schedule(problem: MakespanProblem, priority: np.ndarray, method: str = "list", **info: Any) -> Schedule:
    """A validated :class:`Schedule` from list scheduling by ``priority`` (higher first)."""
    start, place, _ = run_list(problem, priority)
    return make_schedule(problem, start, place, method, **info)


# ---------------------------------------------------------------- evaluation
def lower_bound(problem: MakespanProblem) -> float:
    """Max of the critical path (fastest units, no transfers) and work / capacity bounds.

    Work bounds: all work over all capacity, and for each unit the work of ops
    that can only run there over its capacity (per machine type, paper 001).
    """
    n = problem.n_ops
    if n == 0:
        return 0.0
    return float(_cached(problem, "_lower_bound", lambda: _lower_bound(problem)))


def _lower_bound(problem: MakespanProblem) -> float:
    mind = problem.min_durations()
    preds = problem.graph.op_preds
    cp = float(_downward(_topo(problem), mind, preds.indptr, preds.indices).max())
    work = mind * problem.demand
    total = float(work.sum()) / float(problem.capacity.sum())
    allowed = problem.allowed
    only = allowed.sum(axis=1) == 1
    per_unit = 0.0
    if only.any():
        unit = np.argmax(allowed, axis=1)
        for p in range(problem.n_units):
            sel = only & (unit == p)
            if sel.any():
                per_unit = max(per_unit, float(work[sel].sum()) / float(problem.capacity[p]))
    return max(cp, total, per_unit)


def _tolerance(problem: MakespanProblem, horizon: float) -> float:
    return 1e-9 * max(1.0, abs(horizon))


def validate(problem: MakespanProblem, start: np.ndarray, placement: np.ndarray) -> float:
    """Check a timed schedule; return its makespan or raise ``ValueError`` saying what is violated.

    Checks: every op on a unit it may use, starts >= 0, precedence plus transfer
    delays, and at no time more resource use on a unit than its capacity.
    """
    g = problem.graph
    n = g.n_ops
    start = np.asarray(start, np.float64)
    place = np.asarray(placement, np.int64)
    if start.shape != (n,) or place.shape != (n,):
        raise ValueError(f"schedule has {start.shape} start times and {place.shape} placements for {n} ops")
    if n == 0:
        return 0.0
    if place.min() < 0 or place.max() >= problem.n_units:
        raise ValueError(f"placement outside [0, {problem.n_units})")
    dur = problem.durations[np.arange(n), place]
    if not np.isfinite(dur).all():
        v = int(np.flatnonzero(~np.isfinite(dur))[0])
        raise ValueError(f"op {g.op_names[v]!r} placed on {problem.device_names[place[v]]!r}, which cannot run it")
    if not np.isfinite(start).all() or start.min() < 0:
        raise ValueError("start times must be finite and >= 0")
    finish = start + dur
    makespan = float(finish.max())
    tol = _tolerance(problem, makespan)
    preds = g.op_preds
    vs = np.repeat(np.arange(n), preds.lengths())
    us = preds.indices
    pu, pv = place[us], place[vs]
    delay = np.where(pu != pv, problem.latency[pu, pv] + problem.edge_bytes * problem.inv_bandwidth[pu, pv], 0.0)
    ready = finish[us] + delay
    late = np.flatnonzero(start[vs] < ready - tol)
    if len(late):
        k = int(late[0])
        u, v = int(us[k]), int(vs[k])
        raise ValueError(
            f"op {g.op_names[v]!r} starts at {start[v]:.6g} before its input from {g.op_names[u]!r} "
            f"is ready at {ready[k]:.6g}"
        )
    for p in range(problem.n_units):
        sel = np.flatnonzero((place == p) & (dur > 0))
        if not len(sel):
            continue
        times = np.concatenate([start[sel], finish[sel]])
        delta = np.concatenate([problem.demand[sel], -problem.demand[sel]])
        # at equal times apply releases before acquisitions; treat near-equal times as equal
        order = np.lexsort((delta, np.round(times / tol) if tol > 0 else times))
        use = np.cumsum(delta[order])
        if use.max() > problem.capacity[p]:
            at = float(times[order][int(np.argmax(use))])
            raise ValueError(
                f"{problem.machines.unit_word()} {problem.device_names[p]!r} uses {int(use.max())} resource units "
                f"at time {at:.6g}, capacity {int(problem.capacity[p])}"
            )
    return makespan


def _transfers(problem: MakespanProblem, placement: np.ndarray) -> tuple[float, int]:
    """Bytes and count of tensor moves, once per (tensor, destination device)."""
    if problem.n_units < 2 or not problem.has_transfers:
        return 0.0, 0
    g = problem.graph
    moved: set[tuple[int, int]] = set()
    total = 0.0
    for v in range(g.n_ops):
        for t in set(g.op_inputs.row(v).tolist()):
            u = int(g.tensor_producer[t])
            if u >= 0 and placement[u] != placement[v] and (t, int(placement[v])) not in moved:
                moved.add((t, int(placement[v])))
                total += float(g.tensor_bytes[t])
    return total, len(moved)


def evaluate(problem: MakespanProblem, schedule: Schedule) -> MakespanResult:
    """Score ``schedule``: validated makespan, speedup, bound and transfers.

    A schedule without ``start`` times (e.g. a peak-memory order) is list
    scheduled with its order as the priority.  ``ValueError`` if it is invalid.
    """
    n = problem.n_ops
    if schedule.start is None:
        prio = np.empty(n)
        prio[np.asarray(schedule.order, np.int64)] = -np.arange(n, dtype=np.float64)
        start, place, _ = run_list(problem, prio)
    else:
        start = np.asarray(schedule.start, np.float64)
        if schedule.placement is not None:
            place = np.asarray(schedule.placement, np.int64)
        elif problem.fixed_unit is not None:
            place = problem.fixed_unit
        else:
            raise ValueError("schedule has start times but no placement, and ops may run on several devices")
    makespan = validate(problem, start, place)
    work = problem.total_work()
    tbytes, tcount = _transfers(problem, place)
    return MakespanResult(
        makespan=makespan,
        speedup=work / makespan if makespan > 0 else 1.0,
        lower_bound=lower_bound(problem),
        start=start,
        placement=place,
        transfer_bytes=tbytes,
        transfers=tcount,
    )


def make_schedule(
    problem: MakespanProblem,
    start: np.ndarray,
    placement: np.ndarray,
    method: str,
    *,
    optimal: bool = False,
    bound: float | None = None,
    **info: Any,
) -> Schedule:
    """Validate a timed schedule and wrap it: ``order`` = ops by start time (ties in topological order)."""
    makespan = validate(problem, start, placement)
    topo_pos = np.empty(problem.n_ops, np.int64)
    topo_pos[_topo(problem)] = np.arange(problem.n_ops)
    order = np.lexsort((topo_pos, np.asarray(start)))
    lb = lower_bound(problem) if bound is None else max(float(bound), lower_bound(problem))
    tol = _tolerance(problem, makespan)
    if lb > makespan + tol:
        raise ValueError(f"{method}: lower bound {lb:.6g} exceeds makespan {makespan:.6g} (a bug)")
    meta = {"makespan": makespan, "speedup": problem.total_work() / makespan if makespan > 0 else 1.0,
            "method": method, **info}
    return Schedule(
        order=order,
        method=method,
        placement=np.asarray(placement, np.int64),
        start=np.asarray(start, np.float64),
        optimal=bool(optimal or makespan <= lb + tol),
        lower_bound=float(lb),
        info=meta,
    )


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
