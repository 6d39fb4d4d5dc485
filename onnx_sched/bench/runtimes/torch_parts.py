"""Run split parts through PyTorch: CUDA devices (``cuda:N``) and torch's CPU device (``torch:cpu``).

The split executor (:mod:`onnx_sched.bench.split_executor`) runs a part placed on
a torch device with a :class:`TorchPart` instead of an ONNX Runtime session.
The part's ONNX model is converted with **onnx2torch** (a maintained converter
that builds a ``torch.fx.GraphModule`` of one submodule per ONNX node, so per-op
timing can map each submodule back to its node; PyTorch itself only exports to
ONNX and has no importer), after :func:`prepare_for_torch`:

* constant sub-graphs (the corpus's stripped-weight ``ConstantOfShape`` nodes,
  ``Identity`` of an initializer) are evaluated once with ONNX Runtime and become
  initializers: onnx2torch reads Conv / Gemm weights only from initializers;
* ``Dropout`` whose mask nothing reads (an identity at inference; onnx2torch
  lacks the opset-7 version) becomes ``Identity``;
* ``CumSum`` gets its ``reverse=0`` default written out (onnx2torch 1.5.15 defaults
  to 1: RoBERTa's position ids came out reversed);
* an omitted optional input at the end of a node's inputs (an empty name) is
  dropped: onnx2torch looks the empty name up (Swin-v2's ``Clip(x, min, "")``);
* ``Clip(x, "", max)`` gets its omitted min as a constant, the lowest value of the type
  (-inf for floats): onnx2torch refuses an omitted min ("Dynamic value of min/max");
* ``Flatten`` with a static output shape becomes ``Reshape`` to it (onnx2torch's
  Flatten fails for ``axis`` = rank, e.g. DistilBERT's ``[1, 128] -> [128, 1]``);
* ``auto_pad = SAME_*`` becomes explicit pads, and an ``AveragePool`` with
  asymmetric pads a ``Pad`` and one without (:mod:`.torch_padding`: onnx2torch
  refuses both; EfficientNet-B0, Inception-v1);
* every part output gets its own ``Identity`` node, so each output is one
  single-output node in graph-output order (onnx2torch returns a multi-output
  node's whole tuple otherwise);
* shapes are inferred again, filling in what the part's value_info (kept from the
  source by :func:`~onnx_sched.bench.split_executor.split_model`) lacks: some
  converters (LayerNormalization) read their input's static shape.

Copies: exactly the tensors that cross devices are copied.  A torch part keeps
tensors that only parts on its own device read on that device; inputs that come
from the host (graph inputs, ONNX Runtime parts) are copied in, pinned
(``pin_memory``) and ``non_blocking`` on CUDA; outputs that another device or the
caller reads are copied out into pinned host memory (CUDA) and handed on as
numpy.  Each device's worker thread runs its parts on its own CUDA stream
(:func:`worker_context`), and a part ends with a stream synchronize, so its busy
time is real and its host outputs are complete.

Tolerance (:data:`TOLERANCE`): a torch part computes what ONNX Runtime computes
with different kernels, so outputs are compared with ``rtol = atol = 1e-4`` on
torch's CPU device (measured max abs diff on the corpus: docs) and
``1e-3`` on CUDA, with TF32 switched off (cuDNN / cuBLAS still pick other
reduction orders than ORT's CPU kernels); ``atol`` is a share of each output's largest magnitude
(``compare_outputs(scaled=True)``), since another summation order's error grows with the magnitudes summed.

torch and onnx2torch are imported only when a torch device is used; this module
imports without them.  onnx2torch imports torchvision for two ops (NMS,
RoiAlign); when torchvision is missing or cannot load (a CUDA torchvision wheel
beside a CPU torch), a stub that raises on use stands in (:func:`onnx2torch_module`),
which also maps ``GreaterOrEqual`` / ``LessOrEqual`` version 16 (bfloat16 added) to
onnx2torch's version-12 converters (Swin's masks need them).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_sched.bench.runtimes.torch_padding import explicit_padding
from onnx_sched.onnx_structure import annotate_shapes, copy_except

__all__ = ["OUTPUT_NODE", "TOLERANCE", "TorchPart", "convert_part", "onnx2torch_module", "outputs_close",
           "prepare_for_torch", "synchronize", "time_ops", "tolerance", "torch_device", "worker_context"]

#: Name prefix of the output ``Identity`` nodes :func:`prepare_for_torch` adds (cut out again after conversion).
OUTPUT_NODE = "onnx_sched_out/"

#: (rtol, atol) of a torch device's outputs against ONNX Runtime's, by device type.
TOLERANCE = {"cpu": (1e-4, 1e-4), "cuda": (1e-3, 1e-3)}

_CUDA = re.compile(r"^(?:torch:)?cuda(?::(\d+))?$", re.IGNORECASE)


def torch_device(label: str) -> str | None:
    """The torch device of a runtime device label, or None for an ONNX Runtime device:
    ``cuda:N`` / ``torch:cuda:N`` -> ``cuda:N`` (``cuda`` -> ``cuda:0``), ``torch:cpu`` -> ``cpu``.
    Pure string parsing: torch is not imported."""
    s = label.strip()
    m = _CUDA.match(s)
    if m:
        return f"cuda:{int(m.group(1) or 0)}"
    if s.lower() == "torch:cpu":
        return "cpu"
    return None


def tolerance(devices: Sequence[str]) -> tuple[float, float]:
    """The loosest (rtol, atol) of the torch devices among ``devices`` (torch device strings)."""
    kinds = {d.split(":")[0] for d in devices if d}
    return max((TOLERANCE[k] for k in kinds if k in TOLERANCE), default=(1e-5, 1e-5))


def outputs_close(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], rtol: float, atol: float) -> bool:
    """Every output of ``got`` equals ``ref``'s within ``rtol``/``atol`` (NaN == NaN; exact for non-floats;
    sequences element by element): :func:`~onnx_sched.bench.outputs.compare_outputs` with the torch tolerance."""
    from onnx_sched.bench.outputs import compare_outputs

    return compare_outputs(ref, got, rtol, atol=atol, scaled=True)[0]


def _stub_torchvision(exc: BaseException) -> None:
    """Stand a stub in for torchvision that raises on use (onnx2torch imports it for NMS and RoiAlign)."""
    import types

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    reason = f"torchvision cannot be imported ({type(exc).__name__}: {str(exc)[:120]})"

    def missing(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"this op needs torchvision: {reason}")

    tv, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.nms = ops.roi_align = ops.box_convert = missing  # what onnx2torch's NMS / RoiAlign call
    tv.ops = ops
    tv.__onnx_sched_stub__ = reason
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = tv, ops


def onnx2torch_module() -> Any:
    """``import onnx2torch``, standing in a stub for torchvision when it cannot be imported."""
    if "onnx2torch" not in sys.modules:
        try:
            import torchvision  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - missing, or a wheel built for another torch
            _stub_torchvision(exc)
    try:
        import onnx2torch
        from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY, OperationDescription
    except ImportError as exc:
        raise ImportError("torch devices need onnx2torch: pip install 'onnx-sched[gpu]'") from exc
    for op in ("GreaterOrEqual", "LessOrEqual"):  # version 16 only adds bfloat16: version 12's converter holds
        v12, v16 = (OperationDescription(domain="", operation_type=op, version=v) for v in (12, 16))
        if v12 in _CONVERTER_REGISTRY and v16 not in _CONVERTER_REGISTRY:
            _CONVERTER_REGISTRY[v16] = _CONVERTER_REGISTRY[v12]
    from onnx2torch import converter

    if not hasattr(converter.safe_shape_inference, "__wrapped__"):
        converter.safe_shape_inference = _light_shape_inference(converter.safe_shape_inference)
    return onnx2torch


def _light_shape_inference(original: Callable[..., onnx.ModelProto]) -> Callable[..., onnx.ModelProto]:
    """onnx2torch's shape inference (run first thing by ``convert``) on the model's structure only, its findings
    written into the model (:func:`~onnx_sched.onnx_structure.annotate_shapes`): the same annotations, without
    serializing and copying every weight (seconds for a BERT).  A path goes to ``original``."""
    def infer(model: Any, **kwargs: Any) -> Any:
        if not isinstance(model, onnx.ModelProto):
            return original(model, **kwargs)
        annotate_shapes(model, **kwargs)
        return model

    infer.__wrapped__ = original  # type: ignore[attr-defined]
    return infer


def _fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Nodes computable from initializers alone become initializers: an ``Identity`` of a weight is that weight
    under the output's name (exporters route shared weights through one; no run), the others run once in ONNX
    Runtime with only the initializers they read."""
    g = model.graph
    weights = {t.name: t for t in g.initializer}
    const_nodes: list[int] = []
    const_out: set[str] = set()
    for i, n in enumerate(g.node):
        if n.op_type in ("If", "Loop", "Scan") or n.domain not in ("", "ai.onnx"):
            continue
        if all(x in weights or x in const_out for x in n.input if x):
            const_nodes.append(i)
            const_out.update(o for o in n.output if o)
    if not const_nodes:
        return model
    from onnx_sched.importers.control_flow import subgraph_reads

    const = set(const_nodes)
    rest = [n for i, n in enumerate(g.node) if i not in const]
    used = {x for n in rest for x in [*n.input, *subgraph_reads(n)]} | {o.name for o in g.output}
    alias: dict[str, onnx.TensorProto] = {}  # an Identity's output: the weight it passes on
    computed: list[int] = []
    for i in const_nodes:
        n = g.node[i]
        source = alias.get(n.input[0], weights.get(n.input[0])) if n.op_type == "Identity" else None
        if source is not None:
            alias[n.output[0]] = source
        else:
            computed.append(i)

    def named(name: str) -> onnx.TensorProto:
        if name in weights:
            return weights[name]
        tensor = onnx.TensorProto()
        tensor.CopyFrom(alias[name])
        tensor.name = name
        return tensor

    needed = [o for i in computed for o in g.node[i].output if o and o in used]
    values: list[Any] = []
    if needed:
        import onnxruntime as ort

        reads = dict.fromkeys(x for i in computed for x in [*g.node[i].input, *subgraph_reads(g.node[i])]
                              if x in weights or x in alias)
        sub = helper.make_graph([g.node[i] for i in computed], "constants", [],
                                [helper.make_empty_tensor_value_info(x) for x in needed],
                                initializer=[named(x) for x in reads])
        # IR >= 4: an initializer need not be a graph input (IR-3 models list them as inputs; this graph has none)
        m = helper.make_model(sub, opset_imports=list(model.opset_import), ir_version=max(int(model.ir_version), 4))
        so = ort.SessionOptions()
        so.log_severity_level = 3
        values = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(needed, {})
    out = onnx.ModelProto()
    copy_except(model, out, "graph")
    copy_except(g, out.graph, "node", "initializer", "input")
    out.graph.node.extend(rest)
    out.graph.initializer.extend([t for t in g.initializer if t.name in used])
    out.graph.initializer.extend(named(x) for x in alias if x in used)
    out.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), x) for x, v in zip(needed, values))
    dropped = set(weights) - used  # IR-3 models also list their initializers as graph inputs: drop those too
    out.graph.input.extend(i for i in g.input if i.name not in dropped)
    return out


def prepare_for_torch(model: onnx.ModelProto) -> onnx.ModelProto:
    """The rewrites onnx2torch needs (module docstring): fold constants, Dropout -> Identity,
    one ``Identity`` per graph output (named ``<output>__out``)."""
    out = _fold_constants(model)
    if out is model:  # nothing folded: the caller's model is not ours to change
        out = onnx.ModelProto()
        out.CopyFrom(model)
    try:
        annotate_shapes(out, check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - keep what the part has
        pass
    g = out.graph
    infos = list(g.input) + list(g.value_info) + list(g.output)
    shapes = {vi.name: [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
              for vi in infos if vi.type.tensor_type.HasField("shape")}
    elem_types = {vi.name: vi.type.tensor_type.elem_type for vi in infos if vi.type.tensor_type.elem_type}
    explicit_padding(out, shapes, elem_types)
    elem_types.update((t.name, t.data_type) for t in g.initializer)
    read = {x for n in g.node for x in n.input} | {o.name for o in g.output}
    for n in g.node:
        while len(n.input) > 1 and not n.input[-1]:  # an omitted optional input last: the same node without it
            del n.input[-1]
        if n.op_type == "Dropout" and not any(o in read for o in n.output[1:]):  # the mask is unread
            n.op_type = "Identity"
            del n.attribute[:]
            n.input[:] = n.input[:1]
            n.output[:] = n.output[:1]
        elif n.op_type == "Clip" and len(n.input) == 3 and not n.input[1]:  # min omitted, max given
            elem = elem_types.get(n.input[0])
            if elem:  # onnx2torch takes no omitted min: the lowest value of the type is the same clip
                dtype = helper.tensor_dtype_to_np_dtype(elem)
                lowest = -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
                n.input[1] = f"{n.output[0]}__min"
                g.initializer.append(numpy_helper.from_array(np.asarray(lowest, dtype), n.input[1]))
        elif n.op_type == "CumSum" and not any(a.name == "reverse" for a in n.attribute):
            n.attribute.append(helper.make_attribute("reverse", 0))  # onnx2torch's default is 1, ONNX's 0
        elif n.op_type == "Flatten" and min(shapes.get(n.output[0], [-1]), default=-1) > 0:
            shape_name = f"{n.output[0]}__shape"
            g.initializer.append(numpy_helper.from_array(np.asarray(shapes[n.output[0]], np.int64), shape_name))
            n.op_type = "Reshape"
            del n.attribute[:]
            n.input.append(shape_name)
    outputs = list(g.output)
    for o in outputs:
        g.node.append(helper.make_node("Identity", [o.name], [f"{o.name}__out"], name=f"{OUTPUT_NODE}{o.name}"))
    del g.output[:]
    for o in outputs:
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(o)
        vi.name = f"{o.name}__out"
        g.output.append(vi)
    return out


def convert_part(model: onnx.ModelProto) -> tuple[Any, onnx.ModelProto]:
    """The ``torch.fx.GraphModule`` (eval mode) of a part and the model it was converted from
    (:func:`prepare_for_torch` of ``model``); an op onnx2torch has no converter for is a one-line
    ``ValueError`` naming it.  The module runs the part's own nodes only (no output copies).
    Model-local functions are inlined first (onnx2torch converts calls of none):
    :func:`~onnx_sched.onnx_inline.inline_calls` names their body's nodes."""
    import re

    from onnx_sched.onnx_inline import inline_calls

    prepared = prepare_for_torch(inline_calls(model)[0])
    try:
        module = onnx2torch_module().convert(prepared).eval()
    except NotImplementedError as exc:  # onnx2torch: "Converter is not implemented (OperationDescription(...))"
        op = re.search(r"domain='([^']*)', operation_type='([^']*)', version=(\d+)", str(exc))
        what = (f"cannot convert {op.group(1) + '.' if op.group(1) else ''}{op.group(2)} (op version {op.group(3)})"
                if op else f"cannot convert this model ({' '.join(str(exc).split())})")
        raise ValueError(f"PyTorch devices run ONNX through onnx2torch, which {what}: run such ops on ONNX Runtime "
                         "(a device that is not cuda:N / torch:cpu, or profile --runtime ort)") from None
    return _without_output_copies(module), prepared


def _without_output_copies(module: Any) -> Any:
    """``module`` with the output ``Identity`` nodes of :func:`prepare_for_torch` cut out: they only fix
    onnx2torch's output order, and its Identity clones the tensor (an extra copy of every part output,
    a second buffer of it at the peak)."""
    graph = module.graph
    for n in list(graph.nodes):
        if n.op == "call_module" and str(n.target).startswith(OUTPUT_NODE):
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)
    graph.lint()
    module.delete_all_unused_submodules()
    module.recompile()
    return module


@contextlib.contextmanager
def worker_context(device: str, threads: int = 1) -> Iterator[None]:
    """What a device worker thread runs inside for its life: inference mode (thread-local), and on
    CUDA the device and a stream of its own; torch CPU threads = ``threads`` (process-wide)."""
    import torch

    with torch.inference_mode():
        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise RuntimeError(f"{device}: torch sees no CUDA device")
            torch.backends.cuda.matmul.allow_tf32 = False  # TOLERANCE assumes full fp32
            torch.backends.cudnn.allow_tf32 = False
            dev = torch.device(device)
            with torch.cuda.device(dev), torch.cuda.stream(torch.cuda.Stream(dev)):
                yield
        else:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
            yield


def start_device(device: str) -> None:
    """Pay a torch device's once-per-process start now: importing torch and onnx2torch, and on CUDA the context and
    loading cuDNN / cuBLAS (a small convolution and matrix product; each worker thread still makes its own
    handles), so a timed build afterwards measures the build alone
    (:func:`~onnx_sched.bench.runtimes.placement_timing.run_cost`).  On torch's CPU device it also sets one torch
    thread, as the split executor's workers do."""
    import torch

    onnx2torch_module()
    with worker_context(device):
        x = torch.ones((1, 1, 4, 4), device=device)
        torch.nn.functional.conv2d(x, torch.ones((1, 1, 3, 3), device=device)).sum().item()
        (x[0, 0] @ x[0, 0]).sum().item()


def synchronize(device: str) -> None:
    """Wait for the calling thread's current stream on ``device`` (no-op on CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.current_stream(torch.device(device)).synchronize()


class TorchPart:
    """One part on a torch device.  ``__call__(values, host_outputs)`` takes input values (numpy
    arrays from the host, or torch tensors already on this device) and returns
    ``(device_values, host_values)``: every output as a device tensor, and the outputs named in
    ``host_outputs`` also copied to host numpy.  Call it inside :func:`worker_context`."""

    def __init__(self, model: onnx.ModelProto, device: str, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        import torch

        self.device = device
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._dev = torch.device(device)
        self._cuda = self._dev.type == "cuda"
        if self._cuda and not torch.cuda.is_available():
            from onnx_sched.errors import DeviceError

            raise DeviceError(f"{device}: torch sees no CUDA device")
        module, _ = convert_part(model)
        self.module = module.to(self._dev)
        if self._cuda:
            torch.cuda.synchronize(self._dev)  # weights are on the device before any worker stream reads them
        order = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        if order != self.inputs:
            raise ValueError(f"part inputs {self.inputs} differ from its graph inputs {order}")

    def _to_device(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            return value if value.device == self._dev else value.to(self._dev, non_blocking=self._cuda)
        t = torch.from_numpy(np.require(value, requirements="C"))  # keeps 0-d (ascontiguousarray: 1-d)
        if self._cuda:
            t = t.pin_memory().to(self._dev, non_blocking=True)  # host -> device on this worker's stream
        return t

    def __call__(self, values: Mapping[str, Any], host_outputs: Sequence[str] = ()
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        import torch

        args = [self._to_device(values[x]) for x in self.inputs]
        res = self.module(*args)
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        dev_out = dict(zip(self.outputs, res))
        copies: dict[str, Any] = {}
        for name in host_outputs:
            t = dev_out[name]
            if self._cuda:
                buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                buf.copy_(t, non_blocking=True)  # device -> pinned host on this worker's stream
                copies[name] = buf
            else:
                copies[name] = t
        synchronize(self.device)
        return dev_out, {k: np.require(v.numpy(), requirements="C") for k, v in copies.items()}  # C order, 0-d kept


def time_ops(module: Any, args: Sequence[Any], node_names: Sequence[str], device: str
             ) -> tuple[dict[str, float], float]:
    """One run of a converted model (:func:`convert_part`), timing each ONNX node's submodule:
    CUDA events on CUDA, ``perf_counter`` on CPU.  onnx2torch makes one ``call_module`` per
    node of the prepared model in file order, so the i-th one is ``node_names[i]``.
    Returns (seconds per node name, end-to-end seconds)."""
    import torch
    from torch import fx

    cuda = device.startswith("cuda")
    calls = [n for n in module.graph.nodes if n.op == "call_module"]
    if len(calls) != len(node_names):
        raise ValueError(f"converted module has {len(calls)} modules for {len(node_names)} ONNX nodes")
    name_of = {n: node_names[i] for i, n in enumerate(calls)}
    marks: list[tuple[str, Any, Any]] = []
    clock: Callable[[], Any] = (lambda: torch.cuda.Event(enable_timing=True)) if cuda else time.perf_counter

    class Timed(fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            if n not in name_of:
                return super().run_node(n)
            a = clock()
            if cuda:
                a.record()
            out = super().run_node(n)
            b = clock()
            if cuda:
                b.record()
            marks.append((name_of[n], a, b))
            return out

    t0 = time.perf_counter()
    Timed(module).run(*args)
    synchronize(device)
    total = time.perf_counter() - t0
    per: dict[str, float] = {}
    for name, a, b in marks:
        secs = a.elapsed_time(b) * 1e-3 if cuda else b - a
        per[name] = per.get(name, 0.0) + float(secs)
    return per, total
