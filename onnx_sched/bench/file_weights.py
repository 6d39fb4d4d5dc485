"""Where a model file holds each of its large weights, so that ONNX Runtime reads them from the file itself.

A model saved inline keeps every initializer's bytes in its ``raw_data`` field, somewhere in the file.
:func:`file_weights` finds those places by walking the protobuf wire format of the file (through an ``mmap``:
the weights are not read into memory), and keeps the weights whose bytes there equal the imported model's
own -- an import whose weights were replaced in memory keeps its path, so the file's word is not taken.  An
ONNX Runtime session can then point each such weight at ``(file, offset, length)`` as external data
(:func:`onnx_sched.bench.ort_session.inference_session`) and map it from the file: no copy of the weights is
made in Python, and the ones ORT makes are file pages the system can drop.
"""

from __future__ import annotations

import mmap
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from onnx_sched.onnx_structure import is_large
from onnx_sched.onnx_wire import initializer_spans

__all__ = ["FileWeights", "file_weights"]


@dataclass(frozen=True)
class FileWeights:
    """The model file ``path`` and, per initializer name, the ``(offset, length)`` of its raw bytes there."""

    path: Path
    spans: Mapping[str, tuple[int, int]] = field(repr=False)


_CACHE: weakref.WeakKeyDictionary[Any, FileWeights | None] = weakref.WeakKeyDictionary()


def file_weights(imported: Any) -> FileWeights | None:
    """Where ``imported``'s file holds its large inline initializers (:func:`~onnx_sched.onnx_structure.is_large`)
    whose bytes there equal the model's own (checked once per import); ``None`` for a model given in memory, a
    file that is gone or not a plain protobuf, or one with no such weight."""
    if imported in _CACHE:
        return _CACHE[imported]
    found = None
    path = getattr(imported, "path", None)
    if path is not None and Path(path).is_file():
        wanted = {t.name: t for t in imported.model.graph.initializer
                  if t.data_location != onnx.TensorProto.EXTERNAL and is_large(t)}
        try:
            with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                spans = {name: (off, n) for name, (off, n) in initializer_spans(data).items()
                         if name in wanted and data[off:off + n] == wanted[name].raw_data}
        except (OSError, ValueError, IndexError):
            spans = {}
        found = FileWeights(Path(path).resolve(), spans) if spans else None
    _CACHE[imported] = found
    return found
