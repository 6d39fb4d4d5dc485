"""Schedule -> ONNX model: the same model with its nodes in the scheduled order.

Nothing else changes: initializers, external-data references, names, opsets,
doc strings and the IR version are kept.  Weight-producing nodes are placed just
before their first consumer (their relative file order kept), so a runtime that
executes them does not hold every weight from the start.  The result's metadata
records the objective, method, predicted cost and bound under ``onnx_sched.*``
keys; a placement, when given, is written per node as ``metadata_props`` key
``pkg.onnx_sched.device``.  Re-optimizing a written model replaces the earlier result: its keys (listed under
``onnx_sched.result_keys``) and, without a new placement, its per-node devices go.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnx_sched.exporters.paths import (
    atomic_write,
    check_output_paths,
    copy_targets,
    external_data_files,
    is_model_file,
)
from onnx_sched.importers.onnx import ImportedOnnx
from onnx_sched.onnx_structure import copy_except
from onnx_sched.schedule import Schedule

__all__ = ["DEVICES_KEY", "DEVICE_KEY", "MAX_IR_VERSION", "RESULT_KEYS_KEY", "TRANSFER_STEPS_KEY", "export_onnx",
           "save_model_atomic"]

DEVICE_KEY = "pkg.onnx_sched.device"
#: model-level ``metadata_props`` key: the placement's devices in order (a JSON list), those no op uses included,
#: so a placement that keeps every op on one device still names the devices it chose among
DEVICES_KEY = "onnx_sched.devices"
#: model-level ``metadata_props`` key: where each transfer of a multi-device schedule runs, a JSON list of
#: ``[tensor, from device, to device, ops run before it]`` (the ops in the file's order); with the nodes'
#: ``pkg.onnx_sched.device`` it gives back the whole schedule, which the node order alone cannot
TRANSFER_STEPS_KEY = "onnx_sched.transfer_steps"
#: ``metadata_props`` key listing the keys a result wrote, so the next run on the written model replaces them
#: (keys describing the model itself, such as ``onnx_sched.op_param_bytes``, stay).
RESULT_KEYS_KEY = "onnx_sched.result_keys"
MAX_IR_VERSION = 13  # the newest IR version ONNX Runtime 1.31 loads


def _node_order(imported: ImportedOnnx, order: np.ndarray) -> list[int]:
    nodes = imported.model.graph.node
    producer: dict[str, int] = {}
    for idx in imported.weight_nodes:
        for name in nodes[idx].output:
            producer[name] = idx
    emitted: set[int] = set()
    out: list[int] = []

    def emit_weights(names: Sequence[str]) -> None:
        # depth-first over weight producers, so each appears after what it reads
        stack = [producer[n] for n in names if n in producer and producer[n] not in emitted]
        pending: list[int] = []
        while stack:
            idx = stack.pop()
            if idx in emitted or idx in pending:
                continue
            pending.append(idx)
            stack.extend(producer[n] for n in nodes[idx].input if n in producer and producer[n] not in emitted)
        for idx in sorted(pending):  # file order is a topological order of weight nodes
            emitted.add(idx)
            out.append(idx)

    from onnx_sched.importers.control_flow import subgraph_reads

    for op in order:
        idx = int(imported.op_node[op])
        node = nodes[idx]
        emit_weights(list(node.input) + subgraph_reads(node))
        out.append(idx)
    out.extend(i for i in imported.weight_nodes if i not in emitted)
    return out


def _write_bodies(graph: onnx.GraphProto, imported: ImportedOnnx, node_order: list[int]) -> None:
    """Order each body of ``imported`` that has a ``Body.schedule`` inside its node of ``graph`` (a copy, whose
    nodes are ``imported``'s in ``node_order``): the body imported as a model holds the body's nodes in their order
    (:func:`~onnx_sched.importers.control_flow.body_model`), so its node order permutes the body's own nodes; its
    own bodies likewise."""
    position = {idx: pos for pos, idx in enumerate(node_order)}
    for body in imported.bodies:
        if body.schedule is None:
            continue
        order = _node_order(body.imported, np.asarray(body.schedule.order, dtype=np.int64))
        attr = next(a for a in graph.node[position[body.node]].attribute if a.name == body.attribute)
        nodes = list(attr.g.node)  # detached by the del below, kept alive by this list
        del attr.g.node[:]
        attr.g.node.extend(nodes[i] for i in order)
        _write_bodies(attr.g, body.imported, order)


def export_onnx(
    imported: ImportedOnnx,
    schedule: Schedule,
    metadata: Mapping[str, str] | None = None,
    device_names: Sequence[str] | None = None,
    in_place: bool = False,
) -> onnx.ModelProto:
    """The imported model with nodes in ``schedule.order`` and metadata added.

    ``in_place`` reorders ``imported.model`` itself instead of a copy, so a model with its weights inline is held
    once, not twice: for a model nobody else holds (one this process read from a file), and ``imported`` describes
    it no longer afterwards.
    """
    src = imported.model
    order = np.asarray(schedule.order, dtype=np.int64)
    if len(order) != len(imported.op_node):
        raise ValueError(f"schedule has {len(order)} ops, model has {len(imported.op_node)}")
    node_order = _node_order(imported, order)
    if in_place:
        model = src
        nodes = list(model.graph.node)  # detached by the del below, kept alive by this list
    else:
        model = onnx.ModelProto()
        model.CopyFrom(src)  # unknown fields (a newer onnx's) included
        nodes = src.graph.node
    del model.graph.node[:]
    model.graph.node.extend(nodes[i] for i in node_order)
    _write_bodies(model.graph, imported, node_order)
    for node in model.graph.node:  # a placement of an earlier run is not this schedule's
        keep = [p for p in node.metadata_props if p.key != DEVICE_KEY]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    if schedule.placement is not None:
        names = list(device_names) if device_names else None
        node_of_op = {int(idx): op for op, idx in enumerate(imported.op_node)}
        for new_pos, idx in enumerate(node_order):
            op = node_of_op.get(idx)
            if op is None:
                continue
            dev = int(schedule.placement[op])
            model.graph.node[new_pos].metadata_props.add(key=DEVICE_KEY, value=names[dev] if names else str(dev))
        if model.ir_version < 10:
            model.ir_version = 10  # node metadata_props needs IR >= 10
    props = {p.key: p.value for p in model.metadata_props}
    for stale in props.pop(RESULT_KEYS_KEY, "").split(","):  # an earlier run's result, not this one's
        props.pop(stale, None)
    result = {k: str(v) for k, v in (metadata or {}).items()}
    if schedule.placement is not None and device_names:
        result[DEVICES_KEY] = json.dumps(list(device_names))
    props.update(result)
    if result:
        props[RESULT_KEYS_KEY] = ",".join(result)
    del model.metadata_props[:]
    for k, v in props.items():
        model.metadata_props.add(key=k, value=v)
    return model


def _plan_copy(src_file: Path, dst_file: Path) -> bool:
    """Whether ``src_file`` must be copied to ``dst_file``: not when a file with the same bytes is
    already there; yes over a link to the input (onnx.checker rejects linked data: an earlier
    version hard-linked); ``ValueError`` over a file with other bytes, which is never replaced."""
    if not src_file.exists():
        raise ValueError(f"external data file {src_file} referenced by the model is missing")
    if not dst_file.exists() and not dst_file.is_symlink():
        return True
    if dst_file.is_symlink() or os.path.samefile(src_file, dst_file):
        return True
    if filecmp.cmp(src_file, dst_file, shallow=False):
        return False
    raise ValueError(f"{dst_file}: exists and holds other data than the input's {src_file}, which the written "
                     "model refers to by this name; write the model to another folder or remove that file")


def save_model_atomic(model: onnx.ModelProto, out_path: str | os.PathLike, source_path: str | os.PathLike | None = None,
                      inline: bool = False) -> None:
    """Write ``model`` to ``out_path`` through a temporary file and ``os.replace``.

    External data files the model references (relative to ``source_path``) are
    copied next to the output when it goes to another folder; every copy is checked
    before anything is written.  Refuses to overwrite ``source_path``, its external
    data, or the place a copy goes.  ``inline``: the external data is written into the
    output instead, one tensor at a time (ONNX Runtime's rewritten graph of a model the
    user gave with its weights inline, ``optimize --ort-graph``).  Weights the model refers to
    in ``source_path`` itself (an import that left them in its file) are always written inline.
    """
    out = Path(out_path)
    inline_from = None if source_path is None else _Inlining(Path(source_path), inline)
    external = [] if source_path is None or inline else external_data_files(model, source_path)
    sources = [] if source_path is None else [Path(source_path), *external]
    copies = [] if source_path is None else copy_targets(source_path, external, out)
    check_output_paths(sources, {"-o": out}, reserved=[dst for _, dst in copies])
    todo = [(src, dst) for src, dst in copies if _plan_copy(src, dst)]
    out.parent.mkdir(parents=True, exist_ok=True)
    for src_file, dst_file in todo:  # a copy, never a hard link (a write to either would change both)
        dst_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(dst_file, lambda tmp, src=src_file: shutil.copyfile(src, tmp))
    atomic_write(out, lambda tmp: _write_model(model, tmp, inline_from))


@dataclass(frozen=True)
class _Inlining:
    """Which external initializers of a model read from ``source`` are written inline: those in ``source``
    itself, and with ``everything`` every one."""

    source: Path
    everything: bool

    def wants(self, tensor: onnx.TensorProto) -> bool:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            return False
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        return self.everything or is_model_file(location, self.source)


def _inlined(tensor: onnx.TensorProto, folder: Path) -> onnx.TensorProto:
    """A copy of ``tensor`` with its external data (relative to ``folder``) read into ``raw_data``."""
    from onnx.external_data_helper import load_external_data_for_tensor

    out = onnx.TensorProto()
    out.CopyFrom(tensor)
    load_external_data_for_tensor(out, str(folder))
    out.ClearField("data_location")  # as a tensor written inline has it: unset
    del out.external_data[:]
    return out


def _write_model(model: onnx.ModelProto, path: str, inline_from: _Inlining | None = None) -> None:
    """``model`` serialized to ``path`` one initializer at a time: the model without its initializers, then one
    ``ModelProto`` per initializer holding only that tensor.  Protobuf parses concatenated messages as one merged
    message (repeated fields appended in order), so the file reads back as ``model``, while memory holds one
    tensor's bytes at a time instead of the whole model's (hundreds of MB for a model with its weights).  A model or
    graph with fields this onnx does not know (written by a newer one) is serialized whole, which keeps them.
    ``inline_from``: the initializers it wants (:class:`_Inlining`) are written with their data, one at a time."""
    if _unknown_fields(model) or _unknown_fields(model.graph):
        if inline_from is not None and any(inline_from.wants(t) for t in model.graph.initializer):
            whole = onnx.ModelProto()
            whole.CopyFrom(model)
            for i, tensor in enumerate(whole.graph.initializer):
                if inline_from.wants(tensor):
                    whole.graph.initializer[i].CopyFrom(_inlined(tensor, inline_from.source.parent))
            model = whole
        Path(path).write_bytes(_serialized(model))
        return
    head = onnx.ModelProto()
    copy_except(model, head, "graph")
    copy_except(model.graph, head.graph, "initializer")
    with open(path, "wb") as fh:
        written = fh.write(head.SerializeToString())
        for tensor in model.graph.initializer:
            chunk = onnx.ModelProto()  # a new one each time: upb frees a message's memory only with the message
            wanted = inline_from is not None and inline_from.wants(tensor)
            chunk.graph.initializer.append(_inlined(tensor, inline_from.source.parent) if wanted else tensor)
            written += fh.write(chunk.SerializeToString())
            if written > PROTOBUF_LIMIT:
                raise ValueError(_TOO_LARGE)


#: The largest message protobuf parses (2 GiB - 1): a larger model must keep its weights in external data files.
PROTOBUF_LIMIT = 2**31 - 1
_TOO_LARGE = ("the model would be over 2 GiB, more than protobuf can read back; save the input with its weights in "
              "external data (onnx.save_model(..., save_as_external_data=True)) and optimize that")


def _serialized(model: onnx.ModelProto) -> bytes:
    try:
        return model.SerializeToString()
    except ValueError:  # protobuf refuses messages over its limit
        raise ValueError(_TOO_LARGE) from None


def _unknown_fields(message: Any) -> bool:
    """Whether ``message`` itself holds fields its schema does not name (kept by parsing, lost by field copies)."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # protobuf < 4.22: the method
        return len(message.UnknownFields()) > 0
    return len(UnknownFieldSet(message)) > 0
