"""Placement files: which device runs each op, by op name (``onnx-sched-placement/1``).

Ops are named as the importer names them (ONNX:
:func:`~onnx_sched.importers.onnx.stable_op_names`, unique and the same in a
model and in its reordering, also for unnamed or duplicate-named nodes; OpenVINO:
the op's friendly name).

An OpenVINO IR written by onnx-sched keeps its placement in model-level rt_info and in a
sidecar placement file beside it (per-op affinity does not survive an IR save/read:
:mod:`onnx_sched.exporters.openvino_ir`); :func:`placement_of_ir` finds it.

A placement file is JSON ``{"format", "model", "devices", "placement": {op: device},
...extra}``.  :func:`save_placement` writes one; :func:`load_placement` reads one
back, or reads the per-node ``pkg.onnx_sched.device`` metadata of an ONNX model
written by the ONNX exporter.  Apart from the runtime benches because it needs no
runtime: a placement is saved and loaded the same whichever runtime then runs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import OnnxSchedError

__all__ = ["PLACEMENT_FORMAT", "load_placement", "placement_of_ir", "read_placement_map", "save_placement", "save_placement_map",
           "sidecar_path"]

PLACEMENT_FORMAT = "onnx-sched-placement/1"


def save_placement(path: str | os.PathLike, graph: Any, placement: np.ndarray, device_names: Sequence[str],
                   **extra: Any) -> None:
    """Write a placement file: ``{"format", "model", "devices", "placement": {op: device}, ...extra}``."""
    p = np.asarray(placement, np.int64)
    save_placement_map(path, graph.name, device_names,
                       {graph.op_names[i]: device_names[int(p[i])] for i in range(graph.n_ops)}, **extra)


def save_placement_map(path: str | os.PathLike, model_name: str, device_names: Sequence[str],
                       mapping: Mapping[str, str], **extra: Any) -> None:
    """Write a placement file from ``{op name: device}`` (atomically).  The OpenVINO IR exporter
    writes its sidecar with this: there ``mapping`` names every op of the IR, Constants included."""
    from onnx_sched.cli._common import write_json_atomic

    data = {"format": PLACEMENT_FORMAT, "model": model_name, "devices": list(device_names),
            "placement": dict(mapping), **extra}
    write_json_atomic(data, path)


def read_placement_map(path: str | os.PathLike) -> tuple[dict[str, str], list[str], dict[str, Any]]:
    """``({op name: device}, device names, the file's other fields)`` of a placement JSON file."""
    p = Path(path)
    if not p.is_file():
        raise OnnxSchedError(f"{p}: placement file not found")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OnnxSchedError(f"{p}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != PLACEMENT_FORMAT:
        got = data.get("format") if isinstance(data, dict) else None
        raise OnnxSchedError(f"{p}: not a placement file (format {got!r}, expected {PLACEMENT_FORMAT!r})")
    return dict(data["placement"]), list(data["devices"]), {k: v for k, v in data.items() if k != "placement"}


def _json_list(model: Any, key: str) -> list[Any] | None:
    """The JSON list in the model-level ``metadata_props`` entry ``key``, or None (no entry, not a JSON list)."""
    raw = next((q.value for q in model.metadata_props if q.key == key), None)
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _listed_devices(model: Any) -> list[str] | None:
    """The model-level device list an onnx-sched export wrote (``onnx_sched.devices``), or None."""
    from onnx_sched.exporters.onnx import DEVICES_KEY

    listed = _json_list(model, DEVICES_KEY)
    ok = bool(listed) and all(isinstance(d, str) for d in listed)
    return listed if ok and len(set(listed)) == len(listed) else None


def load_placement(path: str | os.PathLike, graph: Any, *,
                   as_onnx: bool = False) -> tuple[np.ndarray, list[str], dict[str, Any]]:
    """``(device index per op, device names, file metadata)`` from a placement JSON, an
    ONNX model with ``pkg.onnx_sched.device`` node metadata or an OpenVINO IR ``.xml``
    with a placement in its rt_info (:mod:`onnx_sched.exporters.openvino_ir`).  An ONNX model's metadata has
    ``transfer_steps`` when the export recorded where its transfers run (``onnx_sched.transfer_steps``).
    The file's kind comes from its suffix; ``as_onnx`` reads it as an ONNX model whatever its name (a model that
    is its own placement, imported as ONNX)."""
    p = Path(path)
    if not p.is_file():
        raise OnnxSchedError(f"{p}: placement file not found")
    if as_onnx or p.suffix.lower() == ".onnx":
        from onnx_sched.exporters.onnx import DEVICE_KEY
        from onnx_sched.importers.onnx import load_model_without_initializers, stable_op_names

        m = load_model_without_initializers(p)  # the nodes' metadata: the weights are not read; one line for a
        # file that is not ONNX
        nodes = m.graph.node
        by_node = {name: {q.key: q.value for q in n.metadata_props}.get(DEVICE_KEY)
                   for name, n in zip(stable_op_names(nodes), nodes)}
        mapping = {name: by_node.get(name) for name in graph.op_names}
        meta: dict[str, Any] = {"source": "onnx-metadata"}
        from onnx_sched.exporters.onnx import TRANSFER_STEPS_KEY

        recorded = _json_list(m, TRANSFER_STEPS_KEY)  # where an export ran each transfer
        if recorded is not None:
            meta["transfer_steps"] = recorded
        devices = list(dict.fromkeys(v for v in mapping.values() if v is not None))
        listed = _listed_devices(m)
        if listed is not None and set(devices) <= set(listed):  # the devices the placement chose among, in order
            devices = listed
    elif p.suffix.lower() == ".xml":
        from onnx_sched.exporters.openvino import placement_from_rt_info
        from onnx_sched.importers.openvino import read_ir

        stored = placement_from_rt_info(read_ir(p))
        if stored is None:
            raise OnnxSchedError(f"{p}: the IR carries no onnx-sched placement (rt_info onnx_sched/placement)")
        mapping, devices = stored["affinity"], list(stored["devices"])
        meta = {"source": "openvino-rt_info"}
    else:
        mapping, devices, meta = read_placement_map(p)
        # generic op names can match another model's; an IR's sidecar also names the IR's Constants and
        # Parameters (not ops), so it is not checked this way (its IR's ops are matched by name below)
        extra = set(mapping) - set(graph.op_names) if meta.get("source") != "openvino-ir" else set()
        if extra and meta.get("model") not in (None, graph.name):
            raise OnnxSchedError(f"{p}: a placement of model {meta['model']!r} ({len(mapping)} ops), not of "
                                 f"{graph.name!r} ({graph.n_ops} ops; {len(extra)} of the file's ops are not in it)")
    missing = [n for n in graph.op_names if mapping.get(n) is None]
    if missing:
        raise OnnxSchedError(f"{p}: no device for {len(missing)} ops of {graph.name} (first: {missing[0]!r})")
    unknown = sorted({v for v in mapping.values() if v not in devices})
    if unknown:
        raise OnnxSchedError(f"{p}: devices {unknown} are not in the file's device list {devices}")
    placement = np.array([devices.index(mapping[n]) for n in graph.op_names], np.int64)
    return placement, devices, meta


def sidecar_path(xml_path: str | os.PathLike) -> Path:
    """Where the placement of IR ``xml_path`` is written: ``<stem>.placement.json`` beside it."""
    p = Path(xml_path)
    return p.with_name(f"{p.stem}.placement.json")


def placement_of_ir(xml_path: str | os.PathLike) -> Path:
    """Where the placement of an IR written by onnx-sched is: its sidecar placement file when
    present, else the IR itself (its rt_info; :func:`load_placement` says when it has none)."""
    side = sidecar_path(xml_path)
    return side if side.is_file() else Path(xml_path)
