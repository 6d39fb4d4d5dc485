"""A multi-device memory schedule run for real: one OS process per device, each measuring its own heap.

Paper 003's objective (``peak-mem-devices``) predicts a peak per device.  The split
executor (:mod:`onnx_sched.bench.split_executor`) runs parts in threads of one
process, so one heap holds every device's tensors; here each device is its own
process (``multiprocessing``, spawn), so each device's peak is measured apart:

* each process runs its :class:`~onnx_sched.bench.runtimes.device_plan.DevicePlan`
  in the schedule's order: one ONNX Runtime session per op (CPU provider, arena
  and memory pattern off, so every tensor is its own allocation, one intra-op
  thread), built with its weights before any measurement; or, for a device named
  in ``torch_devices``, one PyTorch module per op on a real accelerator (``cuda:N``)
  or ``torch:cpu``, its peak read from the CUDA allocator
  (:mod:`onnx_sched.bench.runtimes.device_ops`);
* a transfer is a raw write of the tensor's bytes into a pipe from the sender's
  array (no copy) and a read into a fresh ``np.empty`` on the receiver (the
  tensor's only allocation there): ``os.write`` / ``os.readv`` on the file
  descriptors of ``multiprocessing`` pipes, whose own ``recv_bytes_into`` would
  first copy the message into a growing buffer;
* tensors are dropped exactly when the cost model frees them (the plan's frees);
* each device's projection of the one total order is run as it comes.  Every
  transfer is a rendezvous of its two processes, and a projection of a total
  order cannot deadlock: the earliest unfinished step always has both of its
  processes done with everything before it.

:func:`measure_schedule` runs the schedule three times in each process: a
warm-up (first-run allocations of the sessions), a run under memray
(:func:`onnx_sched.bench.heap.trace_heap`: every native allocation of the
process, live-bytes high-water mark inside the run) and a run inside a
:class:`~onnx_sched.bench.runtimes.fresh_process.PeakRssWindow` (peak RSS delta,
the coarse second number).  The host's graph inputs are the caller's, received
before the run, so the prediction compared with device 0's heap leaves them out
(as ``bench`` does for one device).  Outputs are checked against a plain ONNX
Runtime run of the whole model.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from onnx_sched.bench.outputs import compare_outputs, output_tolerance, random_outputs
from onnx_sched.bench.runtimes.device_ops import device_ops
from onnx_sched.bench.runtimes.device_plan import (
    DevicePlan,
    PlacedSchedule,
    Recv,
    RunOp,
    Send,
    device_plans,
    weight_outputs,
)
from onnx_sched.errors import OnnxSchedError
from onnx_sched.importers.onnx_weights import with_weights

__all__ = ["DeviceMeasurement", "DeviceProcesses", "ScheduleMeasurement", "measure_schedule",
           "reference_outputs"]

#: Seconds a device process may take for one run (or to start) before the parent gives up.
TIMEOUT_S = 600.0


@dataclass(frozen=True)
class DeviceMeasurement:
    """One device's predicted and measured peaks (bytes) over one run of the schedule."""

    device: str
    predicted_peak_bytes: int
    heap_peak_bytes: int  # live high-water mark in the run, as measured_by says
    heap_end_bytes: int  # of that, live at the end of the run (graph outputs held here)
    peak_rss_delta: int  # peak RSS in the run minus RSS before it (MALLOC_MMAP_THRESHOLD_ fixed)
    ops: int
    sends: int
    receives: int
    seconds: float  # wall time of the unmeasured run
    runtime: str = "onnxruntime"  # what ran the ops: onnxruntime, or the torch device (cuda:0, cpu)
    measured_by: str = "memray heap"  # or "CUDA allocator" (its high-water mark of allocated bytes)

    @property
    def ratio(self) -> float:
        """Measured heap peak / predicted (nan when nothing is predicted)."""
        return self.heap_peak_bytes / self.predicted_peak_bytes if self.predicted_peak_bytes else float("nan")


@dataclass(frozen=True)
class ScheduleMeasurement:
    """Per-device measurements of one schedule, and whether its outputs equal a plain run's."""

    devices: tuple[DeviceMeasurement, ...]
    outputs_equal: bool
    max_abs_diff: float
    unchecked_outputs: tuple[str, ...] = ()  # not compared: an unseeded random op feeds them (random_outputs)

    def to_dict(self) -> dict[str, Any]:
        return {"devices": [{**asdict(m), "ratio": m.ratio} for m in self.devices],
                "outputs_equal": self.outputs_equal, "max_abs_diff": self.max_abs_diff,
                "unchecked_outputs": list(self.unchecked_outputs)}


# ----------------------------------------------------------------------------- device process side


def _write_all(fd: int, arr: np.ndarray) -> None:
    view = memoryview(np.ascontiguousarray(arr)).cast("B")
    while len(view):
        view = view[os.write(fd, view):]


def _read_into(fd: int, arr: np.ndarray) -> None:
    view = memoryview(arr).cast("B")
    while len(view):
        got = os.readv(fd, [view])
        if got == 0:
            raise OnnxSchedError("a device process closed its pipe in the middle of a transfer")
        view = view[got:]


def _execute(plan: DevicePlan, ops: Any, held: dict[str, Any], reads: Mapping[int, int],
             writes: Mapping[int, int]) -> None:
    """Run the plan's actions in order on ``held`` (tensor name -> the runtime's value)."""
    for act in plan.actions:
        if isinstance(act, RunOp):
            outs = ops.run(act.node, {x: held[x] for x in act.feeds})
            held.update(zip(act.outputs, outs))
            del outs
            for x in act.frees:
                del held[x]
        elif isinstance(act, Send):
            _write_all(writes[act.to], ops.to_host(held[act.tensor]))
            if act.free:
                del held[act.tensor]
        else:
            buf = np.empty(act.shape, dtype=np.dtype(act.dtype))
            _read_into(reads[act.source], buf)
            held[act.tensor] = ops.from_host(buf)
            del buf


def _measured_run(mode: str, ops: Any, run: Any) -> dict[str, Any]:
    if mode == "heap":
        return ops.heap(run)
    if mode == "rss":
        from onnx_sched.bench.runtimes.fresh_process import PeakRssWindow

        with PeakRssWindow() as window:
            run()
        return {"peak_rss_delta": window.fields()["peak_rss_delta"]}
    t0 = time.perf_counter()
    run()
    return {"seconds": time.perf_counter() - t0}


def _device_main(plan: DevicePlan, ctrl: Any, reads: Mapping[int, Any], writes: Mapping[int, Any],
                 torch_device: str | None = None) -> None:
    """A device process: build the op runners, then run the plan once per ``("run", mode, feed)``."""
    try:
        context = contextlib.nullcontext()
        if torch_device is not None:
            from onnx_sched.bench.runtimes.torch_parts import worker_context

            context = worker_context(torch_device)
        with context:
            ops = device_ops(plan, torch_device)
            read_fds = {d: c.fileno() for d, c in reads.items()}
            write_fds = {d: c.fileno() for d, c in writes.items()}
            ctrl.send(("ready", ops.measured_by))
            while True:
                msg = ctrl.recv()
                if msg[0] == "stop":
                    return
                mode, held = msg[1], dict(msg[2])  # the host's graph inputs arrive before the run
                del msg
                stats = _measured_run(mode, ops, lambda held=held: _execute(plan, ops, held, read_fds, write_fds))
                outputs = {name: np.asarray(ops.to_host(held[name])) for name in plan.outputs}
                held.clear()
                ctrl.send(("done", stats, outputs))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which stops every process
        with contextlib.suppress(OSError):
            ctrl.send(("error", f"{type(exc).__name__}: {exc}"))


# ----------------------------------------------------------------------------- parent side


@contextlib.contextmanager
def _environment(extra: Mapping[str, str]) -> Iterator[None]:
    """``extra`` in ``os.environ`` while the device processes start (spawn copies it)."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class DeviceProcesses:
    """One spawned process per device plan, joined by one pipe per ordered device pair.

    ``run(feed, mode)`` runs the schedule once everywhere (``mode``: ``"time"``,
    ``"heap"`` or ``"rss"``) and returns the graph outputs and each device's stats.
    ``torch_devices``: per plan, the torch device that runs its ops (``cuda:N``, ``cpu``), or
    None for ONNX Runtime on the CPU (the default for every plan).
    """

    def __init__(self, plans: Sequence[DevicePlan], timeout_s: float = TIMEOUT_S,
                 torch_devices: Sequence[str | None] = ()) -> None:
        from onnx_sched.bench.runtimes.fresh_process import MALLOC_ENV

        ctx = mp.get_context("spawn")
        self.plans = list(plans)
        runners = list(torch_devices) or [None] * len(self.plans)
        if len(runners) != len(self.plans):
            raise ValueError(f"{len(runners)} torch devices for {len(self.plans)} device plans")
        self.timeout_s = timeout_s
        n = len(self.plans)
        pipes = {(a, b): ctx.Pipe(duplex=False) for a in range(n) for b in range(n) if a != b}  # (reader, writer)
        self._ctrl = []
        self._procs = []
        with _environment(MALLOC_ENV):
            for d, plan in enumerate(self.plans):
                parent, child = ctx.Pipe()
                reads = {a: pipes[(a, d)][0] for a in range(n) if a != d}
                writes = {b: pipes[(d, b)][1] for b in range(n) if b != d}
                proc = ctx.Process(target=_device_main, args=(plan, child, reads, writes, runners[d]), daemon=True,
                                   name=f"onnx-sched-device-{plan.name}")
                proc.start()
                child.close()
                self._ctrl.append(parent)
                self._procs.append(proc)
        for r, w in pipes.values():
            r.close()
            w.close()
        #: per device, what its heap peak measures (memray's native heap, or the CUDA allocator)
        self.measured_by = [msg[1] for msg in self._collect("ready")]

    def _collect(self, expected: str) -> list[tuple]:
        out = []
        for plan, conn in zip(self.plans, self._ctrl):
            if not conn.poll(self.timeout_s):
                self.close()
                raise OnnxSchedError(f"device process {plan.name} did not answer within {self.timeout_s:.0f} s")
            try:
                msg = conn.recv()
            except EOFError:
                msg = ("error", "the process exited")
            if msg[0] != expected:
                self.close()
                raise OnnxSchedError(f"device process {plan.name} failed: {msg[1]}")
            out.append(msg)
        return out

    def run(self, feed: Mapping[str, np.ndarray], mode: str = "time") -> tuple[dict[str, np.ndarray], list[dict]]:
        """Run once; the host (device 0) gets ``feed``.  Returns outputs and per-device stats."""
        for d, conn in enumerate(self._ctrl):
            conn.send(("run", mode, dict(feed) if d == 0 else {}))
        outputs: dict[str, np.ndarray] = {}
        stats = []
        for msg in self._collect("done"):
            stats.append(msg[1])
            outputs.update(msg[2])
        return outputs, stats

    def close(self) -> None:
        """Stop the processes (those that do not stop in 5 s are terminated)."""
        for conn in self._ctrl:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("stop",))
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for conn in self._ctrl:
            conn.close()
        self._ctrl, self._procs = [], []

    def __enter__(self) -> DeviceProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def reference_outputs(model: Any, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph outputs of a plain single-session ONNX Runtime run of ``model`` (``ModelProto``)."""
    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.ort_session import inference_session

    so = make_session_options(arena=True, opt_level="none", threads=1)
    sess = inference_session(model, so, ["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(names, dict(feed))))


def measure_schedule(sched: PlacedSchedule, feed: Mapping[str, np.ndarray],
                     torch_devices: Mapping[str, str] | None = None) -> ScheduleMeasurement:
    """Run ``sched`` with one process per device (warm-up, heap run, RSS run); compare each
    device's measured peaks with the model's and the outputs with a plain ORT run.

    ``torch_devices`` maps a device name of the schedule to the torch device that runs its
    ops (``{"GPU": "cuda:0"}``; labels as the split executor takes them: ``cuda:N``,
    ``torch:cpu``); the others run on ONNX Runtime's CPU provider."""
    from onnx_sched.bench.runtimes.torch_parts import tolerance, torch_device

    plans = device_plans(sched)
    asked = dict(torch_devices or {})
    unknown = sorted(set(asked) - {p.name for p in plans})
    if unknown:
        raise ValueError(f"torch devices for {unknown}, which the schedule does not have "
                         f"(its devices: {', '.join(p.name for p in plans)})")
    runner_of = {name: torch_device(label) for name, label in asked.items()}
    for name, runner in runner_of.items():
        if runner is None:
            raise ValueError(f"{name}={asked[name]}: not a torch device (cuda:N or torch:cpu)")
    runners = [runner_of.get(p.name) for p in plans]
    with DeviceProcesses(plans, torch_devices=runners) as procs:
        _, timed = procs.run(feed, "time")
        _, heap = procs.run(feed, "heap")
        outputs, rss = procs.run(feed, "rss")
        measured_by = procs.measured_by
    outputs = {**weight_outputs(sched.imported), **outputs}  # graph outputs no device computes: weights
    model = with_weights(sched.imported)
    tol = max(output_tolerance(model), *tolerance([r for r in runners if r]))
    unchecked = random_outputs(model)
    equal, worst = compare_outputs(reference_outputs(model, feed), outputs, tol, unchecked,
                                   scaled=any(runners))  # torch kernels sum in other orders
    devices = tuple(
        DeviceMeasurement(device=p.name, predicted_peak_bytes=p.predicted_peak_bytes,
                          heap_peak_bytes=h["heap_peak_bytes"], heap_end_bytes=h["heap_end_bytes"],
                          peak_rss_delta=r["peak_rss_delta"], ops=sum(isinstance(a, RunOp) for a in p.actions),
                          sends=sum(isinstance(a, Send) for a in p.actions),
                          receives=sum(isinstance(a, Recv) for a in p.actions), seconds=t["seconds"],
                          runtime=runner or "onnxruntime", measured_by=by)
        for p, t, h, r, runner, by in zip(plans, timed, heap, rss, runners, measured_by))
    return ScheduleMeasurement(devices=devices, outputs_equal=equal, max_abs_diff=worst,
                               unchecked_outputs=tuple(sorted(unchecked)))
