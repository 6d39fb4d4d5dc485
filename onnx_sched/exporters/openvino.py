"""Placement -> OpenVINO model: device affinity stored where ``ov.save_model`` keeps it.

Per-op ``rt_info["affinity"]`` is what the HETERO plugin reads, but it does not
survive ``ov.save_model``.  So the exporter writes the placement once, in
*model-level* rt_info under ``onnx_sched/placement`` (a JSON string
``{"devices": [...], "affinity": {friendly_name: device}}``), and
:class:`onnx_sched.plugins.openvino_affinity.ApplyAffinity` (an
``openvino.passes.ModelPass``) turns it into per-op affinity right before
``compile_model("HETERO:...")``.

Mapping ONNX ops to OpenVINO ops: the ONNX frontend names an op after the ONNX
node (decompositions add a suffix, ``/conv/Conv/WithoutBiases``) and keeps the
ONNX tensor names on outputs; :func:`map_ov_to_graph_ops` uses both.  Ops with no
ONNX counterpart (Constants, weight sub-graphs, frontend helpers) get the device
of their consumer, else of their producer (:func:`complete_affinity`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onnx_sched.errors import ModelLoadError
from onnx_sched.importers.onnx_weights import with_weights
from onnx_sched.schedule import Schedule

__all__ = [
    "RT_INFO_KEY",
    "complete_affinity",
    "shape_only_ops",
    "export_openvino",
    "map_ov_to_graph_ops",
    "placement_from_rt_info",
    "read_onnx_into_openvino",
]

RT_INFO_KEY = ["onnx_sched", "placement"]


def read_onnx_into_openvino(model: Any) -> Any:
    """``onnx.ModelProto`` (or path) -> ``ov.Model``.

    Initializers listed as graph inputs (IR < 4 models such as the onnx "light"
    zoo) would become OpenVINO ``Parameter``s and make every shape downstream
    dynamic; they are dropped from the inputs first so they stay constants.
    Nodes OpenVINO's frontend rejects but ONNX Runtime runs are rewritten where
    provably equivalent (:func:`~onnx_sched.exporters.ov_legalize.legalize_for_openvino`);
    what OpenVINO still cannot read raises :class:`ModelLoadError` with one line
    naming the node.
    """
    import onnx

    from onnx_sched.devices import openvino_core
    from onnx_sched.exporters.ov_legalize import legalize_for_openvino

    if not isinstance(model, onnx.ModelProto):
        from onnx_sched.importers.onnx import load_model

        model = load_model(model)
    inits = {i.name for i in model.graph.initializer}
    if any(i.name in inits for i in model.graph.input):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        keep = [i for i in m.graph.input if i.name not in inits]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        m.ir_version = max(m.ir_version, 4)
        model = m
    model = legalize_for_openvino(model)
    try:
        return openvino_core().read_model(model.SerializeToString(), b"")
    except RuntimeError as exc:
        raise ModelLoadError(_read_error_line(exc)) from exc


def _read_error_line(exc: BaseException) -> str:
    """One line from OpenVINO's multi-line frontend error: failed op, node name, reason.  Worded as OpenVINO
    2026.4 and 2025.0-2026.0 word it (these name an op without a conversion differently and give no summary line
    of the failed op: its type is the validated node's)."""
    import re

    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    failed = re.search(r"Conversion is failed for: (.*)", text)
    node = re.search(r"While validating ONNX node '<Node\((\w+)\): (.*?)>'", text)
    unconverted = re.search(r"(?:No conversion rule found for operations|OpenVINO does not support the following ONNX "
                            r"operations): (.*)", text)
    if unconverted:  # the rest of that report is a pointer to OpenVINO's extension docs
        return f"OpenVINO cannot read the ONNX model: it has no conversion for {unconverted.group(1).strip()}"
    reason = [ln for ln in lines if not ln.startswith(("Exception from", "Check ", "While validating", "FrontEnd API",
                                                         "Model wasn't", "-- ", "Summary:", "To facilitate",
                                                         "Errors during ONNX translation"))]
    what = failed.group(1).strip() if failed else node.group(1) if node else type(exc).__name__
    where = f" (node {node.group(2)!r})" if node else ""
    why = reason[-1] if reason else (lines[-1] if lines else "")
    return f"OpenVINO cannot read the ONNX model: {what}{where}: {why}"


def map_ov_to_graph_ops(ov_model: Any, imported: Any) -> dict[str, int]:
    """Friendly name of every ``ov_model`` op -> graph op id, ``-1`` when none.

    ``imported`` is an :class:`~onnx_sched.importers.onnx.ImportedOnnx` or an
    :class:`~onnx_sched.importers.openvino.ImportedOpenVINO`.
    """
    graph = imported.graph
    if hasattr(imported, "op_index"):  # imported from OpenVINO: names are friendly names
        by_name = {n: i for i, n in enumerate(imported.op_index)}
        return {op.get_friendly_name(): by_name.get(op.get_friendly_name(), -1) for op in ov_model.get_ordered_ops()}
    by_node = {n: i for i, n in enumerate(graph.op_names)}
    by_tensor: dict[str, int] = {}
    for t, name in enumerate(graph.tensor_names):
        p = int(graph.tensor_producer[t])
        if p >= 0:
            by_tensor[name] = p
    out: dict[str, int] = {}
    for op in ov_model.get_ordered_ops():
        fname = op.get_friendly_name()
        found = by_node.get(fname, -1)
        if found < 0:
            for port in op.outputs():
                for tname in port.get_names():
                    if tname in by_tensor:
                        found = by_tensor[tname]
                        break
                if found >= 0:
                    break
        if found < 0:  # frontend decomposition: "<node name>/<suffix>"
            cut = fname.rfind("/")
            while cut > 0 and found < 0:
                found = by_node.get(fname[:cut], -1)
                cut = fname.rfind("/", 0, cut)
        if found >= 0 and op.get_type_name() in ("Constant", "Parameter", "Result"):
            found = -1 if op.get_type_name() != "Result" else found
        out[fname] = found
    return out


def shape_only_ops(ov_model: Any) -> set[str]:
    """Friendly names of ops that compute only from shapes and constants: ``ShapeOf``,
    ``Constant`` and ops all of whose inputs are shape-only (shape sub-graphs)."""
    out: set[str] = set()
    for op in ov_model.get_ordered_ops():
        kind = op.get_type_name()
        if kind in ("ShapeOf", "Constant"):
            out.add(op.get_friendly_name())
        elif kind not in ("Parameter", "Result", "ReadValue") and op.get_input_size() > 0 and all(
            i.get_source_output().get_node().get_friendly_name() in out for i in op.inputs()
        ):
            out.add(op.get_friendly_name())
    return out


def complete_affinity(ov_model: Any, affinity: Mapping[str, str], shape_follow_consumer: bool = True) -> dict[str, str]:
    """A device for every op: given ones kept; others take their first consumer's
    device (Constants, weight sub-graphs and — with ``shape_follow_consumer`` —
    shape sub-graphs follow what reads them, so a shape computation never forces
    a HETERO boundary), else their producer's (Results), else the most common
    device."""
    ops = list(ov_model.get_ordered_ops())
    shape_only = shape_only_ops(ov_model) if shape_follow_consumer else set()
    out = {op.get_friendly_name(): affinity[op.get_friendly_name()] for op in ops
           if op.get_friendly_name() in affinity and op.get_friendly_name() not in shape_only}
    if not out:
        if all(op.get_type_name() in ("Parameter", "Constant", "Result") for op in ops):
            raise ValueError("OpenVINO reads this model with no op to run (it folds every op into a constant, so its "
                             "outputs do not depend on its inputs there): nothing to place on devices")
        raise ValueError("no op of the OpenVINO model is an op of the placement (OpenVINO named or fused them "
                         "otherwise): nothing to place on devices")
    default = max(set(out.values()), key=list(out.values()).count)
    for op in reversed(ops):  # consumers first
        name = op.get_friendly_name()
        if name in out:
            continue
        for port in op.outputs():
            for target in port.get_target_inputs():
                dev = out.get(target.get_node().get_friendly_name())
                if dev is not None:
                    out[name] = dev
                    break
            if name in out:
                break
    for op in ops:  # then producers
        name = op.get_friendly_name()
        if name in out:
            continue
        for inp in op.inputs():
            dev = out.get(inp.get_source_output().get_node().get_friendly_name())
            if dev is not None:
                out[name] = dev
                break
        out.setdefault(name, default)
    return out


def export_openvino(imported: Any, schedule: Schedule, device_names: Sequence[str],
                    ov_model: Any = None) -> Any:
    """An ``ov.Model`` carrying ``schedule.placement`` in model-level rt_info.

    ``imported`` is the ONNX (or OpenVINO) import the schedule was computed on;
    ``ov_model`` the model to annotate (default: ``imported.model`` read into
    OpenVINO).  Every op gets a device (see :func:`complete_affinity`).
    """
    if schedule.placement is None:
        raise ValueError("export_openvino: the schedule has no placement")
    placement = np.asarray(schedule.placement)
    if len(placement) and (placement.min() < 0 or placement.max() >= len(device_names)):
        raise ValueError(f"placement uses device ids outside [0, {len(device_names)}) for devices {list(device_names)}")
    if ov_model is None:
        ov_model = imported.model if hasattr(imported, "op_index") else read_onnx_into_openvino(with_weights(imported))
    mapping = map_ov_to_graph_ops(ov_model, imported)
    given = {name: device_names[int(placement[op])] for name, op in mapping.items() if op >= 0}
    affinity = complete_affinity(ov_model, given)
    ov_model.set_rt_info(json.dumps({"devices": list(device_names), "affinity": affinity}), RT_INFO_KEY)
    return ov_model


def placement_from_rt_info(ov_model: Any) -> dict[str, Any] | None:
    """The ``{"devices", "affinity"}`` dict stored by :func:`export_openvino`, or None."""
    if not ov_model.has_rt_info(RT_INFO_KEY):
        return None
    value = ov_model.get_rt_info(RT_INFO_KEY)
    text = value.astype(str) if hasattr(value, "astype") else str(value)
    return json.loads(text)
