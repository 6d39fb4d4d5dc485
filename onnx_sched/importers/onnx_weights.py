"""An imported ONNX model with its external weight data read in, for runtimes that load it from bytes.

The import never reads weight bytes (:mod:`onnx_sched.importers.onnx`), and the exporter writes the
external references back as they were.  But an ONNX Runtime session or an OpenVINO model built from
serialized bytes cannot find a data file beside the model: the commands that run the model (the
measured target, ``bench-placement``, ``profile``, the per-device processes) take :func:`with_weights`, except
where ONNX Runtime can read the data files itself: the sessions of ``bench-placement`` and the measured target
of a model read from a file (:func:`onnx_sched.bench.file_weights.model_for_sessions`); OpenVINO's read of such a
model maps them (:func:`onnx_sched.bench.runtimes.openvino_inputs.openvino_model_of`).

Runtimes also get sparse initializers written dense (:func:`with_dense_weights`): ONNX Runtime densifies them
itself, but the models cut from one (a part of the split executor, one op of a device process) copy dense
initializers only, and OpenVINO and onnx2torch read none.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from onnx_sched.errors import ModelLoadError, first_line
from onnx_sched.importers.onnx import ImportedOnnx

__all__ = ["dense_initializer", "with_data_read_in", "with_dense_weights", "with_weights"]

_WITH_WEIGHTS: weakref.WeakKeyDictionary[ImportedOnnx, onnx.ModelProto] = weakref.WeakKeyDictionary()


def with_weights(imported: ImportedOnnx) -> onnx.ModelProto:
    """``imported.model`` itself when it has no external data and no sparse initializer; otherwise a copy with the
    data read in and the sparse initializers dense, once per import (``imported.model`` keeps both)."""
    model = imported.model
    external = any(uses_external_data(t) for t in model.graph.initializer)
    if not external and not model.graph.sparse_initializer:
        return model
    if external and imported.path is None:
        raise ModelLoadError(f"{model.graph.name or 'the model'}: its weights are in external data files and the "
                             "model was given in memory, not as a file; load it with its external data")
    if imported not in _WITH_WEIGHTS:
        _WITH_WEIGHTS[imported] = with_dense_weights(with_data_read_in(model, imported.path) if external else model)
    return _WITH_WEIGHTS[imported]


def dense_initializer(sparse: onnx.SparseTensorProto) -> onnx.TensorProto:
    """The dense tensor a sparse initializer stands for (its indices flat or one row per value).

    >>> from onnx import helper
    >>> values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    >>> sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([1, 3]), "i"), [2, 2])
    >>> numpy_helper.to_array(dense_initializer(sparse)).tolist()
    [[0.0, 1.0], [0.0, 2.0]]
    """
    values = numpy_helper.to_array(sparse.values)
    index = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dense = np.zeros(tuple(sparse.dims), values.dtype)
    if index.ndim == 2:
        dense[tuple(index.T)] = values
    else:
        dense.reshape(-1)[index] = values
    return numpy_helper.from_array(dense, sparse.values.name)


def with_dense_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` itself when its graph has no sparse initializer; otherwise a copy with them as dense ones."""
    if not model.graph.sparse_initializer:
        return model
    dense = onnx.ModelProto()
    dense.CopyFrom(model)
    dense.graph.initializer.extend(dense_initializer(t) for t in dense.graph.sparse_initializer)
    del dense.graph.sparse_initializer[:]
    return dense


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
