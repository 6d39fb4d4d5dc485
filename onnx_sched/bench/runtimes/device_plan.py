"""What each device process does to run a multi-device memory schedule (paper 003), step by step.

A ``peak-mem-devices`` schedule (:mod:`onnx_sched.cost.device_memory`) is one
total order of ops and transfers over 2+ devices.  To check its per-device peaks
for real, :mod:`onnx_sched.bench.runtimes.device_processes` runs it with one OS
process per device; this module turns the schedule into what each process does,
so the runtime holds exactly the tensors the cost model says:

* :class:`RunOp`: run one compute node as its own small ONNX Runtime session
  (its weights baked in as initializers, computed once beforehand by
  :func:`weight_values`), keep its outputs, then drop ``frees``: the tensors whose
  last reader on this device it was, and outputs nobody here reads;
* :class:`Send`: write a tensor to another device's process; ``free`` drops it
  when that was its last use here (last outgoing transfer, no reader left);
* :class:`Recv`: allocate the arriving tensor and read it in.

The frees come from the same counts as the model's walk (``_walk_kernel``):
readers per (tensor, device) among the op steps, plus outgoing transfers at the
tensor's home; graph inputs stay on the host and graph outputs on their home to
the end.  One session per node means ONNX Runtime cannot reuse a dying input's
buffer across ops, so the runtime follows the plain (not in-place) model, the
one ``peak-mem-devices`` scores.

:func:`load_schedule` reads a schedule from an optimized model and its report
(``schedule``: ops and transfers by name), or from the model's per-node
``pkg.onnx_sched.device`` metadata alone (ops in file order, each transfer where the model records it,
``onnx_sched.transfer_steps``, or as soon as its tensor exists); :func:`placed_schedule` builds one from any
placement of an import the same way.

Example:
    >>> sched = load_schedule("out.onnx", report=json.load(open("r.json")))   # doctest: +SKIP
    >>> [p.predicted_peak_bytes for p in device_plans(sched)]                  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import onnx

from onnx_sched.cost import device_memory as dm
from onnx_sched.errors import OnnxSchedError
from onnx_sched.importers.onnx_weights import with_weights
from onnx_sched.ort_crashes import for_onnx_runtime

__all__ = ["Action", "DevicePlan", "PlacedSchedule", "Recv", "RunOp", "Send", "device_plans", "load_schedule",
           "placed_schedule", "single_device", "transfer_timing", "weight_values"]


@dataclass(frozen=True)
class RunOp:
    """Run compute node ``node`` (index in the model) on this device."""

    node: int
    feeds: tuple[str, ...]  # the node's non-weight inputs, as its session reads them
    outputs: tuple[str, ...]  # every output of the node, in the session's order
    frees: tuple[str, ...]  # dropped right after the op: last local reader, or never read here


@dataclass(frozen=True)
class Send:
    """Send tensor ``tensor`` to device ``to``; drop it here afterwards when ``free``."""

    tensor: str
    to: int
    free: bool


@dataclass(frozen=True)
class Recv:
    """Receive tensor ``tensor`` from device ``source`` into a fresh array."""

    tensor: str
    source: int
    shape: tuple[int, ...]
    dtype: str


Action = RunOp | Send | Recv


@dataclass(frozen=True, eq=False)
class PlacedSchedule:
    """An imported ONNX model, its ``peak-mem-devices`` problem and the steps to run."""

    imported: Any  # ImportedOnnx
    problem: dm.DeviceMemoryProblem
    steps: tuple[dm.Step, ...]

    @cached_property
    def walk(self) -> dm.Walk:
        """The cost model's walk of the steps (validates them)."""
        return dm.walk(self.problem, self.steps)

    def predicted_peaks(self) -> list[int]:
        """Per device, the model's peak minus the caller-owned graph inputs on the host
        (allocated before a run, so a heap window around the run does not see them)."""
        peaks = [int(p) for p in self.walk.per_device_peak]
        peaks[0] -= int(self.problem.arrays.base)
        return peaks


@dataclass(frozen=True, eq=False)
class DevicePlan:
    """Everything one device process needs: its actions in schedule order, one serialized
    single-node model per op it runs, the graph outputs it holds at the end, its predicted peak."""

    device: int
    name: str
    actions: tuple[Action, ...]
    op_models: Mapping[int, bytes]
    outputs: tuple[str, ...]
    predicted_peak_bytes: int


def load_schedule(model: str | os.PathLike | onnx.ModelProto, report: Mapping[str, Any] | None = None,
                  devices: Sequence[str] | None = None) -> PlacedSchedule:
    """The schedule of an optimized model: ``report["schedule"]`` when given (its device
    order is ``report["devices"]``, the host first), else the per-node device metadata with
    ops in file order and the transfers where the model records them (``onnx_sched.transfer_steps``), or as early
    as possible when it records none or the record no longer fits its nodes (``devices`` names the order,
    default: the order the nodes first use them)."""
    from onnx_sched.bench.placement_file import load_placement
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.objectives.peak_mem_devices import steps_from_json

    imported = import_onnx(model)
    graph = imported.graph
    if report is not None:
        problem = dm.DeviceMemoryProblem.build(graph, report["devices"])
        return PlacedSchedule(imported, problem, steps_from_json(problem, report["schedule"]))
    if isinstance(model, onnx.ModelProto):
        raise TypeError("load_schedule: a schedule from node metadata needs the model's path (or pass report)")
    placement, found, meta = load_placement(model, graph, as_onnx=True)
    names = list(devices) if devices else found
    if not set(found) <= set(names):
        raise ValueError(f"devices {names} do not include every device of the model ({found})")
    remap = np.array([names.index(d) for d in found], dtype=np.int64)
    sched, _ = placed_schedule(imported, remap[placement], names, meta.get("transfer_steps"))
    return sched


def placed_schedule(imported: Any, placement: np.ndarray, devices: Sequence[str],
                    recorded: Sequence[Sequence[Any]] | None = None) -> tuple[PlacedSchedule, bool]:
    """``placement`` (a device index per op of ``imported``) as a schedule to run: ops in the import's (file)
    order, transfers where ``recorded`` (:func:`~onnx_sched.objectives.peak_mem_devices.transfer_positions`)
    puts them when it fits, else as early as possible; and whether the record was followed."""
    from onnx_sched.objectives.peak_mem_devices import placed_steps

    problem = dm.DeviceMemoryProblem.build(imported.graph, devices)
    steps, followed = placed_steps(problem, np.asarray(placement, dtype=np.int64), recorded)
    return PlacedSchedule(imported, problem, steps), followed


def transfer_timing(followed: bool) -> str:
    """How :func:`placed_schedule` timed the transfers, in words for the commands that print it."""
    return "where the model records them" if followed else "each as early as it can"


def single_device(imported: Any, devices: Sequence[str]) -> PlacedSchedule:
    """Every op on the host (``devices[0]``) in file order: the objective's baseline."""
    problem = dm.DeviceMemoryProblem.build(imported.graph, devices)
    return PlacedSchedule(imported, problem, tuple(dm.Step("op", j, 0) for j in range(imported.graph.n_ops)))


def weight_values(imported: Any, also: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Every tensor a weight-producing node computes that a compute node reads (and those of ``also`` it
    computes), computed once (one ONNX Runtime run of the weight nodes alone), so op sessions get them as
    initializers and no run recomputes a weight."""
    from onnx import helper

    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.ort_session import inference_session
    from onnx_sched.bench.split_executor import _reads, _value_infos

    model = with_weights(imported)
    nodes = model.graph.node
    wnodes = sorted(int(i) for i in imported.weight_nodes)
    made = {o for i in wnodes for o in nodes[i].output if o}
    wanted = sorted({x for i in imported.op_node for x in _reads(nodes[int(i)]) if x in made} | (set(also) & made))
    if not wanted:
        return {}
    vis = _value_infos(model, imported.graph)
    inits = {t.name: t for t in model.graph.initializer}
    used = sorted({x for i in wnodes for x in _reads(nodes[i]) if x in inits})
    g = helper.make_graph([nodes[i] for i in wnodes], "weights", [], [vis[x] for x in wanted],
                          initializer=[inits[x] for x in used])
    m = helper.make_model(g, opset_imports=list(model.opset_import), ir_version=max(int(model.ir_version), 4))
    m.functions.extend(model.functions)
    so = make_session_options(arena=False, opt_level="none", threads=1, mem_pattern=False)
    sess = inference_session(m, so, ["CPUExecutionProvider"])
    return dict(zip(wanted, sess.run(wanted, {})))


def _op_model(model: onnx.ModelProto, node: onnx.NodeProto, weights: Mapping[str, np.ndarray],
              vis: Mapping[str, onnx.ValueInfoProto]) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """A standalone model of one compute node, its weights as initializers; and its feeds."""
    from onnx import helper, numpy_helper

    from onnx_sched.bench.split_executor import _reads

    inits = {t.name: t for t in model.graph.initializer}
    reads = list(dict.fromkeys(_reads(node)))
    consts = [inits[x] if x in inits else numpy_helper.from_array(weights[x], x)
              for x in reads if x in inits or x in weights]
    feeds = tuple(x for x in reads if x not in inits and x not in weights)
    outs = [o for o in node.output if o]
    missing = [x for x in (*feeds, *outs) if x not in vis]
    if missing:
        raise ValueError(f"no type known for tensors {missing[:5]} of node {node.name or node.op_type!r}")
    g = helper.make_graph([node], node.name or node.op_type, [vis[x] for x in feeds], [vis[x] for x in outs],
                          initializer=consts)
    m = helper.make_model(g, opset_imports=list(model.opset_import), ir_version=max(int(model.ir_version), 4))
    m.functions.extend(model.functions)
    return for_onnx_runtime(m), feeds


def _fed(model: onnx.ModelProto) -> set[str]:
    """The graph inputs the caller feeds: every input but the initializers (IR < 4 lists those as inputs too)."""
    return {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}


def weight_outputs(imported: Any) -> dict[str, np.ndarray]:
    """The graph outputs no op computes and no caller feeds: initializers, and tensors a constant subgraph (the
    weight-producing nodes) computes.  No device process holds them, so the caller adds them to the outputs."""
    from onnx import numpy_helper

    model = with_weights(imported)
    nodes = model.graph.node
    by_ops = {o for i in imported.op_node for o in nodes[int(i)].output}
    fed = _fed(model)
    wanted = [o.name for o in model.graph.output if o.name not in by_ops and o.name not in fed]
    inits = {t.name: t for t in model.graph.initializer if t.name in wanted}
    out = {name: numpy_helper.to_array(t) for name, t in inits.items()}
    rest = [name for name in wanted if name not in inits]
    if rest:
        made = weight_values(imported, also=rest)
        out.update({name: made[name] for name in rest if name in made})
    return out


def device_plans(sched: PlacedSchedule) -> list[DevicePlan]:
    """One :class:`DevicePlan` per device of ``sched.problem`` (validates the steps first)."""
    from onnx import helper

    from onnx_sched.bench.split_executor import _value_infos

    predicted = sched.predicted_peaks()
    problem, imported = sched.problem, sched.imported
    graph, a = problem.graph, problem.arrays
    model = with_weights(imported)
    nodes = model.graph.node
    vis = _value_infos(model, imported.graph)
    weights = weight_values(imported)
    names = graph.tensor_names
    placement = dm.placement_of(graph.n_ops, sched.steps)
    producer = np.asarray(graph.tensor_producer, dtype=np.int64)
    home = np.where(producer >= 0, placement[np.maximum(producer, 0)], 0)

    def ins(j: int) -> np.ndarray:
        return a.in_idx[a.in_ptr[j]: a.in_ptr[j + 1]]

    remaining: Counter[tuple[int, int]] = Counter()  # (tensor, device): readers there + transfers out at home
    for s in sched.steps:
        if s.kind == "op":
            remaining.update((int(t), s.device) for t in ins(s.item))
        else:
            remaining[(s.item, s.source)] += 1
    actions: list[list[Action]] = [[] for _ in problem.devices]
    op_models: list[dict[int, bytes]] = [{} for _ in problem.devices]
    for s in sched.steps:
        d = s.device
        if s.kind == "transfer":
            t, h = s.item, s.source
            remaining[(t, h)] -= 1
            actions[h].append(Send(names[t], d, free=remaining[(t, h)] == 0 and not a.keep[t]))
            dtype = helper.tensor_dtype_to_np_dtype(vis[names[t]].type.tensor_type.elem_type)
            if dtype == np.object_:
                raise OnnxSchedError(f"tensor {names[t]!r} is a string tensor and crosses devices: per-device "
                                     "processes move raw bytes, which strings are not")
            actions[d].append(Recv(names[t], h, tuple(int(x) for x in graph.tensor_shapes[t] or ()), dtype.str))
            continue
        j = s.item
        frees = []
        for t in ins(j):
            remaining[(int(t), d)] -= 1
            if remaining[(int(t), d)] == 0 and not (a.keep[t] and d == home[t]):
                frees.append(names[t])
        node_idx = int(imported.op_node[j])
        node = nodes[node_idx]
        outs = tuple(o for o in node.output if o)
        frees += [o for o, t in zip(outs, graph.op_outputs.row(j)) if remaining[(int(t), d)] == 0 and not a.keep[t]]
        m, feeds = _op_model(model, node, weights, vis)
        op_models[d][node_idx] = m.SerializeToString()
        actions[d].append(RunOp(node_idx, feeds, outs, tuple(frees)))
    # graph outputs an op makes or the caller feeds, each from its home; a weight (one an op reads is a tensor of the
    # graph too) no device holds: the caller adds it (weight_outputs)
    fed, tensor_id = _fed(model), {n: i for i, n in enumerate(names)}
    held = [o.name for o in model.graph.output
            if o.name in tensor_id and (producer[tensor_id[o.name]] >= 0 or o.name in fed)]
    return [DevicePlan(device=d, name=name, actions=tuple(actions[d]), op_models=op_models[d],
                       outputs=tuple(o for o in held if home[tensor_id[o]] == d),
                       predicted_peak_bytes=predicted[d])
            for d, name in enumerate(problem.devices)]
