"""Placement files: which device runs each op, by op name (``onnx-sched-placement/1``).

Ops are named as the importer names them
(:func:`~onnx_sched.importers.onnx.stable_op_names`): unique, and the same in a
model and in its reordering, also for unnamed or duplicate-named nodes.

A placement file is JSON ``{"format", "model", "devices", "placement": {op: device},
...extra}``.  :func:`save_placement` writes one; :func:`load_placement` reads one
back, or reads the per-node ``pkg.onnx_sched.device`` metadata of an ONNX model
written by the ONNX exporter.  Apart from the runtime benches because it needs no
runtime: a placement is saved and loaded the same whichever runtime then runs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import OnnxSchedError

__all__ = ["PLACEMENT_FORMAT", "load_placement", "save_placement"]

PLACEMENT_FORMAT = "onnx-sched-placement/1"


def save_placement(path: str | os.PathLike, graph: Any, placement: np.ndarray, device_names: Sequence[str],
                   **extra: Any) -> None:
    """Write a placement file: ``{"format", "model", "devices", "placement": {op: device}, ...extra}``."""
    from onnx_sched.cli._common import write_json_atomic

    p = np.asarray(placement, np.int64)
    data = {"format": PLACEMENT_FORMAT, "model": graph.name, "devices": list(device_names),
            "placement": {graph.op_names[i]: device_names[int(p[i])] for i in range(graph.n_ops)}, **extra}
    write_json_atomic(data, path)


def load_placement(path: str | os.PathLike, graph: Any) -> tuple[np.ndarray, list[str], dict[str, Any]]:
    """``(device index per op, device names, file metadata)`` from a placement JSON or an
    ONNX model with ``pkg.onnx_sched.device`` node metadata."""
    p = Path(path)
    if not p.is_file():
        raise OnnxSchedError(f"{p}: placement file not found")
    if p.suffix == ".onnx":
        import onnx

        from onnx_sched.exporters.onnx import DEVICE_KEY
        from onnx_sched.importers.onnx import stable_op_names

        m = onnx.load(str(p), load_external_data=False)
        nodes = m.graph.node
        by_node = {name: {q.key: q.value for q in n.metadata_props}.get(DEVICE_KEY)
                   for name, n in zip(stable_op_names(nodes), nodes)}
        mapping = {name: by_node.get(name) for name in graph.op_names}
        meta: dict[str, Any] = {"source": "onnx-metadata"}
        devices = list(dict.fromkeys(v for v in mapping.values() if v is not None))
    else:
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise OnnxSchedError(f"{p}: not JSON ({exc})") from None
        if data.get("format") != PLACEMENT_FORMAT:
            raise OnnxSchedError(f"{p}: not a placement file (format {data.get('format')!r}, expected {PLACEMENT_FORMAT!r})")
        mapping = data["placement"]
        devices = list(data["devices"])
        meta = {k: v for k, v in data.items() if k not in ("placement",)}
    missing = [n for n in graph.op_names if mapping.get(n) is None]
    if missing:
        raise OnnxSchedError(f"{p}: no device for {len(missing)} ops of {graph.name} (first: {missing[0]!r})")
    unknown = sorted({v for v in mapping.values() if v not in devices})
    if unknown:
        raise OnnxSchedError(f"{p}: devices {unknown} are not in the file's device list {devices}")
    placement = np.array([devices.index(mapping[n]) for n in graph.op_names], np.int64)
    return placement, devices, meta
