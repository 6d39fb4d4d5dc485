"""An imported ONNX model with its external weight data read in, for runtimes that load it from bytes.

The import never reads weight bytes (:mod:`onnx_sched.importers.onnx`), and the exporter writes the
external references back as they were.  But an ONNX Runtime session or an OpenVINO model built from
serialized bytes cannot find a data file beside the model: the commands that run the model (the
measured target, ``bench-placement``, ``profile``, the per-device processes) take :func:`with_weights`, except
where ONNX Runtime can read the data files itself: the sessions of ``bench-placement`` and the measured target
of a model read from a file (:func:`onnx_sched.bench.file_weights.model_for_sessions`); OpenVINO's read of such a
model maps them (:func:`onnx_sched.bench.runtimes.openvino_inputs.openvino_model_of`).
"""

from __future__ import annotations

import weakref
from pathlib import Path

import onnx
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from onnx_sched.errors import ModelLoadError, first_line
from onnx_sched.importers.onnx import ImportedOnnx

__all__ = ["with_data_read_in", "with_weights"]

_WITH_WEIGHTS: weakref.WeakKeyDictionary[ImportedOnnx, onnx.ModelProto] = weakref.WeakKeyDictionary()


def with_weights(imported: ImportedOnnx) -> onnx.ModelProto:
    """``imported.model`` itself when it has no external data; otherwise a copy with the data read in, once
    per import (``imported.model`` keeps its references)."""
    model = imported.model
    if not any(uses_external_data(t) for t in model.graph.initializer):
        return model
    if imported.path is None:
        raise ModelLoadError(f"{model.graph.name or 'the model'}: its weights are in external data files and the "
                             "model was given in memory, not as a file; load it with its external data")
    if imported not in _WITH_WEIGHTS:
        _WITH_WEIGHTS[imported] = with_data_read_in(model, imported.path)
    return _WITH_WEIGHTS[imported]


def with_data_read_in(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    """``model`` itself when no initializer has external data; otherwise a copy with the data read in from the
    files beside ``path`` (the file ``model``, or the model it was cut from, was read from); one-line
    :class:`ModelLoadError` when they cannot be read."""
    if not any(uses_external_data(t) for t in model.graph.initializer):
        return model
    full = onnx.ModelProto()
    full.CopyFrom(model)
    try:
        load_external_data_for_model(full, str(Path(path).parent))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path}: cannot read its external data: {first_line(exc, limit=None)}") from None
    return full
