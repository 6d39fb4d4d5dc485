"""Synthetic datasets on disk: one compact NPZ (or ONNX) file per graph plus ``manifest.json``.

NPZ file layout (``FORMAT = "onnx-sched-synth-npz/1"``; ``numpy.load(..., allow_pickle=False)`` reads it):

===============  ==========  ====================================================
key              dtype       meaning
===============  ==========  ====================================================
``edges``        int32 (E,2) op-to-op edges ``u -> v`` (op ids ``0..n-1``)
``output_bytes`` int64 (n)   bytes of op ``i``'s output tensor (m_i)
``param_bytes``  int64 (n)   transient parameter bytes (p_i, paper 000 eq. 15)
``mem_units``    float64 (n) m_i in memory units before rounding (optional)
``param_units``  float64 (n) p_i in memory units before rounding (optional)
``layer_of_op``  int32 (n)   layer of each op (layered family only)
``meta``         str (0-d)   JSON: format, name, family, seed, unit_bytes, params, ...
===============  ==========  ====================================================

The graph is rebuilt with ``Graph.from_edges`` (node-centric, sinks freed at
once), so ``load_graph_npz(save_graph_npz(g))`` has the same ops, edges, sizes
and metadata.

``manifest.json`` (written by ``onnx-sched gen``, read by :func:`load_dataset`)::

    {"format": "npz" | "onnx", "family": ..., "params": {...}, "seed": S, "count": K,
     "nodes": N, "unit_bytes": ..., "generator": "onnx-sched X.Y.Z",
     "files": [{"file": "layered-00000.npz", "seed": S, "n_ops": ..., "n_edges": ...,
                "sha256": ...}, ...]}

Graph ``i`` of a dataset uses seed ``S + i``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.exporters.paths import atomic_write_bytes
from onnx_sched.graph import Graph

__all__ = [
    "FORMAT",
    "MANIFEST",
    "atomic_write_bytes",
    "graph_to_npz_bytes",
    "iter_dataset",
    "load_dataset",
    "load_graph_npz",
    "read_manifest",
    "save_graph_npz",
    "sha256_file",
]

FORMAT = "onnx-sched-synth-npz/1"
MANIFEST = "manifest.json"
_ARRAY_META = ("mem_units", "param_units", "layer_of_op")


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"metadata value of type {type(value).__name__} is not JSON-serialisable")


def graph_to_npz_bytes(graph: Graph) -> bytes:
    """The NPZ file content of ``graph`` (node-centric graphs: one output tensor per op)."""
    outs = graph.op_outputs.lengths()
    if (outs != 1).any():
        raise ValueError(f"save_graph_npz: graph {graph.name!r} has ops without exactly one output tensor")
    meta = dict(graph.metadata or {})
    arrays: dict[str, np.ndarray] = {
        "edges": graph.edges.astype(np.int32),
        "output_bytes": graph.op_output_bytes.astype(np.int64),
        "param_bytes": np.asarray(graph.op_param_bytes, dtype=np.int64),
    }
    for key in _ARRAY_META:
        if meta.get(key) is not None:
            value = np.asarray(meta.pop(key))
            arrays[key] = value.astype(np.int32) if key == "layer_of_op" else value.astype(np.float64)
    scalar = {k: _json_safe(v) for k, v in meta.items() if not isinstance(v, np.ndarray)}
    scalar.update(format=FORMAT, name=graph.name, n_ops=graph.n_ops, op_types=sorted(set(graph.op_types)))
    arrays["meta"] = np.array(json.dumps(scalar, sort_keys=True))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def save_graph_npz(graph: Graph, path: str | os.PathLike[str]) -> Path:
    """Write ``graph`` as an NPZ file (layout in the module docstring), atomically."""
    return atomic_write_bytes(path, graph_to_npz_bytes(graph))


def load_graph_npz(path: str | os.PathLike[str]) -> Graph:
    """Read a graph written by :func:`save_graph_npz`."""
    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z.files:
            raise ValueError(f"{path}: not an onnx-sched synthetic graph (no 'meta' entry)")
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        n = int(meta["n_ops"])
        op_types = meta.get("op_types") or ["Op"]
        g = Graph.from_edges(
            n,
            map(tuple, z["edges"].astype(np.int64).tolist()),
            output_bytes=z["output_bytes"],
            param_bytes=z["param_bytes"],
            op_types=[op_types[0]] * n if len(op_types) == 1 else None,
            name=meta.get("name", Path(path).stem),
        )
        extra = {key: z[key] for key in _ARRAY_META if key in z.files}
    for arr in extra.values():
        arr.setflags(write=False)
    for key in ("format", "name", "n_ops", "op_types"):
        meta.pop(key, None)
    if "layer_sizes" in meta:
        meta["layer_sizes"] = tuple(meta["layer_sizes"])
    op_attrs = tuple({"layer": int(l)} for l in extra["layer_of_op"]) if "layer_of_op" in extra else ()
    return replace(g, metadata={**meta, **extra}, op_attrs=op_attrs or g.op_attrs)


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {directory}")
    return json.loads(path.read_text())


def iter_dataset(directory: str | os.PathLike[str], verify: bool = False) -> Iterator[Graph]:
    """Graphs of a dataset written by ``onnx-sched gen`` in manifest order.

    NPZ files load directly; ONNX files go through the ONNX importer.  With
    ``verify`` each file's sha256 is checked against the manifest.
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    for entry in manifest["files"]:
        path = directory / entry["file"]
        if verify and sha256_file(path) != entry["sha256"]:
            raise ValueError(f"{path}: sha256 differs from {MANIFEST}")
        if manifest["format"] == "npz":
            yield load_graph_npz(path)
        else:
            from onnx_sched.importers.onnx import import_onnx

            yield import_onnx(path).graph


def load_dataset(directory: str | os.PathLike[str], verify: bool = False) -> list[Graph]:
    """All graphs of a dataset folder (see :func:`iter_dataset`)."""
    return list(iter_dataset(directory, verify))
