"""Run an ONNX model split at device boundaries: one ONNX Runtime session per part.

:func:`split_model` cuts a model by a device per compute node into sub-models
whose dependency graph is acyclic: nodes are first grouped by (device, number of
device changes on the longest path to them), which is always acyclic, then
groups of the same device are merged while the quotient stays acyclic (fewer
boundaries, like HETERO's sub-graph merging).  Each part is a standalone ONNX
model: its nodes, the weight-producing nodes and initializers they read, graph
or boundary tensors as inputs, tensors read by later parts or graph outputs as
outputs (graph outputs that are weights -- an initializer, a Constant's output --
come from the first part).

:class:`SplitExecutor` runs the parts: one worker thread per device (pinned to
the device's CPU cores when given), each running its parts in order and waiting
for the parts that produce its inputs.  Parts on different devices whose inputs
are ready run at the same time — ONNX Runtime releases the GIL in
``InferenceSession.run`` — unless ``concurrent=False``, where every part waits for
the previous one (HETERO-style sequential execution).

A device can also be a torch device (``DeviceSpec.torch_device``: ``cuda:N``, or
``cpu`` for torch's CPU device, which CI tests): its parts run through PyTorch
(:class:`~onnx_sched.bench.runtimes.torch_parts.TorchPart`), its worker thread
inside :func:`~onnx_sched.bench.runtimes.torch_parts.worker_context` (one CUDA
stream per device worker).  Tensors stay on their torch device while only that
device reads them; the ones another device or the caller reads are copied to the
host.  A device can also be an ONNX Runtime execution provider other than the
CPU's (``CUDAExecutionProvider``, with onnxruntime-gpu): its parts run in sessions
of that provider, with the CPU provider behind it for ops it has no kernel for.
:func:`device_spec` reads a runtime device label (``CPU``, ``cuda:0``,
``torch:cpu``, ``CUDAExecutionProvider:1``) into a :class:`DeviceSpec`.

A tensor of a type numpy has no array for (bfloat16, float8, int4) crosses parts as an ONNX Runtime
``OrtValue``, as it came out of the producing session; graph outputs must be of plain types.

The module is long because the cut and the run are one contract: the parts' boundary tensors, their order
and the weights each carries (:func:`iter_parts` hands them over one at a time, and the executor keeps a part's
structure only once its session holds the weights) are exactly what the executor's threads exchange and build.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper

from onnx_sched.bench.file_weights import FileWeights, model_for_sessions
from onnx_sched.bench.part_merge import merge_parts
from onnx_sched.onnx_structure import infer_shapes, structure_only

__all__ = ["CPU_PROVIDER", "DeviceSpec", "SplitExecutor", "SubModel", "check_devices", "device_spec", "node_devices",
           "iter_parts", "split_model"]


#: element types ONNX Runtime's Python API returns only as ``OrtValue`` (no numpy array type)
_ORT_VALUE_ONLY = frozenset(getattr(onnx.TensorProto, t) for t in (
    "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "UINT4", "INT4",
    "FLOAT4E2M1", "UINT2", "INT2") if hasattr(onnx.TensorProto, t))


def _ort_value_only(vi: onnx.ValueInfoProto) -> bool:
    return vi.type.tensor_type.elem_type in _ORT_VALUE_ONLY


@dataclass(frozen=True)
class DeviceSpec:
    """A "device": an ONNX Runtime provider (with its options), intra-op threads and optional CPU cores to pin its
    worker to; with ``torch_device`` (``cuda:N``, ``cpu``) its parts run through PyTorch instead."""

    name: str
    provider: str = "CPUExecutionProvider"
    threads: int = 1
    cores: tuple[int, ...] = ()
    torch_device: str = ""
    provider_options: tuple[tuple[str, str], ...] = ()

    @property
    def kernels(self) -> str:
        """Whose kernels compute this device's parts, as a key of the torch part-runner's ``TOLERANCE``: the torch
        device type (``cuda``, ``cpu``), ``cuda`` for an ONNX Runtime GPU provider, ``""`` for ORT's CPU kernels
        (the reference every other device is compared with)."""
        if self.torch_device:
            return self.torch_device.split(":")[0]
        return "" if self.provider == CPU_PROVIDER else "cuda"

    @property
    def providers(self) -> list[Any]:
        """The ``providers`` of this device's ONNX Runtime sessions: its provider with its options, then the CPU
        provider for the ops it has no kernel for (as ONNX Runtime's own GPU examples do)."""
        if self.provider == CPU_PROVIDER:
            return [CPU_PROVIDER]
        return [(self.provider, dict(self.provider_options)), CPU_PROVIDER]


CPU_PROVIDER = "CPUExecutionProvider"
#: an ONNX Runtime provider as a device label, with an optional device id: ``CUDAExecutionProvider:1``
_PROVIDER_LABEL = re.compile(r"^([A-Za-z0-9]+ExecutionProvider)(?::(\d+))?$")


def device_spec(label: str, threads: int = 1, cores: tuple[int, ...] = ()) -> DeviceSpec:
    """The device of a runtime label: ``cuda:N`` / ``torch:cuda:N`` / ``torch:cpu`` are torch devices, an ONNX
    Runtime provider name (``CUDAExecutionProvider``, ``CUDAExecutionProvider:1`` for device id 1) runs in that
    provider (CUDA with TF32 off, like the torch runner), any other label is an ONNX Runtime CPU device of that
    name.  Imports no torch.

    >>> device_spec("CUDAExecutionProvider:1").providers
    [('CUDAExecutionProvider', {'device_id': '1', 'use_tf32': '0'}), 'CPUExecutionProvider']
    >>> device_spec("CPUB").providers, device_spec("cuda:0").torch_device
    (['CPUExecutionProvider'], 'cuda:0')
    """
    from onnx_sched.bench.runtimes.torch_parts import torch_device

    tdev = torch_device(label)
    m = _PROVIDER_LABEL.match(label.strip())
    if tdev or not m or m.group(1) == CPU_PROVIDER:
        return DeviceSpec(label, threads=threads, cores=cores, torch_device=tdev or "")
    options = {"device_id": m.group(2)} if m.group(2) is not None else {}
    if m.group(1) == "CUDAExecutionProvider":
        options["use_tf32"] = "0"
    return DeviceSpec(label, provider=m.group(1), threads=threads, cores=cores,
                      provider_options=tuple(sorted(options.items())))


def check_devices(devices: Sequence[DeviceSpec]) -> None:
    """``DeviceError`` (one line) for a device this machine cannot run: an ONNX Runtime provider missing from this
    build, a torch device without PyTorch and onnx2torch installed, or a CUDA device torch does not see."""
    import onnxruntime as ort

    from onnx_sched.errors import DeviceError

    have = ort.get_available_providers()
    for d in devices:
        if not d.torch_device and d.provider not in have:
            hint = " (install onnxruntime-gpu, or give cuda:N to run those parts through PyTorch)" \
                if d.provider == "CUDAExecutionProvider" else ""
            raise DeviceError(f"device {d.name}: ONNX Runtime provider {d.provider} is not available here "
                              f"(this build has {', '.join(have)}){hint}")
    cuda = [d for d in devices if d.torch_device.startswith("cuda")]
    if not any(d.torch_device for d in devices):
        return
    import importlib.util

    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or importlib.util.find_spec("onnx2torch") is None:
        raise DeviceError(f"device {next(d.name for d in devices if d.torch_device)}: torch devices need PyTorch and "
                          "onnx2torch (pip install 'onnx-sched[gpu]')")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for d in cuda:
        index = int(d.torch_device.partition(":")[2] or 0)
        if index >= count:
            raise DeviceError(f"device {d.name}: torch sees {count} CUDA device(s) on this machine")


@dataclass(frozen=True, eq=False)
class SubModel:
    """One part: ``device`` index, its ONNX ``model``, boundary ``inputs``/``outputs``,
    the compute ``nodes`` (indices into the source graph) and producer parts ``deps``."""

    index: int
    device: int
    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    deps: tuple[int, ...]
    model: onnx.ModelProto = field(repr=False)
    #: where the file the model was cut from holds the part's weights (ONNX Runtime then reads them from there)
    weights: FileWeights | None = field(default=None, repr=False)


def _reads(node: onnx.NodeProto) -> list[str]:
    from onnx_sched.importers.control_flow import subgraph_reads

    names = [x for x in node.input if x]
    if node.op_type in ("If", "Loop", "Scan"):
        names += [x for x in subgraph_reads(node) if x not in names]
    return names


def node_devices(imported: Any, placement: np.ndarray) -> dict[int, int]:
    """Graph-op placement -> device per compute node index of ``imported.model``."""
    p = np.asarray(placement, np.int64)
    if len(p) != imported.graph.n_ops:
        raise ValueError(f"placement has {len(p)} entries, graph has {imported.graph.n_ops} ops")
    return {int(idx): int(p[op]) for op, idx in enumerate(imported.op_node)}


def _groups(nodes: Sequence[onnx.NodeProto], compute: list[int], dev: Mapping[int, int]) -> list[list[int]]:
    """Parts: runs of one device's ops (file order) cut so that cross-device data flows only
    from the last op of a part to the first op of another.  A part starts at an op that reads
    another device's tensor and ends after an op whose tensor another device reads, so no part
    makes a device wait for more than its next op needs, and every output leaves as soon as it
    exists.  Same-device parts are then merged where that delays nothing
    (:func:`~onnx_sched.bench.part_merge.merge_parts`).  The parts come in a topological order."""
    import networkx as nx

    producer: dict[str, int] = {}
    for i in compute:
        for o in nodes[i].output:
            if o:
                producer[o] = i
    reader_devs: dict[str, set[int]] = {}
    for i in compute:
        for x in _reads(nodes[i]):
            reader_devs.setdefault(x, set()).add(dev[i])
    member: dict[int, int] = {}
    open_part: dict[int, int | None] = {}
    n_parts = 0
    for i in compute:  # file order is topological
        d = dev[i]
        cross_in = any(x in producer and dev[producer[x]] != d for x in _reads(nodes[i]))
        if open_part.get(d) is None or cross_in:
            open_part[d] = n_parts
            n_parts += 1
        member[i] = open_part[d]
        if any(reader_devs.get(o, set()) - {d} for o in nodes[i].output if o):
            open_part[d] = None
    edges = {(member[producer[x]], member[i]) for i in compute for x in _reads(nodes[i])
             if x in producer and member[producer[x]] != member[i]}
    gdev = [0] * n_parts
    for i in compute:
        gdev[member[i]] = dev[i]
    merged_into = merge_parts(n_parts, edges, gdev)
    member = {i: merged_into[g] for i, g in member.items()}
    q = nx.DiGraph()
    q.add_nodes_from(sorted(set(merged_into)))
    q.add_edges_from((merged_into[u], merged_into[v]) for u, v in edges if merged_into[u] != merged_into[v])
    order = list(nx.lexicographical_topological_sort(q))
    pos = {g: j for j, g in enumerate(order)}
    out: list[list[int]] = [[] for _ in order]
    for i in compute:
        out[pos[member[i]]].append(i)
    return out


def _value_infos(model: onnx.ModelProto, graph: Any) -> dict[str, onnx.ValueInfoProto]:
    """The type of every tensor of ``model`` that a part or a one-op session declares: onnx's shape inference, and
    the import's (``graph``'s) where that inference stops."""
    try:
        inferred = infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - keep what the file has
        inferred = model
    out: dict[str, onnx.ValueInfoProto] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        tensor = vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type
        if tensor or vi.type.HasField("sequence_type") or vi.type.HasField("optional_type"):  # a list, an array or None
            out.setdefault(vi.name, vi)
    out.update(_imported_types(graph, out))
    return out


def _imported_types(graph: Any, known: Mapping[str, onnx.ValueInfoProto]) -> dict[str, onnx.ValueInfoProto]:
    """The tensor types the importer found, for the tensors ``known`` lacks: onnx's inference stops at an op it does
    not know (a ``com.microsoft`` contrib op), which the importer's later engines (ONNX Runtime's symbolic
    inference, OpenVINO, a run) get past."""
    codes = dict(onnx.TensorProto.DataType.items())  # the importer's dtype names are these, lower-cased
    out: dict[str, onnx.ValueInfoProto] = {}
    for name, dtype, shape in zip(graph.tensor_names, graph.tensor_dtypes, graph.tensor_shapes):
        elem = codes.get(dtype.upper(), onnx.TensorProto.UNDEFINED)
        if name not in known and elem != onnx.TensorProto.UNDEFINED and shape is not None:
            out[name] = helper.make_tensor_value_info(name, elem, list(shape))
    return out


def split_model(imported: Any, placement: np.ndarray) -> list[SubModel]:
    """Cut ``imported.model`` into per-device parts for ``placement`` (device per graph op)."""
    return list(iter_parts(imported, placement))


def iter_parts(imported: Any, placement: np.ndarray) -> Iterator[SubModel]:
    """:func:`split_model`'s parts one at a time, in run order: a :class:`SplitExecutor` given this iterator holds
    each part's weights only until its session does, so the parts never hold the model's weights all at once."""
    model, weights = model_for_sessions(imported)  # external data stays in its files, read by the sessions
    nodes = model.graph.node
    dev = node_devices(imported, placement)
    weight_nodes = set(int(i) for i in imported.weight_nodes)
    compute = sorted(dev)
    groups = _groups(nodes, compute, dev)
    inits = {t.name: t for t in model.graph.initializer}
    weight_producer = {o: i for i in weight_nodes for o in nodes[i].output if o}
    graph_outputs = [o.name for o in model.graph.output]
    vis = _value_infos(model, imported.graph)
    group_of: dict[int, int] = {i: g for g, members in enumerate(groups) for i in members}
    produced_by: dict[str, int] = {o: group_of[i] for i in compute for o in nodes[i].output if o}
    fed = {i.name for i in model.graph.input} - set(inits)
    # graph outputs no compute op writes and the caller does not feed: weights (an initializer, a Constant's
    # output); the first part returns them
    constants = [o for o in dict.fromkeys(graph_outputs) if o not in produced_by and o not in fed]
    readers: dict[str, set[int]] = {}
    for i in compute:
        for x in _reads(nodes[i]):
            readers.setdefault(x, set()).add(group_of[i])
    ir = max(int(model.ir_version), 4)
    for g, members in enumerate(groups):
        # weight nodes needed (transitively), in file order
        extra = constants if g == 0 else []
        need_w: set[int] = set()
        stack = [x for i in members for x in _reads(nodes[i]) if x in weight_producer]
        stack += [x for x in extra if x in weight_producer]
        while stack:
            w = weight_producer[stack.pop()]
            if w not in need_w:
                need_w.add(w)
                stack.extend(x for x in _reads(nodes[w]) if x in weight_producer)
        part_nodes = sorted(need_w | set(members))
        defined = {o for i in part_nodes for o in nodes[i].output if o}
        reads = [x for i in part_nodes for x in _reads(nodes[i])]
        used_inits = sorted({x for x in [*reads, *extra] if x in inits and x not in defined})
        inputs = list(dict.fromkeys(x for x in reads if x not in defined and x not in inits))
        outputs = [o for i in members for o in nodes[i].output
                   if o and (o in graph_outputs or any(r != g for r in readers.get(o, ())))] + extra
        if not outputs:  # dead ops (nothing reads their results): still run, as placed, for their outputs
            outputs = ([o for i in members for o in nodes[i].output if o and o in vis]
                       or [o for i in members for o in nodes[i].output if o])  # none typed: "no type known" below
        missing = [x for x in inputs + outputs if x not in vis]
        if missing:
            raise ValueError(f"split_model: no type known for tensors {missing[:5]} (run shape inference first)")
        inner = [x for x in sorted(defined) if x in vis and x not in outputs]  # shapes converters may read
        sub = helper.make_graph([nodes[i] for i in part_nodes], f"{model.graph.name or 'model'}_part{g}",
                                [vis[x] for x in inputs], [vis[x] for x in outputs], value_info=[vis[x] for x in inner])
        deps = sorted({produced_by[x] for x in inputs if x in produced_by})
        # no local of this suspended generator holds the part's weights: the consumer decides how long they live
        yield SubModel(g, dev[members[0]], tuple(members), tuple(inputs), tuple(outputs), tuple(deps),
                       _part_model(model, sub, [inits[x] for x in used_inits], ir), weights)


def _part_model(model: onnx.ModelProto, graph: onnx.GraphProto, weights: list[onnx.TensorProto],
                ir: int) -> onnx.ModelProto:
    """A part's model: ``graph`` (without weights) with ``model``'s opsets and functions, and ``weights`` copied in
    once (``make_graph`` would copy them, and ``make_model`` copy the graph again)."""
    m = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=ir)
    m.graph.initializer.extend(weights)
    m.functions.extend(model.functions)
    return m


def _with_data(part: SubModel) -> onnx.ModelProto:
    """``part.model`` with the external data of its initializers read in (from the files beside the model's), for
    a runtime that takes the weights in the model (torch)."""
    from onnx_sched.importers.onnx_weights import with_data_read_in

    return part.model if part.weights is None else with_data_read_in(part.model, part.weights.path)


def _as_array(value: Any) -> Any:
    """An array for the caller or a torch part: a part with an output numpy has no type for returns all its
    outputs as ``OrtValue`` objects."""
    return value.numpy() if hasattr(value, "numpy") and hasattr(value, "data_type") else value


def _ort_value(value: Any) -> Any:
    import onnxruntime as ort

    if isinstance(value, ort.OrtValue):
        return value
    return ort.OrtValue.ortvalue_from_numpy(np.require(value, requirements="C"))  # keeps 0-d (ascontiguousarray: 1-d)


class _Worker(threading.Thread):
    def __init__(self, cores: tuple[int, ...], context: Any = None) -> None:
        super().__init__(daemon=True)
        self.cores = cores
        self.context = context  # a context manager factory the thread runs inside (torch devices)
        self.jobs: queue.Queue = queue.Queue()

    def run(self) -> None:
        if self.cores and hasattr(os, "sched_setaffinity"):
            try:
                os.sched_setaffinity(0, set(self.cores))  # Linux: pins the calling thread
            except OSError:
                pass
        with self.context() if self.context else contextlib.nullcontext():
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                job()


class SplitExecutor:
    """Run split parts with one session (or torch module) per part and one worker thread per device.

    ``run(feed)`` returns the graph outputs; ``last_device_seconds`` holds the busy
    time per device of the last run.
    """

    def __init__(self, parts: Iterable[SubModel], devices: Sequence[DeviceSpec], output_names: Sequence[str],
                 concurrent: bool = True, opt_level: str = "all") -> None:
        """``parts`` in run order, a list or :func:`iter_parts`' iterator; an ONNX Runtime part is kept as its
        structure once its session holds its weights (the parts given are not changed)."""
        self.devices = list(devices)
        self.output_names = list(output_names)
        self.concurrent = concurrent
        self.parts: list[SubModel] = []
        self.sessions: list[Any] = []
        #: per part: whether its outputs come back as ``OrtValue`` (some have no numpy type)
        self._ort_values: list[bool] = []
        checked: set[int] = set()
        for p in parts:
            if p.device >= len(self.devices):
                raise ValueError(f"parts use device {p.device}, only {len(self.devices)} device specs given")
            if p.device not in checked:
                check_devices([self.devices[p.device]])
                checked.add(p.device)
            opaque = [vi.name for vi in p.model.graph.output if vi.name in self.output_names and _ort_value_only(vi)]
            if opaque:
                raise ValueError(f"graph output {opaque[0]!r} is of a type ONNX Runtime's Python API returns without "
                                 "an array (bfloat16, float8 or int4): the split executor compares outputs as arrays; "
                                 "cast the graph outputs to a plain type to time this model")
            self._ort_values.append(any(_ort_value_only(vi) for vi in p.model.graph.output))
            self.sessions.append(self._session(p, opt_level))
            torch_part = bool(self.devices[p.device].torch_device)
            self.parts.append(p if torch_part else replace(p, model=structure_only(p.model)))
        if not self.parts:
            raise ValueError("SplitExecutor: no parts")
        readers: dict[str, set[int]] = {}
        for p in self.parts:
            for x in p.inputs:
                readers.setdefault(x, set()).add(p.device)
        #: per part: the outputs a torch part copies to the host (read by another device or the caller)
        self.host_outputs = [tuple(o for o in p.outputs if o in self.output_names or readers.get(o, set()) - {p.device})
                             for p in self.parts]
        used = {p.device for p in self.parts}
        self._workers = {d: _Worker(self.devices[d].cores, self._context(self.devices[d])) for d in sorted(used)}
        for w in self._workers.values():
            w.start()
        self.last_device_seconds: dict[str, float] = {}

    def _session(self, part: SubModel, opt_level: str) -> Any:
        """The ONNX Runtime session (or torch module) that runs ``part`` on its device."""
        from onnx_sched.bench.ort_runner import make_session_options
        from onnx_sched.bench.ort_session import inference_session

        spec = self.devices[part.device]
        if spec.torch_device:
            from onnx_sched.bench.runtimes.torch_parts import TorchPart

            return TorchPart(_with_data(part), spec.torch_device, part.inputs, part.outputs)
        so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
        so.inter_op_num_threads = 1
        return inference_session(part.model, so, spec.providers, part.weights)

    @staticmethod
    def _context(spec: DeviceSpec) -> Any:
        if not spec.torch_device:
            return None
        from functools import partial

        from onnx_sched.bench.runtimes.torch_parts import worker_context

        return partial(worker_context, spec.torch_device, spec.threads)

    @property
    def n_parts(self) -> int:
        return len(self.parts)

    def close(self) -> None:
        for w in self._workers.values():
            w.jobs.put(None)
        for w in self._workers.values():
            w.join(timeout=5)
        self._workers = {}

    def __enter__(self) -> SplitExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, Any] = dict(feed)
        on_device: dict[tuple[int, str], Any] = {}  # (device, tensor) -> torch tensor kept on that device
        done = [threading.Event() for _ in self.parts]
        errors: list[BaseException] = []
        busy = dict.fromkeys(self._workers, 0.0)
        lock = threading.Lock()

        def make_job(k: int):  # noqa: ANN202
            part = self.parts[k]
            sess = self.sessions[k]

            def job() -> None:
                try:
                    # sequential: part k - 1 finished only after every part before it did
                    waits = part.deps if self.concurrent else range(max(k - 1, 0), k)
                    for d in waits:
                        done[d].wait()
                    if errors:
                        return
                    t0 = time.perf_counter()
                    if self.devices[part.device].torch_device:
                        with lock:
                            inputs = {x: on_device.get((part.device, x), _as_array(env.get(x))) for x in part.inputs}
                        kept, host = sess(inputs, self.host_outputs[k])
                        dt = time.perf_counter() - t0
                        with lock:
                            on_device.update(((part.device, x), t) for x, t in kept.items())
                            env.update(host)
                            busy[part.device] += dt
                        return
                    inputs = {x: env[x] for x in part.inputs}
                    if self._ort_values[k]:
                        values = {x: _ort_value(v) for x, v in inputs.items()}
                        outs = sess.run_with_ort_values(list(part.outputs), values)
                    else:
                        outs = sess.run(list(part.outputs), inputs)  # takes arrays and OrtValues alike
                    dt = time.perf_counter() - t0
                    with lock:
                        env.update(zip(part.outputs, outs))
                        busy[part.device] += dt
                except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                    errors.append(exc)
                finally:
                    done[k].set()

            return job

        for k, part in enumerate(self.parts):
            self._workers[part.device].jobs.put(make_job(k))
        for e in done:
            e.wait()
        if errors:
            raise errors[0]
        self.last_device_seconds = {self.devices[d].name: t for d, t in busy.items()}
        return {name: _as_array(env[name]) for name in self.output_names}
