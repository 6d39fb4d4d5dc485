"""Measuring profiles on torch devices: per-op latency of a CUDA GPU (``cuda:N``) or of torch's CPU device.

:func:`profile_torch` converts the whole model the way the split executor runs a
torch part (:func:`~onnx_sched.bench.runtimes.torch_parts.convert_part`: onnx2torch,
one submodule per ONNX node) and times every node's submodule, with CUDA events
on the device's own stream on CUDA and ``perf_counter`` on the CPU (median over
repeats; :func:`~onnx_sched.bench.runtimes.torch_parts.time_ops`).  Weight nodes
are folded into constants first and get 0 s, as ORT's profile gives them nothing.

:func:`measure_torch_transfer` calibrates host <-> device copies alone as the
split executor makes them: pinned host memory and ``non_blocking`` copies on the
worker's stream, timed with CUDA events, one ``latency + bytes / bandwidth`` fit
per direction; on torch's CPU device, the hand-over (``torch.from_numpy`` in,
``.numpy()`` out).  A placement pays more than the copy at each boundary: the
producing part ends (its stream is synchronised), its worker thread hands the
tensor over and the consumer's part starts.  On an H200 beside one CPU core the
copies fit 8-21 us + 53-57 GB/s, while planned splits ran 0.2-0.6 ms per part
slower than predicted with them (docs/results.md, section 17.3), so what a profile
records is :func:`measure_torch_boundary`, a boundary timed through the split
executor itself.  :func:`profile_torch_set` is the per-op times and that boundary
in one profile file (``onnx-sched profile --device cuda:0``), written for each host
device name given (default ``CPU`` and ``CPUExecutionProvider``, the OpenVINO and
ORT CPU profiles' names), so a CPU profile file merged with this one plans splits
with measured boundaries.  torch is imported when called.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from onnx_sched.onnx_inline import inline_calls
from onnx_sched.profiling.profiled_model import profiled_model
from onnx_sched.profiling.profiles import DeviceProfile, ProfileSet, TransferModel
from onnx_sched.profiling.rates import fit_rates
from onnx_sched.profiling.transfer import fit_transfer, measure_host_boundary

__all__ = ["measure_torch_boundary", "measure_torch_transfer", "profile_torch", "profile_torch_set"]


def _device_name(device: str) -> tuple[str, str, str]:
    """(profile device name, kind, full name) of a torch device string."""
    import torch

    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(device))
        return device, "dgpu", f"{p.name}, {p.total_memory / 2**30:.1f} GiB (torch {torch.__version__})"
    return "torch:cpu", "cpu", f"PyTorch {torch.__version__} CPU"


def profile_torch(imported: Any, device: str = "cpu", repeats: int = 10, warmup: int = 2, threads: int = 1,
                  seed: int = 0) -> DeviceProfile:
    """Per-op latency of an imported ONNX model on a torch device (``cuda:N`` or ``cpu``)."""
    import torch

    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.runtimes.torch_padding import source_node
    from onnx_sched.bench.runtimes.torch_parts import OUTPUT_NODE, convert_part, synchronize, time_ops, worker_context

    if device.startswith("cuda") and not torch.cuda.is_available():
        from onnx_sched.errors import DeviceError

        raise DeviceError(f"{device}: torch sees no CUDA device")
    graph = imported.graph
    named, owner = inline_calls(profiled_model(imported))  # a call's body times add up to the call
    module, prepared = convert_part(named)
    feed = import_feed(imported, seed)
    inits = {t.name for t in prepared.graph.initializer}
    names = [n.name for n in prepared.graph.node if not n.name.startswith(OUTPUT_NODE)]
    samples: list[dict[str, float]] = []
    totals: list[float] = []
    with worker_context(device, threads):
        module = module.to(torch.device(device))
        args = [torch.from_numpy(np.require(feed[i.name], requirements="C")).to(device)
                for i in prepared.graph.input if i.name not in inits]
        for i in range(warmup + repeats):
            synchronize(device)
            t0 = time.perf_counter()
            module(*args)
            synchronize(device)
            dt = time.perf_counter() - t0
            per, _ = time_ops(module, args, names, device)
            if i >= warmup:
                totals.append(dt)
                by_op: dict[str, float] = {}
                for node, secs in per.items():
                    op = owner.get(source_node(node), source_node(node))
                    by_op[op] = by_op.get(op, 0.0) + secs
                samples.append(by_op)
    op_secs = {n: float(np.median([s.get(n, 0.0) for s in samples])) for n in graph.op_names}
    name, kind, full = _device_name(device)
    timer = "CUDA events on the worker stream" if device.startswith("cuda") else "perf_counter"
    base = DeviceProfile(name=name, kind=kind, full_name=full, backend="torch", model=graph.name, op_seconds=op_secs,
                         total_seconds=float(np.median(totals)),
                         notes=f"PyTorch via onnx2torch, per-op {timer}, {threads} CPU thread(s), median of {repeats} runs")
    return replace(base, **fit_rates(graph, op_secs))


def measure_torch_transfer(device: str = "cpu", sizes: Sequence[int] = (1 << 12, 1 << 16, 1 << 20, 1 << 22, 1 << 24),
                           repeats: int = 7) -> tuple[TransferModel, TransferModel]:
    """(host -> device, device -> host) transfer models of ``device``, calibrated on real copies
    of each size (median per size, least squares; module docstring)."""
    import torch

    from onnx_sched.bench.runtimes.torch_parts import worker_context

    cuda = device.startswith("cuda")
    fits = []
    with worker_context(device):
        dev = torch.device(device)
        for direction in ("h2d", "d2h"):
            xs, ys = [], []
            for size in sizes:
                n = max(1, int(size) // 4)
                host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
                if cuda:
                    pinned = torch.from_numpy(host).pin_memory()
                    on_dev = torch.empty(n, dtype=torch.float32, device=dev)
                    src, dst = (pinned, on_dev) if direction == "h2d" else (on_dev, pinned)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

                    def once() -> float:
                        start.record()
                        dst.copy_(src, non_blocking=True)
                        end.record()
                        end.synchronize()
                        return start.elapsed_time(end) * 1e-3
                else:
                    t = torch.from_numpy(host)

                    def once() -> float:
                        t0 = time.perf_counter()
                        torch.from_numpy(np.ascontiguousarray(host)) if direction == "h2d" else t.numpy()
                        return time.perf_counter() - t0
                once()
                xs.append(n * 4)
                ys.append(float(np.median([once() for _ in range(repeats)])))
            fits.append(fit_transfer(xs, ys))
    return fits[0], fits[1]


def profile_torch_set(imported: Any, device: str, repeats: int = 10, threads: int = 1, transfer: bool = True,
                      hosts: Sequence[str] = ("CPU", "CPUExecutionProvider")) -> ProfileSet:
    """A one-device profile set of ``device`` (``cuda:N`` / ``cpu``) with the measured cost of a split-executor
    boundary between it and an ONNX Runtime CPU core, written for each of ``hosts`` in both directions (module
    docstring)."""
    prof = profile_torch(imported, device, repeats=repeats, threads=threads)
    if not transfer:
        return ProfileSet((prof,))
    return ProfileSet.with_hosts(prof, measure_torch_boundary(device), hosts)


def measure_torch_boundary(device: str, threads: int = 1) -> TransferModel:
    """One split-executor boundary between an ONNX Runtime CPU device (``threads`` threads from core 0) and the torch
    ``device``'s worker (the next core): :func:`~onnx_sched.profiling.transfer.measure_host_boundary`."""
    return measure_host_boundary("torch:cpu" if device == "cpu" else device, threads)
