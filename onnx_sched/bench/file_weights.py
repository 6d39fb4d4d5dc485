"""Where a model file holds each of its large weights, so that ONNX Runtime reads them from the file itself.

A model saved inline keeps every initializer's bytes in its ``raw_data`` field, somewhere in the file.
:func:`file_weights` finds those places by walking the protobuf wire format of the file (through an ``mmap``:
the weights are not read into memory), and keeps the weights whose bytes there equal the imported model's
own -- an import whose weights were replaced in memory keeps its path, so the file's word is not taken.  An
ONNX Runtime session can then point each such weight at ``(file, offset, length)`` as external data
(:func:`onnx_sched.bench.ort_session.inference_session`) and map it from the file: no copy of the weights is
made in Python, and the ones ORT makes are file pages the system can drop.  A model whose weights are in
external data files already has them where ORT can read them: :func:`model_for_sessions` leaves them there.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from onnx_sched.onnx_structure import is_large
from onnx_sched.onnx_wire import initializer_spans, mapped

__all__ = ["FileWeights", "file_weights", "model_for_sessions"]


@dataclass(frozen=True)
class FileWeights:
    """The model file ``path`` and, per initializer name, the ``(offset, length)`` of its raw bytes there."""

    path: Path
    spans: Mapping[str, tuple[int, int]] = field(repr=False)


_CACHE: weakref.WeakKeyDictionary[Any, FileWeights | None] = weakref.WeakKeyDictionary()
_DENSE: weakref.WeakKeyDictionary[Any, onnx.ModelProto] = weakref.WeakKeyDictionary()  # sparse weights made dense


def file_weights(imported: Any, runtime: str = "onnxruntime") -> FileWeights | None:
    """The file ``imported`` was read from -- whose folder its external data files are relative to -- and where it
    holds its large inline initializers (:func:`~onnx_sched.onnx_structure.is_large`) whose bytes there equal the
    model's own (checked once per import); ``None`` for a model given in memory, a file that is gone, or, for
    ``runtime`` ``"onnxruntime"``, an ONNX Runtime too old to read data from a folder it is told (before 1.21: the
    weights are then handed over).  For ``"openvino"`` there is no such condition: its reads map the file with numpy
    (:func:`~onnx_sched.bench.runtimes.openvino_inputs.weights_in_files`)."""
    if runtime not in ("onnxruntime", "openvino"):
        raise ValueError(f"runtime must be 'onnxruntime' or 'openvino', got {runtime!r}")
    if runtime == "onnxruntime" and not _ort_reads_from_a_folder():
        return None
    return _weights_in_file(imported)


def _weights_in_file(imported: Any) -> FileWeights | None:
    """:func:`file_weights` whatever reads them, cached per import."""
    if imported in _CACHE:
        return _CACHE[imported]
    found = None
    path = getattr(imported, "path", None)
    if path is not None and Path(path).is_file():
        wanted = {t.name: t for t in imported.model.graph.initializer
                  if t.data_location != onnx.TensorProto.EXTERNAL and is_large(t)}
        spans: dict[str, tuple[int, int]] = {}
        if wanted:
            try:
                with mapped(path) as data:
                    spans = {name: (off, n) for name, (off, n) in initializer_spans(data).items()
                             if name in wanted and data[off:off + n] == wanted[name].raw_data}
            except (OSError, ValueError, IndexError):  # not plain protobuf: every weight is handed over
                spans = {}
        found = FileWeights(Path(path).resolve(), spans)
    _CACHE[imported] = found
    return found


def _ort_reads_from_a_folder() -> bool:
    """Whether this ONNX Runtime resolves the external data of a model given as bytes in the folder its session
    options name (``session.model_external_initializers_file_folder_path``, ONNX Runtime 1.21 and later)."""
    import onnxruntime as ort

    try:
        major, minor = (int(x) for x in ort.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (1, 21)


def model_for_sessions(imported: Any) -> tuple[onnx.ModelProto, FileWeights | None]:
    """``(model, weights)`` to build ONNX Runtime sessions of ``imported`` from: its own model (sparse initializers
    dense), whose external data ORT reads from the files beside it, with :func:`file_weights`; for a model given in
    memory, the model with its external data read in (:func:`~onnx_sched.importers.onnx_weights.with_weights`)
    and no file."""
    from onnx_sched.importers.onnx_weights import with_dense_weights, with_weights

    weights = file_weights(imported)
    if weights is None:
        return with_weights(imported), None
    if not imported.model.graph.sparse_initializer:
        return imported.model, weights
    if imported not in _DENSE:  # once per import, as with_weights
        _DENSE[imported] = with_dense_weights(imported.model)
    return _DENSE[imported], weights
