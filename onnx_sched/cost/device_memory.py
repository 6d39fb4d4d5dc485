"""Per-device peak memory of a joint placement + schedule with transfers (paper 003, section 3.1).

A model too big for one device is split: every op gets a device, a tensor read on
another device than its producer's is copied there by a *transfer* step, and one
total order runs ops and transfers.  Per device, at every step:

* a tensor is live from its production on the device (or its arrival by
  transfer) until every consumer on that device, and, on its home device, every
  outgoing transfer of it, has run;
* graph inputs live on the host (device 0) for the whole run, graph outputs on
  their producer's device to the end, weights are resident and not counted, and
  an op's transient parameter bytes count at its own step: the rules of the
  single-device model (:mod:`onnx_sched.cost.memory`), whose :class:`MemoryArrays`
  this model reads, so with one device the two give the same peak (tested).

The objective is the largest peak over devices and steps.  With per-device
capacities, a placement whose peak exceeds one is infeasible; :func:`fitness`
ranks every feasible solution above every infeasible one.

What a step does to memory is written once (``_run_op``, ``_run_transfer``) and
used by two kernels:

* ``_order_kernel`` turns a placement and priorities into steps: a topological
  sort of ops + the transfers the placement implies, highest priority first
  (the chromosome decoding of paper 003, section 3.2.1), scoring it as it goes;
* ``_walk_kernel`` runs any given step sequence, checks it (every input present
  on the op's device when it runs) and returns per-device peaks and the live
  bytes of each device after every step.

:func:`evaluate_keys` decodes and scores a whole population of random-key
chromosomes in one numba call (BRKGA's inner loop).

Example:
    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[4, 2, 1])
    >>> p = DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    >>> steps = decode(p, placement=np.array([0, 1, 0]), op_priority=np.array([3.0, 2.0, 1.0]))
    >>> [(s.kind, s.item, p.devices[s.device]) for s in steps]
    [('op', 0, 'CPU'), ('transfer', 0, 'GPU'), ('op', 1, 'GPU'), ('op', 2, 'CPU')]
    >>> walk(p, steps).per_device_peak.tolist()
    [5, 6]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numba
import numpy as np

from onnx_sched.cost.memory import MemoryArrays, memory_arrays
from onnx_sched.dag_kernels import heap_pop, heap_push
from onnx_sched.graph import Graph, TensorKind

__all__ = [
    "OP",
    "TRANSFER",
    "DeviceMemoryProblem",
    "Step",
    "Walk",
    "chromosome_size",
    "decode",
    "decode_keys",
    "evaluate_keys",
    "fitness",
    "lower_bound",
    "op_order",
    "placement_of",
    "walk",
]

OP, TRANSFER = 0, 1


@dataclass(frozen=True)
class Step:
    """One step of a multi-device schedule: an op on ``device``, or a transfer of tensor
    ``item`` from ``source`` to ``device``."""

    kind: str  # "op" or "transfer"
    item: int  # op id or tensor id
    device: int
    source: int = -1  # transfers only


@dataclass(frozen=True, eq=False)
class DeviceMemoryProblem:
    """A graph, the devices to split it over (``devices[0]`` is the host) and optional capacities."""

    graph: Graph
    devices: tuple[str, ...]
    capacity: np.ndarray  # int64 bytes per device, 0 = no limit

    @classmethod
    def build(cls, graph: Graph, devices: Sequence[str], limits: Mapping[str, int] | None = None) -> DeviceMemoryProblem:
        """``limits`` maps device names to bytes; ``ValueError`` names an unknown device."""
        devices = tuple(devices)
        if not devices or len(set(devices)) != len(devices):
            raise ValueError(f"devices must be distinct and at least one, got {list(devices)}")
        cap = np.zeros(len(devices), dtype=np.int64)
        for name, value in (limits or {}).items():
            if name not in devices:
                raise ValueError(f"memory limit for unknown device {name!r}; devices are {', '.join(devices)}")
            if value <= 0:
                raise ValueError(f"memory limit for {name} must be positive, got {value}")
            cap[devices.index(name)] = int(value)
        return cls(graph=graph, devices=devices, capacity=cap)

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def device_names(self) -> tuple[str, ...]:
        """What the exporter writes on each node (``pkg.onnx_sched.device``)."""
        return self.devices

    @cached_property
    def arrays(self) -> MemoryArrays:
        """The single-device model's flat arrays (plain model: no in-place reuse across devices)."""
        return memory_arrays(self.graph, inplace=False)

    @cached_property
    def is_input(self) -> np.ndarray:
        return np.asarray(self.graph.tensor_kind == TensorKind.INPUT)

    @cached_property
    def consumers(self) -> tuple[np.ndarray, np.ndarray]:
        """Per tensor, the distinct ops reading it as a non-weight input (CSR ptr, idx)."""
        a = self.arrays
        ops = np.repeat(np.arange(self.graph.n_ops, dtype=np.int64), np.diff(a.in_ptr))
        order = np.argsort(a.in_idx, kind="stable")
        ptr = np.zeros(self.graph.n_tensors + 1, dtype=np.int64)
        np.cumsum(np.bincount(a.in_idx, minlength=self.graph.n_tensors), out=ptr[1:])
        return ptr, ops[order]

    @cached_property
    def transfer_slot(self) -> np.ndarray:
        """Per tensor, its row among the transfer priorities (-1: never read, never transferred)."""
        ptr, _ = self.consumers
        read = np.diff(ptr) > 0
        slot = np.full(self.graph.n_tensors, -1, dtype=np.int64)
        slot[read] = np.arange(int(read.sum()))
        return slot

    @property
    def n_transfer_slots(self) -> int:
        return int((self.transfer_slot >= 0).sum())

    def kernel_args(self) -> tuple:
        a = self.arrays
        ptr, idx = self.consumers
        return (a.in_ptr, a.in_idx, a.out_ptr, a.out_idx, a.size, a.keep, a.param, self.is_input,
                np.asarray(self.graph.tensor_producer, dtype=np.int64), ptr, idx, a.base)


def chromosome_size(problem: DeviceMemoryProblem) -> int:
    """|N| x |D| affinities + |N| op priorities + |T| x |D| transfer priorities (paper 003, 3.2.1)."""
    n, d = problem.graph.n_ops, problem.n_devices
    return n * d + n + problem.n_transfer_slots * d


# ----------------------------------------------------------------------------- kernels


@numba.njit(cache=True)
def _homes(placement, producer):  # noqa: ANN001, ANN202
    """The device each tensor is produced on (graph inputs: the host)."""
    home = np.zeros(len(producer), np.int64)
    for t in range(len(producer)):
        if producer[t] >= 0:
            home[t] = placement[producer[t]]
    return home


@numba.njit(cache=True, inline="always")
def _run_op(j, d, live, peak, remaining, present, home, in_ptr, in_idx, out_ptr, out_idx, size, keep, param):  # noqa: ANN001, ANN202
    """Op ``j`` runs on device ``d``: its outputs (and transient bytes) arrive, then every
    tensor whose last reader on ``d`` this was leaves (kept: inputs and outputs at home)."""
    alloc = param[j]
    n_dev = len(live)
    for k in range(out_ptr[j], out_ptr[j + 1]):
        t = out_idx[k]
        alloc += size[t]
        present[t * n_dev + d] = True
    live[d] += alloc
    if live[d] > peak[d]:
        peak[d] = live[d]
    live[d] -= param[j]
    for k in range(in_ptr[j], in_ptr[j + 1]):
        t = in_idx[k]
        remaining[t * n_dev + d] -= 1
        if remaining[t * n_dev + d] == 0 and not (keep[t] and d == home[t]):
            live[d] -= size[t]
    for k in range(out_ptr[j], out_ptr[j + 1]):
        t = out_idx[k]
        if remaining[t * n_dev + d] == 0 and not keep[t]:
            live[d] -= size[t]


@numba.njit(cache=True, inline="always")
def _run_transfer(t, h, d, live, peak, remaining, present, size, keep):  # noqa: ANN001, ANN202
    """Tensor ``t`` is copied from its home ``h`` to ``d``: it arrives on ``d``, and leaves ``h``
    if this was its last reader there."""
    n_dev = len(live)
    present[t * n_dev + d] = True
    live[d] += size[t]
    if live[d] > peak[d]:
        peak[d] = live[d]
    remaining[t * n_dev + h] -= 1
    if remaining[t * n_dev + h] == 0 and not keep[t]:
        live[h] -= size[t]


@numba.njit(cache=True)
def _start(n_dev, is_input, base, peak):  # noqa: ANN001, ANN202
    """Live bytes and presence before the first step: graph inputs on the host."""
    n_t = len(is_input)
    live = np.zeros(n_dev, np.int64)
    live[0] = base
    present = np.zeros(n_t * n_dev, np.bool_)
    for t in range(n_t):
        if is_input[t]:
            present[t * n_dev] = True
    for d in range(n_dev):
        peak[d] = live[d]
    return live, present


@numba.njit(cache=True, inline="always")
def _release_readers(t, d, placement, cons_ptr, cons_idx, waits, op_prio, hf, hv, nh):  # noqa: ANN001, ANN202
    """Tensor ``t`` is now on device ``d``: readers there wait for one input less; push the ready ones."""
    for c in range(cons_ptr[t], cons_ptr[t + 1]):
        j = cons_idx[c]
        if placement[j] == d:
            waits[j] -= 1
            if waits[j] == 0:
                nh = heap_push(hf, hv, nh, -op_prio[j], j)
    return nh


@numba.njit(cache=True)
def _order_kernel(placement, op_prio, xfer_prio, slot, n_dev, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,  # noqa: ANN001, ANN202
                  is_input, producer, cons_ptr, cons_idx, base, kind, item, dev, src, peak):
    """Topological order of ops + the transfers ``placement`` implies, highest priority first
    (transfer (t, d): key ``xfer_prio[slot[t] * n_dev + d]``), walked as it is built: fills the
    step arrays (when they have room) and ``peak`` per device (plus, in an extra last slot if
    ``peak`` has one, the bytes transferred); returns the step count."""
    n = len(placement)
    n_t = len(producer)
    remaining = np.zeros(n_t * n_dev, np.int64)  # readers on d, + outgoing transfers at home
    waits = np.zeros(n, np.int64)
    for j in range(n):
        d = placement[j]
        for k in range(in_ptr[j], in_ptr[j + 1]):
            t = in_idx[k]
            remaining[t * n_dev + d] += 1
            if not (producer[t] < 0 and d == 0):  # a graph input is on the host from the start
                waits[j] += 1
    home = _homes(placement, producer)
    for t in range(n_t):
        h = home[t]
        for d in range(n_dev):
            if d != h and remaining[t * n_dev + d] > 0:
                remaining[t * n_dev + h] += 1
    live, present = _start(n_dev, is_input, base, peak)
    record = len(kind) > 0
    cap = n + n_t * n_dev
    hf = np.empty(cap, np.float64)
    hv = np.empty(cap, np.int64)
    nh = 0
    for j in range(n):
        if waits[j] == 0:
            nh = heap_push(hf, hv, nh, -op_prio[j], j)
    for t in range(n_t):
        if producer[t] < 0:
            for d in range(1, n_dev):
                if remaining[t * n_dev + d] > 0:
                    nh = heap_push(hf, hv, nh, -xfer_prio[slot[t] * n_dev + d], n + t * n_dev + d)
    steps = 0
    while nh > 0:
        v, nh = heap_pop(hf, hv, nh)
        if v < n:
            d = placement[v]
            _run_op(v, d, live, peak, remaining, present, home, in_ptr, in_idx, out_ptr, out_idx, size, keep, param)
            if record:
                kind[steps], item[steps], dev[steps], src[steps] = 0, v, d, -1
            for k in range(out_ptr[v], out_ptr[v + 1]):
                t = out_idx[k]
                nh = _release_readers(t, d, placement, cons_ptr, cons_idx, waits, op_prio, hf, hv, nh)
                for e in range(n_dev):
                    if e != d and remaining[t * n_dev + e] > 0:  # read on e: nothing there can have run yet
                        nh = heap_push(hf, hv, nh, -xfer_prio[slot[t] * n_dev + e], n + t * n_dev + e)
        else:
            t = (v - n) // n_dev
            d = (v - n) % n_dev
            h = home[t]
            _run_transfer(t, h, d, live, peak, remaining, present, size, keep)
            if len(peak) > n_dev:  # a slot past the devices counts the bytes moved
                peak[n_dev] += size[t]
            if record:
                kind[steps], item[steps], dev[steps], src[steps] = 1, t, d, h
            nh = _release_readers(t, d, placement, cons_ptr, cons_idx, waits, op_prio, hf, hv, nh)
        steps += 1
    return steps


@numba.njit(cache=True)
def _walk_kernel(kind, item, dev, src, steps, placement, n_dev, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,  # noqa: ANN001, ANN202
                 is_input, producer, cons_ptr, cons_idx, base, peak, live_trace):
    """Run the given steps; fill ``peak`` (per device) and ``live_trace`` (live bytes per device
    after each step).  Returns -1 if valid, else the index of the first invalid step."""
    n_t = len(producer)
    remaining = np.zeros(n_t * n_dev, np.int64)
    for s in range(steps):
        if kind[s] == 0:
            j = item[s]
            for k in range(in_ptr[j], in_ptr[j + 1]):
                remaining[in_idx[k] * n_dev + dev[s]] += 1
        else:
            remaining[item[s] * n_dev + src[s]] += 1
    live, present = _start(n_dev, is_input, base, peak)
    home = _homes(placement, producer)
    for s in range(steps):
        d = dev[s]
        if kind[s] == 0:
            j = item[s]
            if placement[j] != d:
                return s
            for k in range(in_ptr[j], in_ptr[j + 1]):
                if not present[in_idx[k] * n_dev + d]:
                    return s
            _run_op(j, d, live, peak, remaining, present, home, in_ptr, in_idx, out_ptr, out_idx, size, keep, param)
        else:
            t = item[s]
            h = src[s]
            if h != home[t] or h == d or not present[t * n_dev + h] or present[t * n_dev + d]:
                return s
            _run_transfer(t, h, d, live, peak, remaining, present, size, keep)
        for e in range(n_dev):
            live_trace[s, e] = live[e]
    return -1


@numba.njit(cache=True)
def _split_keys(keys, n, n_dev):  # noqa: ANN001, ANN202
    placement = np.empty(n, np.int64)
    for j in range(n):
        best = 0
        for d in range(1, n_dev):
            if keys[j * n_dev + d] > keys[j * n_dev + best]:
                best = d
        placement[j] = best
    return placement, keys[n * n_dev: n * n_dev + n], keys[n * n_dev + n:]


@numba.njit(cache=True)
def _evaluate_population(keys, n_dev, slot, in_ptr, in_idx, out_ptr, out_idx, size, keep, param, is_input,  # noqa: ANN001, ANN202
                         producer, cons_ptr, cons_idx, base, out_peaks):
    n = len(in_ptr) - 1
    none = np.empty(0, np.int64)
    for r in range(keys.shape[0]):
        placement, op_prio, xfer_prio = _split_keys(keys[r], n, n_dev)
        _order_kernel(placement, op_prio, xfer_prio, slot, n_dev, in_ptr, in_idx, out_ptr, out_idx, size, keep,
                      param, is_input, producer, cons_ptr, cons_idx, base, none, none, none, none, out_peaks[r])


# ----------------------------------------------------------------------------- Python API


@dataclass(frozen=True)
class Walk:
    """The result of walking a step sequence."""

    steps: tuple[Step, ...]
    per_device_peak: np.ndarray  # int64 bytes per device
    live: np.ndarray  # (steps, devices) live bytes after each step

    @property
    def peak(self) -> int:
        return int(self.per_device_peak.max())


def decode(problem: DeviceMemoryProblem, placement: np.ndarray, op_priority: np.ndarray,
           transfer_priority: np.ndarray | None = None) -> tuple[Step, ...]:
    """The steps of ``placement`` in priority order (higher first); transfer priorities
    (``n_transfer_slots x devices``) default to running each transfer as soon as it can."""
    n, nd = problem.graph.n_ops, problem.n_devices
    placement = np.asarray(placement, dtype=np.int64)
    if placement.shape != (n,) or placement.min(initial=0) < 0 or placement.max(initial=0) >= nd:
        raise ValueError(f"placement must give each of the {n} ops a device in 0..{nd - 1}")
    xfer = (np.full(problem.n_transfer_slots * nd, np.inf) if transfer_priority is None
            else np.asarray(transfer_priority, dtype=np.float64).reshape(-1))
    return _decode_arrays(problem, placement, np.asarray(op_priority, dtype=np.float64), xfer)


def decode_keys(problem: DeviceMemoryProblem, keys: np.ndarray) -> tuple[np.ndarray, tuple[Step, ...]]:
    """A random-key chromosome's placement and steps (paper 003, 3.2.1)."""
    keys = np.asarray(keys, dtype=np.float64)
    if keys.shape != (chromosome_size(problem),):
        raise ValueError(f"chromosome must have {chromosome_size(problem)} keys, got shape {keys.shape}")
    placement, op_prio, xfer = _split_keys(keys, problem.graph.n_ops, problem.n_devices)
    return placement, _decode_arrays(problem, placement, op_prio, xfer)


def _decode_arrays(problem: DeviceMemoryProblem, placement: np.ndarray, op_prio: np.ndarray,
                   xfer: np.ndarray) -> tuple[Step, ...]:
    nd = problem.n_devices
    cap = problem.graph.n_ops + problem.graph.n_tensors * nd
    kind, item, dev, src = (np.empty(cap, np.int64) for _ in range(4))
    steps = _order_kernel(placement, op_prio, xfer, problem.transfer_slot, nd, *problem.kernel_args(),
                          kind, item, dev, src, np.zeros(nd, np.int64))
    return tuple(Step("op" if kind[s] == OP else "transfer", int(item[s]), int(dev[s]), int(src[s]))
                 for s in range(steps))


def op_order(steps: Sequence[Step]) -> np.ndarray:
    """The op ids of ``steps`` in execution order (transfers left out)."""
    return np.array([s.item for s in steps if s.kind == "op"], dtype=np.int64)


def placement_of(n_ops: int, steps: Sequence[Step]) -> np.ndarray:
    """The device of each of ``n_ops`` ops as ``steps`` run them (0 for an op they leave out)."""
    placement = np.zeros(n_ops, dtype=np.int64)
    for s in steps:
        if s.kind == "op":
            placement[s.item] = s.device
    return placement


def walk(problem: DeviceMemoryProblem, steps: Sequence[Step]) -> Walk:
    """Per-device peaks of ``steps``; ``ValueError`` names the first invalid step (an input
    not on the op's device, an op missing or run twice, a transfer from a device without the tensor)."""
    n, nd = problem.graph.n_ops, problem.n_devices
    ops = [s.item for s in steps if s.kind == "op"]
    if sorted(ops) != list(range(n)):
        raise ValueError(f"a schedule must run each of the {n} ops exactly once, got {len(ops)} op steps")
    placement = placement_of(n, steps)
    kind = np.array([OP if s.kind == "op" else TRANSFER for s in steps], dtype=np.int64)
    item = np.array([s.item for s in steps], dtype=np.int64)
    dev = np.array([s.device for s in steps], dtype=np.int64)
    src = np.array([s.source for s in steps], dtype=np.int64)
    if len(steps) and (dev.min() < 0 or dev.max() >= nd):
        raise ValueError(f"step devices must be in 0..{nd - 1}")
    peak = np.zeros(nd, dtype=np.int64)
    live = np.zeros((len(steps), nd), dtype=np.int64)
    bad = _walk_kernel(kind, item, dev, src, len(steps), placement, nd, *problem.kernel_args(), peak, live)
    if bad >= 0:
        s = steps[bad]
        raise ValueError(f"step {bad} ({s.kind} {s.item} on {problem.devices[s.device]}) is invalid: an input is "
                         "not on its device yet, or the transfer's tensor is not where it comes from")
    # every op's inputs present means every needed transfer ran; graph outputs stay to the end
    return Walk(steps=tuple(steps), per_device_peak=peak, live=live)


def evaluate_keys(problem: DeviceMemoryProblem, keys: np.ndarray, *, transferred: bool = False) -> Any:
    """Per-device peaks (population x devices) of a population of chromosomes, one numba call;
    with ``transferred``, also the bytes each one moves between devices: ``(peaks, bytes)``."""
    keys = np.ascontiguousarray(np.atleast_2d(keys), dtype=np.float64)
    if keys.shape[1] != chromosome_size(problem):
        raise ValueError(f"chromosomes must have {chromosome_size(problem)} keys, got {keys.shape[1]}")
    nd = problem.n_devices
    out = np.zeros((keys.shape[0], nd + 1), dtype=np.int64)
    _evaluate_population(keys, nd, problem.transfer_slot, *problem.kernel_args(), out)
    return (out[:, :nd], out[:, nd]) if transferred else out[:, :nd]


def fitness(problem: DeviceMemoryProblem, peaks: np.ndarray, transferred: np.ndarray | None = None) -> np.ndarray:
    """What to minimise, per row of ``peaks`` (population x devices): the largest peak; over a
    capacity, the overflow placed above every feasible value.  With ``transferred`` (bytes moved
    per row), equal peaks are told apart by fewer bytes moved: a term below half a byte, so it
    never outweighs a byte of peak."""
    peaks = np.atleast_2d(peaks).astype(np.float64)
    worst = peaks.max(axis=1)
    cap = problem.capacity.astype(np.float64)
    limited = cap > 0
    if limited.any():
        overflow = np.clip(peaks[:, limited] - cap[limited], 0, None).sum(axis=1)
        ceiling = float(problem.arrays.size.sum()) + problem.arrays.base + float(problem.arrays.param.sum())
        worst = np.where(overflow > 0, ceiling + overflow, worst)
    if transferred is not None:
        most = float(problem.arrays.size.sum()) * problem.n_devices + 1.0  # more than any schedule moves
        worst = worst + np.asarray(transferred, dtype=np.float64) / (2.0 * most)
    return worst


def lower_bound(problem: DeviceMemoryProblem) -> int:
    """A peak no placement and schedule can beat.

    The largest of: the graph inputs (on the host all run); for each op, its own
    inputs, outputs and transient bytes (all on its device when it runs); and the
    single-device "must be live" bound (:func:`onnx_sched.cost.memory_bound.op_lower_bounds`)
    divided by the device count, because every tensor that bound counts is live on
    some device when the op runs.

    >>> from onnx_sched.graph import Graph
    >>> g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[4, 2, 1])
    >>> lower_bound(DeviceMemoryProblem.build(g, ("CPU", "GPU")))
    6
    """
    from onnx_sched.cost.memory_bound import lower_bound as single_device_bound

    a = problem.arrays
    in_bytes = np.add.reduceat(np.append(a.size[a.in_idx], 0), a.in_ptr[:-1]) * (np.diff(a.in_ptr) > 0)
    out_bytes = np.add.reduceat(np.append(a.size[a.out_idx], 0), a.out_ptr[:-1]) * (np.diff(a.out_ptr) > 0)
    per_op = int((in_bytes + out_bytes + a.param).max(initial=0))
    shared = -(-single_device_bound(problem.graph, False) // problem.n_devices)
    return int(max(per_op, a.base, shared))
