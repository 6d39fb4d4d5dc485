"""How one per-device process runs its ops and measures its live peak: ONNX Runtime on the CPU, or PyTorch.

:mod:`onnx_sched.bench.runtimes.device_processes` runs a ``peak-mem-devices``
schedule with one OS process per device.  What a process runs its ops with is
this module's job, one class per runtime, each with the same four methods:

* :class:`OrtOps` (the default): one ONNX Runtime session per op, CPU provider,
  arena and memory pattern off, one intra-op thread.  Tensors are numpy arrays;
  the live peak is the process's native heap, traced by memray.
* :class:`TorchOps`: one onnx2torch module per op on a torch device (``cuda:N``, or
  ``cpu`` for ``torch:cpu``), built with :class:`~onnx_sched.bench.runtimes.torch_parts.TorchPart`.
  Tensors stay torch tensors on the device between ops.  On CUDA the live peak is
  the caching allocator's high-water mark of allocated bytes over the run
  (``torch.cuda.max_memory_allocated``, weights loaded before it apart): the GPU
  memory the tensors of the run held, plus any temporary buffer an op's module or
  kernel took while it ran (docs/results.md 14.6: an ``Add``'s at densenet's
  peak), which the memory model does not count.  On ``torch:cpu`` it is memray's
  native heap, as for ONNX Runtime.  An output that nothing reads (Dropout's mask)
  is not made: onnx2torch converts Dropout only without it, so the model counts
  bytes such a device does not hold.

A tensor that crosses devices leaves and arrives as host bytes (``to_host`` /
``from_host``): on CUDA that is one host copy on the way out and one device copy
on the way in, the host buffer dropped at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from onnx_sched.bench.runtimes.device_plan import DevicePlan

__all__ = ["OrtOps", "TorchOps", "device_ops"]


def _memray_heap(run: Callable[[], Any]) -> dict[str, int]:
    from onnx_sched.bench.heap import trace_heap

    _, trace = trace_heap(run)
    return {"heap_peak_bytes": trace.peak_bytes, "heap_end_bytes": trace.end_bytes}


class OrtOps:
    """Ops as single-node ONNX Runtime sessions on the CPU; tensors as numpy arrays."""

    measured_by = "memray heap"

    def __init__(self, op_models: Mapping[int, bytes]) -> None:
        import onnxruntime as ort

        from onnx_sched.bench.ort_runner import make_session_options

        so = make_session_options(arena=False, opt_level="none", threads=1, mem_pattern=False)
        self._sessions = {n: ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
                          for n, blob in op_models.items()}

    def run(self, node: int, feeds: Mapping[str, Any]) -> list[Any]:
        return self._sessions[node].run(None, dict(feeds))

    def to_host(self, value: Any) -> np.ndarray:
        return value

    def from_host(self, buf: np.ndarray) -> Any:
        return buf

    def heap(self, run: Callable[[], Any]) -> dict[str, int]:
        return _memray_heap(run)


class TorchOps:
    """Ops as single-node onnx2torch modules on ``device`` (``cuda:N`` or ``cpu``); tensors stay there.
    Build and run it inside :func:`~onnx_sched.bench.runtimes.torch_parts.worker_context`."""

    def __init__(self, op_models: Mapping[int, bytes], feeds: Mapping[int, Sequence[str]],
                 outputs: Mapping[int, Sequence[str]], device: str,
                 unread: Mapping[int, Sequence[str]] | None = None) -> None:
        import onnx
        import torch

        from onnx_sched.bench.runtimes.torch_parts import TorchPart

        self.device = device
        self._dev = torch.device(device)
        self._cuda = self._dev.type == "cuda"
        self.measured_by = "CUDA allocator" if self._cuda else "memray heap"
        self._outputs = {n: list(outputs[n]) for n in op_models}
        self._parts = {}
        for n, blob in op_models.items():
            model = onnx.load_from_string(blob)
            dropped = set((unread or {}).get(n, ()))
            if dropped and dropped != set(outputs[n]):  # e.g. Dropout's mask: onnx2torch converts no mask
                kept = [o for o in model.graph.output if o.name not in dropped]
                del model.graph.output[:]
                model.graph.output.extend(kept)
            self._parts[n] = TorchPart(model, device, feeds[n], [o.name for o in model.graph.output])

    def run(self, node: int, feeds: Mapping[str, Any]) -> list[Any]:
        dev_out, _ = self._parts[node](feeds)
        return [dev_out.get(o) for o in self._outputs[node]]  # None for an output nothing reads

    def to_host(self, value: Any) -> np.ndarray:
        import torch

        if not isinstance(value, torch.Tensor):
            return value
        return value.cpu().numpy()  # CUDA: a synchronous copy into a fresh host array; CPU: a view

    def from_host(self, buf: np.ndarray) -> Any:
        import torch

        t = torch.from_numpy(buf)
        return t.to(self._dev) if self._cuda else t  # CUDA: the device copy is the tensor's one allocation there

    def heap(self, run: Callable[[], Any]) -> dict[str, int]:
        if not self._cuda:
            return _memray_heap(run)
        import torch

        torch.cuda.synchronize(self._dev)
        torch.cuda.reset_peak_memory_stats(self._dev)
        base = torch.cuda.memory_allocated(self._dev)
        run()
        torch.cuda.synchronize(self._dev)
        return {"heap_peak_bytes": int(torch.cuda.max_memory_allocated(self._dev) - base),
                "heap_end_bytes": int(torch.cuda.memory_allocated(self._dev) - base)}


def device_ops(plan: DevicePlan, torch_device: str | None) -> OrtOps | TorchOps:
    """The runner of ``plan``'s ops: ONNX Runtime when ``torch_device`` is None, else PyTorch there (an
    output the plan frees right after its op, which nothing reads, is not made there: its value is None)."""
    if torch_device is None:
        return OrtOps(plan.op_models)
    from onnx_sched.bench.runtimes.device_plan import RunOp

    runs = [a for a in plan.actions if isinstance(a, RunOp)]
    return TorchOps(plan.op_models, {a.node: a.feeds for a in runs}, {a.node: a.outputs for a in runs},
                    torch_device, {a.node: [o for o in a.outputs if o in a.frees] for a in runs})
