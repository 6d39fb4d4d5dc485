"""Model files into OpenVINO for ``onnx-sched bench --runtime openvino``: ONNX or IR, one-line errors.

An ONNX file goes through
:func:`~onnx_sched.exporters.openvino.read_onnx_into_openvino` (legalization,
one-line frontend errors), with its external data loaded from beside the file;
an IR ``.xml`` through :func:`onnx_sched.importers.openvino.read_ir` (OpenVINO's IR
frontend, one-line errors).  :func:`ir_input_specs` gives
:func:`onnx_sched.bench.measure.random_inputs` the inputs of an IR, so an IR gets
the same seeded inputs as its ONNX original.

Apart from :mod:`~onnx_sched.bench.runtimes.openvino_runner` so that the parent
process can read an IR's inputs without importing the runner's runtime code
(which imports back into :mod:`onnx_sched.bench.measure`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import OnnxSchedError

__all__ = ["ir_input_specs", "is_ir", "read_ir", "read_model"]


def is_ir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names an OpenVINO IR (``.xml``) rather than an ONNX file."""
    return Path(path).suffix.lower() == ".xml"


def read_ir(path: str | os.PathLike[str]) -> Any:
    """``openvino.Model`` of an IR ``.xml`` (weights from the ``.bin`` beside it); one-line errors
    (:func:`onnx_sched.importers.openvino.read_ir`)."""
    from onnx_sched.importers.openvino import read_ir as _read_ir

    return _read_ir(path)


def read_model(path: str | os.PathLike[str]) -> tuple[Any, list[str] | None]:
    """``(openvino.Model, ONNX output names)`` of an ONNX file, or ``(model, None)`` of an IR."""
    if is_ir(path):
        return read_ir(path), None
    from onnx import external_data_helper

    from onnx_sched.exporters.openvino import read_onnx_into_openvino
    from onnx_sched.importers.onnx import load_model

    proto = load_model(path)
    if any(external_data_helper.uses_external_data(t) for t in proto.graph.initializer):
        external_data_helper.load_external_data_for_model(proto, str(Path(path).parent))
    return read_onnx_into_openvino(proto), [o.name for o in proto.graph.output]


def ir_input_specs(path: str | os.PathLike[str] | Any) -> list[tuple[str, np.dtype[Any] | None, list[int | None], str]]:
    """``(name, numpy dtype or None, dims with None where dynamic, type name)`` of each input of an
    IR ``.xml`` (a path) or of an ``openvino.Model``."""
    import openvino as ov

    t = ov.Type
    # to_dtype maps bf16 to float16 and sub-byte types to uint8: only these are what they say
    plain = {t.boolean, t.f16, t.f32, t.f64, t.i8, t.i16, t.i32, t.i64, t.u8, t.u16, t.u32, t.u64}
    specs: list[tuple[str, np.dtype[Any] | None, list[int | None], str]] = []
    model = read_ir(path) if isinstance(path, (str, os.PathLike)) else path
    for port in model.inputs:
        et, shape = port.get_element_type(), port.get_partial_shape()
        if shape.rank.is_dynamic:
            raise OnnxSchedError(f"input {port.get_any_name()!r} of {path} has a dynamic rank; bench needs a rank")
        dtype = np.dtype(et.to_dtype()) if et in plain else None
        specs.append((port.get_any_name(), dtype, [d.get_length() if d.is_static else None for d in shape],
                      et.get_type_name()))
    return specs
