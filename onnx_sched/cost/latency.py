"""Inference latency of a device placement, from device profiles (pure functions).

Two models, matching how runtimes execute a split model:

* **sequential** — OpenVINO HETERO with a synchronous infer request runs its
  sub-models one after another, so latency is the sum of op times on their
  devices plus the transfers: a tensor read on a device other than where it
  lives is moved **once per (tensor, destination device)** for
  ``latency + bytes / bandwidth``.  Graph inputs live on the host device and
  graph outputs must end there.  Weights are resident (each sub-model holds its
  own constants), never moved.  Its exact optimisers (an s-t minimum cut for two
  devices, CP-SAT for more) are passes' helpers:
  :mod:`onnx_sched.passes.placement._optimal`.
* **concurrent** — independent sub-graphs on different devices overlap (the
  split executor, asynchronous pipelines): latency is the makespan of list
  scheduling the placement (one stream per device), computed by
  :mod:`onnx_sched.cost.makespan` with each op pinned to its device.  A
  transfer's ``bytes / bandwidth`` delays its consumer like a link, but its fixed
  ``latency`` is time the receiving device spends (:func:`receive_seconds`): in
  the split executor a boundary is a part ending, a hand-off between worker
  threads and a part starting, work the devices' workers do rather than a wire.
  Charged as a link delay it overlapped with compute, and on an H200 beside one
  CPU core HEFT's 114-part split of randwire_ws was predicted 21.4 ms and ran
  46.5 ms, against 14.1 ms for the whole model on the GPU (the receiving rule
  predicts 36.8 vs 33.0: docs/results.md, section 17.3).  Host input/output
  copies are not part of this model.

A :class:`PlacementProblem` (the ``ctx.problem`` of every ``latency`` pass) holds
the op-time matrix and transfer matrices built from a
:class:`~onnx_sched.profiling.ProfileSet`; ``simulated`` is true when any
device profile is simulated, and reports must say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np

from onnx_sched.graph import Graph, TensorKind

__all__ = [
    "MODES",
    "PlacementProblem",
    "concurrent_latency",
    "concurrent_schedule",
    "evaluate",
    "placement_problem",
    "receive_seconds",
    "sequential_latency",
    "sequential_latency_batch",
    "sequential_timeline",
]

MODES = ("sequential", "concurrent")


@dataclass(frozen=True, eq=False)
class PlacementProblem:
    """Devices, per-op seconds and transfer costs for one graph.

    ``op_time[i, d]``: seconds of op ``i`` on device ``d`` (``inf`` = cannot run);
    ``latency[a, b]`` / ``inv_bandwidth[a, b]``: seconds and seconds per byte to
    move a tensor from device ``a`` to ``b`` (finite; 0 on the diagonal); ``host``: index of
    the device holding graph inputs and outputs; ``mode``: ``sequential`` or
    ``concurrent``.
    """

    graph: Graph
    device_names: tuple[str, ...]
    op_time: np.ndarray
    latency: np.ndarray
    inv_bandwidth: np.ndarray
    host: int = 0
    mode: str = "sequential"
    simulated: bool = False
    device_kinds: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, k = self.graph.n_ops, len(self.device_names)
        t = np.ascontiguousarray(self.op_time, dtype=np.float64)
        if t.shape != (n, k):
            raise ValueError(f"op_time has shape {t.shape}, expected ({n}, {k})")
        if np.isnan(t).any() or (t < 0).any():
            raise ValueError("op_time must be >= 0 (inf = op cannot run on the device)")
        for name in ("latency", "inv_bandwidth"):
            arr = np.ascontiguousarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (k, k):
                raise ValueError(f"{name} has shape {arr.shape}, expected ({k}, {k})")
            arr = arr.copy()
            np.fill_diagonal(arr, 0.0)
            if not (np.isfinite(arr) & (arr >= 0)).all():
                raise ValueError(f"{name} must be finite and >= 0 between every two devices")
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "op_time", t)
        if not 0 <= self.host < k:
            raise ValueError(f"host device {self.host} outside [0, {k})")
        if self.mode not in MODES:
            raise ValueError(f"latency mode must be one of {MODES}, got {self.mode!r}")
        if not self.device_kinds:
            object.__setattr__(self, "device_kinds", ("cpu",) * k)

    @property
    def n_devices(self) -> int:
        return len(self.device_names)

    def device_index(self, name_or_kind: str) -> int:
        """Index of a device by name, else the first device of that kind (``cpu``, ``igpu``, ``dgpu``, ``gpu``)."""
        if name_or_kind in self.device_names:
            return self.device_names.index(name_or_kind)
        for i, kind in enumerate(self.device_kinds):
            if kind == name_or_kind or (name_or_kind == "gpu" and kind in ("dgpu", "igpu")):
                return i
        raise ValueError(f"no device {name_or_kind!r} among {list(self.device_names)} (kinds {list(self.device_kinds)})")

    def with_mode(self, mode: str) -> PlacementProblem:
        from dataclasses import replace

        return replace(self, mode=mode, info={})

    @property
    def transfers(self) -> TransferTable:
        cached = self.info.get("_transfers")
        if cached is None:
            cached = _transfer_table(self.graph)
            self.info["_transfers"] = cached
        return cached

    def makespan_problem(self, placement: np.ndarray | None = None) -> Any:
        """The :class:`~onnx_sched.cost.makespan.MakespanProblem` of these devices; with
        ``placement``, every op may only run on its placed device."""
        from onnx_sched.cost import makespan as ms
        from onnx_sched.machines import Link, Machines, Unit

        k = self.n_devices
        links = {(a, b): Link(float(self.latency[a, b]), 1.0 / self.inv_bandwidth[a, b] if self.inv_bandwidth[a, b] > 0
                              else float("inf"))
                 for a in range(k) for b in range(k) if a != b}
        machines = Machines(kind="devices", units=tuple(Unit(n) for n in self.device_names), links=links,
                            name="profiles")
        d = self.op_time
        if placement is not None:
            p = np.asarray(placement, np.int64)
            d = np.full_like(self.op_time, np.inf)
            d[np.arange(self.graph.n_ops), p] = self.op_time[np.arange(self.graph.n_ops), p]
        return ms.makespan_problem(self.graph, machines, d)


@dataclass(frozen=True, eq=False)
class TransferTable:
    """Tensors that may move: ``src_op[j]`` (``-1`` = graph input on the host),
    ``nbytes[j]``, consumer ops in CSR (``cons_ptr``/``cons_idx``) and ``to_host[j]``
    (graph output: must end on the host)."""

    tensor: np.ndarray
    src_op: np.ndarray
    nbytes: np.ndarray
    cons_ptr: np.ndarray
    cons_idx: np.ndarray
    to_host: np.ndarray


def _transfer_table(g: Graph) -> TransferTable:
    cons = g.tensor_consumers
    kind = np.asarray(g.tensor_kind)
    producer = np.asarray(g.tensor_producer, np.int64)
    owner = np.repeat(np.arange(g.n_tensors), cons.lengths())  # the tensor of each (tensor, consumer) pair
    reader = cons.indices.astype(np.int64)
    real = reader != producer[owner]  # an op reading its own output is no transfer
    is_out = kind == TensorKind.OUTPUT
    movable = (kind != TensorKind.WEIGHT) & ((cons.lengths() > 0) | is_out)
    rows = np.flatnonzero(movable)
    keep = real & movable[owner]
    counts = np.bincount(owner[keep], minlength=g.n_tensors)[rows]
    return TransferTable(rows.astype(np.int64), producer[rows], np.asarray(g.tensor_bytes, np.float64)[rows],
                         np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), reader[keep], is_out[rows])


def placement_problem(graph: Graph, profiles: Any, mode: str = "sequential",
                      devices: Sequence[str] | None = None) -> PlacementProblem:
    """Build the problem from a :class:`~onnx_sched.profiling.ProfileSet` (optionally
    restricted to ``devices``, in that order)."""
    from onnx_sched.profiling import measured_ops, op_seconds_matrix

    ps = profiles.subset(devices) if devices else profiles
    names = ps.names
    k = len(names)
    lat = np.zeros((k, k))
    inv = np.zeros((k, k))
    for a in range(k):
        for b in range(k):
            if a != b:
                tm = ps.transfer(names[a], names[b])
                lat[a, b] = tm.latency_s
                inv[a, b] = 1.0 / tm.bandwidth_Bps
    host = names.index(ps.host) if ps.host in names else 0
    return PlacementProblem(graph, names, op_seconds_matrix(graph, ps), lat, inv, host, mode, ps.simulated,
                            tuple(d.kind for d in ps.devices),
                            info={"measured_ops": {d.name: measured_ops(graph, d) for d in ps.devices},
                                  "profile_models": {d.name: d.model for d in ps.devices}})


# ------------------------------------------------------------------ sequential
def _check_placement(problem: PlacementProblem, placement: np.ndarray) -> np.ndarray:
    p = np.asarray(placement, np.int64)
    if p.shape[-1] != problem.graph.n_ops:
        raise ValueError(f"placement has {p.shape[-1]} entries, graph has {problem.graph.n_ops} ops")
    if p.size and (p.min() < 0 or p.max() >= problem.n_devices):
        raise ValueError(f"placement uses devices outside [0, {problem.n_devices})")
    return p


def sequential_latency_batch(problem: PlacementProblem, placements: np.ndarray) -> np.ndarray:
    """Sequential latency of each row of ``placements`` ``(B, n)``."""
    P = np.ascontiguousarray(np.atleast_2d(_check_placement(problem, placements)))
    tt = problem.transfers
    return _sequential_kernel(P, problem.op_time, tt.src_op, tt.nbytes, tt.cons_ptr, tt.cons_idx, tt.to_host,
                              problem.latency, problem.inv_bandwidth, problem.host)


@numba.njit(cache=True)
def _sequential_kernel(P: np.ndarray, op_time: np.ndarray, src_op: np.ndarray, nbytes: np.ndarray,
                       cons_ptr: np.ndarray, cons_idx: np.ndarray, to_host: np.ndarray, latency: np.ndarray,
                       inv_bandwidth: np.ndarray, host: int) -> np.ndarray:  # pragma: no cover - numba
    """Per row of ``P``: op seconds on their devices, plus one move per (tensor, device other than its home that
    reads it), plus the graph outputs' moves to the host."""
    B, n = P.shape
    k = latency.shape[0]
    out = np.empty(B)
    need = np.zeros(k, np.bool_)
    for b in range(B):
        total = 0.0
        for i in range(n):
            total += op_time[i, P[b, i]]
        for j in range(len(src_op)):
            src = host if src_op[j] < 0 else P[b, src_op[j]]
            need[:] = False
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                need[P[b, cons_idx[e]]] = True
            if to_host[j]:
                need[host] = True
            need[src] = False
            for d in range(k):
                if need[d]:
                    total += latency[src, d] + nbytes[j] * inv_bandwidth[src, d]
        out[b] = total
    return out


def sequential_latency(problem: PlacementProblem, placement: np.ndarray) -> float:
    """Sum of op times plus transfers (once per tensor and destination device)."""
    return float(sequential_latency_batch(problem, np.asarray(placement)[None, :])[0])


def receive_seconds(problem: PlacementProblem, placement: np.ndarray) -> np.ndarray:
    """Per op, the fixed transfer latency its device spends receiving tensors from other devices: once per (tensor,
    receiving device), charged to the first op (lowest index) there that reads it.  Graph inputs are not counted
    (host copies are outside the concurrent model).

    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[4, 4, 4])
    >>> lat = np.array([[0.0, 0.5], [0.5, 0.0]])
    >>> problem = PlacementProblem(g, ("d0", "d1"), np.ones((3, 2)), lat, np.zeros((2, 2)), mode="concurrent")
    >>> receive_seconds(problem, np.array([0, 1, 1])).tolist()
    [0.0, 0.5, 0.0]
    """
    p = _check_placement(problem, placement)
    tt = problem.transfers
    per_tensor = np.diff(tt.cons_ptr)
    tensor = np.repeat(np.arange(len(tt.tensor)), per_tensor)
    cons = tt.cons_idx[tt.cons_ptr[0]:tt.cons_ptr[-1]].astype(np.int64)
    src_op = tt.src_op[tensor]
    out = np.zeros(problem.graph.n_ops)
    if not len(cons):
        return out
    src = p[np.maximum(src_op, 0)]
    dst = p[cons]
    keep = (src_op >= 0) & (dst != src)
    tensor, cons, src, dst = tensor[keep], cons[keep], src[keep], dst[keep]
    key = tensor * problem.n_devices + dst
    order = np.lexsort((cons, key))
    first = order[np.r_[True, key[order][1:] != key[order][:-1]]] if len(order) else order
    np.add.at(out, cons[first], problem.latency[src[first], dst[first]])
    return out


def concurrent_schedule(problem: PlacementProblem, placement: np.ndarray,
                        priority: np.ndarray | None = None) -> tuple[Any, np.ndarray, float]:
    """The concurrent model's timeline of ``placement``: ``(makespan problem, start seconds per op, makespan)``.
    Independent ops on different devices overlap (list scheduling by HEFT upward rank unless ``priority`` is
    given); in the makespan problem, each op may run only on its device and its seconds include the fixed latency
    of the transfers it receives (:func:`receive_seconds`), while their bytes delay it as a link would."""
    from dataclasses import replace

    from onnx_sched.cost import makespan as ms
    from onnx_sched.cost.makespan.paths import upward_rank

    p = _check_placement(problem, placement)
    busy = replace(problem, op_time=problem.op_time + receive_seconds(problem, p)[:, None],
                   latency=np.zeros_like(problem.latency), info={})
    mp = busy.makespan_problem(p)
    prio = upward_rank(mp) if priority is None else priority
    start, place, makespan = ms.run_list(mp, prio)
    assert (place == p).all()
    return mp, start, float(makespan)


def concurrent_latency(problem: PlacementProblem, placement: np.ndarray, priority: np.ndarray | None = None) -> float:
    """Makespan of the placement with independent ops on different devices overlapping
    (:func:`concurrent_schedule`)."""
    return concurrent_schedule(problem, placement, priority)[2]


def sequential_timeline(problem: PlacementProblem, placement: np.ndarray,
                        order: np.ndarray | None = None) -> tuple[np.ndarray, list[tuple[float, float, int, int, int]]]:
    """The sequential model's timeline of ``placement``: ops one after another in ``order`` (default: a
    topological order), each after the transfers it needs; ``(start seconds per op, transfers)``, a transfer
    ``(start, seconds, tensor id, from device, to device)``, the graph outputs' moves to the host last.  It ends at
    :func:`sequential_latency`.

    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(2, [(0, 1)], output_bytes=[4, 4])
    >>> problem = PlacementProblem(g, ("d0", "d1"), np.ones((2, 2)), np.full((2, 2), 0.5), np.zeros((2, 2)))
    >>> start, moves = sequential_timeline(problem, np.array([0, 1]))
    >>> start.tolist(), [(t, s, src, dst) for t, s, _, src, dst in moves]
    ([0.0, 1.5], [(1.0, 0.5, 0, 1)])
    >>> sequential_latency(problem, np.array([0, 1]))
    2.5
    """
    from onnx_sched.dag import kahn_order

    p = _check_placement(problem, placement)
    g, tt = problem.graph, problem.transfers
    order = kahn_order(g) if order is None else np.asarray(order, np.int64)
    reads: dict[int, list[int]] = {}  # op -> the movable tensors (table rows) it reads
    for j in range(len(tt.tensor)):
        for v in tt.cons_idx[tt.cons_ptr[j]:tt.cons_ptr[j + 1]]:
            reads.setdefault(int(v), []).append(j)
    home = np.where(tt.src_op < 0, problem.host, p[np.maximum(tt.src_op, 0)])
    arrived: set[tuple[int, int]] = set()
    start = np.zeros(g.n_ops)
    moves: list[tuple[float, float, int, int, int]] = []
    now = 0.0

    def move(j: int, dst: int) -> None:
        nonlocal now
        src = int(home[j])
        if src != dst and (j, dst) not in arrived:
            arrived.add((j, dst))
            seconds = float(problem.latency[src, dst] + tt.nbytes[j] * problem.inv_bandwidth[src, dst])
            moves.append((now, seconds, int(tt.tensor[j]), src, dst))
            now += seconds

    for v in order:
        for j in reads.get(int(v), ()):
            move(j, int(p[v]))
        start[v] = now
        now += float(problem.op_time[v, p[v]])
    for j in np.flatnonzero(tt.to_host):
        move(int(j), problem.host)
    return start, moves


def evaluate(problem: PlacementProblem, placement: np.ndarray, mode: str | None = None) -> float:
    """Latency of ``placement`` under ``mode`` (default: the problem's)."""
    mode = mode or problem.mode
    if mode == "sequential":
        return sequential_latency(problem, placement)
    if mode == "concurrent":
        return concurrent_latency(problem, placement)
    raise ValueError(f"latency mode must be one of {MODES}, got {mode!r}")
