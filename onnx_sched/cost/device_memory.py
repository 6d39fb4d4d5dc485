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
used by two kernels, both in :mod:`onnx_sched.cost.device_memory_kernels`:

* ``order_kernel`` turns a placement and priorities into steps: a topological
  sort of ops + the transfers the placement implies, highest priority first
  (the chromosome decoding of paper 003, section 3.2.1), scoring it as it goes;
* ``walk_kernel`` runs any given step sequence, checks it (every input present
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

import numpy as np

from onnx_sched.cost.device_memory_kernels import (
    Work,
    evaluate_population,
    fresh,
    order_kernel,
    split_keys,
    walk_kernel,
    work_arrays,
)
from onnx_sched.cost.memory import MemoryArrays, memory_arrays
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
    "decode_op_order",
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
        """The graph's arrays every kernel reads, then fresh work arrays (:class:`Work`)."""
        a = self.arrays
        ptr, idx = self.consumers
        return (a.in_ptr, a.in_idx, a.out_ptr, a.out_idx, a.size, a.keep, a.param,
                np.asarray(self.graph.tensor_producer, dtype=np.int64), ptr, idx, a.base, fresh(self._work))

    @cached_property
    def _work(self) -> Work:
        a = self.arrays
        return work_arrays(self.n_devices, a.in_ptr, a.in_idx, self.is_input, self.consumers[0])


def chromosome_size(problem: DeviceMemoryProblem) -> int:
    """|N| x |D| affinities + |N| op priorities + |T| x |D| transfer priorities (paper 003, 3.2.1)."""
    n, d = problem.graph.n_ops, problem.n_devices
    return n * d + n + problem.n_transfer_slots * d


# ----------------------------------------------------------------------------- Python API


@dataclass(frozen=True)
class Walk:
    """The result of walking a step sequence."""

    steps: tuple[Step, ...]
    per_device_peak: np.ndarray  # int64 bytes per device
    live: np.ndarray  # (steps, devices) live bytes after each step
    during: np.ndarray  # (steps, devices) the most bytes while each step runs (its maximum is the peak)

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
    op_priority = np.asarray(op_priority, dtype=np.float64)
    if op_priority.shape != (n,):
        raise ValueError(f"op_priority must give each of the {n} ops a priority, got shape {op_priority.shape}")
    xfer = (np.full(problem.n_transfer_slots * nd, np.inf) if transfer_priority is None
            else np.asarray(transfer_priority, dtype=np.float64).reshape(-1))
    if xfer.shape != (problem.n_transfer_slots * nd,):
        raise ValueError(f"transfer_priority must have {problem.n_transfer_slots} x {nd} entries, got {xfer.size}")
    return _decode_arrays(problem, placement, op_priority, xfer)


def _chromosome(problem: DeviceMemoryProblem, keys: np.ndarray) -> np.ndarray:
    """``keys`` as one chromosome of ``problem`` (float64); ``ValueError`` when its length is not the problem's."""
    keys = np.asarray(keys, dtype=np.float64)
    if keys.shape != (chromosome_size(problem),):
        raise ValueError(f"chromosome must have {chromosome_size(problem)} keys, got shape {keys.shape}")
    return keys


def decode_keys(problem: DeviceMemoryProblem, keys: np.ndarray) -> tuple[np.ndarray, tuple[Step, ...]]:
    """A random-key chromosome's placement and steps (paper 003, 3.2.1)."""
    placement, op_prio, xfer = split_keys(_chromosome(problem, keys), problem.graph.n_ops, problem.n_devices)
    return placement, _decode_arrays(problem, placement, op_prio, xfer)


def decode_op_order(problem: DeviceMemoryProblem, keys: np.ndarray) -> np.ndarray:
    """The op ids in the order a chromosome runs them (:func:`decode_keys` without building its steps)."""
    placement, op_prio, xfer = split_keys(_chromosome(problem, keys), problem.graph.n_ops, problem.n_devices)
    kind, item, _, _ = _order_arrays(problem, placement, op_prio, xfer)
    return item[kind == OP]


def _order_arrays(problem: DeviceMemoryProblem, placement: np.ndarray, op_prio: np.ndarray,
                  xfer: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Kind, item, device and source of each step ``order_kernel`` decodes."""
    nd = problem.n_devices
    cap = problem.graph.n_ops + problem.graph.n_tensors * nd
    kind, item, dev, src = (np.empty(cap, np.int64) for _ in range(4))
    steps = order_kernel(placement, op_prio, xfer, problem.transfer_slot, nd, *problem.kernel_args(),
                         kind, item, dev, src, np.zeros(nd, np.int64))
    return kind[:steps], item[:steps], dev[:steps], src[:steps]


def _decode_arrays(problem: DeviceMemoryProblem, placement: np.ndarray, op_prio: np.ndarray,
                   xfer: np.ndarray) -> tuple[Step, ...]:
    kind, item, dev, src = _order_arrays(problem, placement, op_prio, xfer)
    return tuple(Step("op" if k == OP else "transfer", int(i), int(d), int(s))
                 for k, i, d, s in zip(kind.tolist(), item.tolist(), dev.tolist(), src.tolist()))


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
    n_t = problem.graph.n_tensors
    stray = np.flatnonzero((kind == TRANSFER) & ((item < 0) | (item >= n_t) | (src < 0) | (src >= nd)))
    if len(stray):
        s = steps[stray[0]]
        raise ValueError(f"step {stray[0]} (transfer {s.item} from {s.source}): a transfer must move a tensor in "
                         f"0..{n_t - 1} from a device in 0..{nd - 1}")
    peak = np.zeros(nd, dtype=np.int64)
    live, during = np.zeros((len(steps), nd), dtype=np.int64), np.zeros((len(steps), nd), dtype=np.int64)
    bad = walk_kernel(kind, item, dev, src, len(steps), placement, nd, *problem.kernel_args(), peak, live, during)
    if bad >= 0:
        s = steps[bad]
        raise ValueError(f"step {bad} ({s.kind} {s.item} on {problem.devices[s.device]}) is invalid: an input is "
                         "not on its device yet, or the transfer's tensor is not where it comes from")
    # every op's inputs present means every needed transfer ran; graph outputs stay to the end
    return Walk(steps=tuple(steps), per_device_peak=peak, live=live, during=during)


def evaluate_keys(problem: DeviceMemoryProblem, keys: np.ndarray, *, transferred: bool = False) -> Any:
    """Per-device peaks (population x devices) of a population of chromosomes, one numba call;
    with ``transferred``, also the bytes each one moves between devices: ``(peaks, bytes)``."""
    keys = np.ascontiguousarray(np.atleast_2d(keys), dtype=np.float64)
    if keys.shape[1] != chromosome_size(problem):
        raise ValueError(f"chromosomes must have {chromosome_size(problem)} keys, got {keys.shape[1]}")
    nd = problem.n_devices
    out = np.zeros((keys.shape[0], nd + 1), dtype=np.int64)
    evaluate_population(keys, nd, problem.transfer_slot, *problem.kernel_args(), np.empty(0, np.int64), out)
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
