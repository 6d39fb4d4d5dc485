"""Any model onnx-sched reads -> its importer: OpenVINO (``.xml`` path or ``ov.Model``) or ONNX.

The one place that decides a model's format, so the CLI commands, the API and the
plugins accept the same inputs.  Each importer keeps its own result type
(:class:`~onnx_sched.importers.onnx.ImportedOnnx`,
:class:`~onnx_sched.importers.openvino.ImportedOpenVINO`); both carry ``graph``,
``model``, ``weight_nodes`` and ``path``, which is what code above the importers
reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Union

import onnx

from onnx_sched.errors import ModelLoadError
from onnx_sched.importers.onnx import ImportedOnnx, import_onnx
from onnx_sched.importers.openvino import ImportedOpenVINO, import_openvino, is_openvino_source

__all__ = ["Imported", "import_model", "is_openvino_source"]

Imported = Union[ImportedOnnx, ImportedOpenVINO]


def import_model(source: str | os.PathLike | Any, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                 dims: Mapping[str, int] | None = None, weights_in_file: bool = False) -> Imported:
    """Import ``source``: an OpenVINO IR ``.xml`` path or ``openvino.Model`` through
    :func:`~onnx_sched.importers.openvino.import_openvino`, anything else (an ``.onnx``
    path, an ``onnx.ModelProto``) through :func:`~onnx_sched.importers.onnx.import_onnx`
    (``weights_in_file``: an ONNX file's large inline weights left in it and referred to; an IR's weights are
    always read through a map of its ``.bin``).
    Bad input raises the importers' one-line :class:`~onnx_sched.errors.OnnxSchedError`."""
    if is_openvino_source(source):
        return import_openvino(source, input_shapes=input_shapes, dims=dims)
    if not isinstance(source, (str, os.PathLike, onnx.ModelProto)):
        raise ModelLoadError(f"expected a model path, an onnx.ModelProto or an openvino.Model, got {type(source).__name__}")
    return import_onnx(source, input_shapes=input_shapes, dims=dims, weights_in_file=weights_in_file)
