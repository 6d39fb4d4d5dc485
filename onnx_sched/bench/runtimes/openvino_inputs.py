"""An imported model (ONNX or OpenVINO IR) as OpenVINO runs it: a fresh ``ov.Model``, seeded inputs, output names.

The placement bench (:mod:`~onnx_sched.bench.runtimes.openvino`) and OpenVINO
profiling (:mod:`onnx_sched.profiling.runtimes`) take either importer's result;
this module is where the two formats differ for them.  An IR gets the same seeded
inputs as ``onnx-sched bench`` gives it (the rules of
:func:`onnx_sched.bench.inputs.import_feed`, applied to the IR's input specs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.importers.onnx_weights import with_weights

__all__ = ["is_openvino_import", "openvino_model_of", "output_names", "seeded_inputs"]


def is_openvino_import(imported: Any) -> bool:
    """Whether ``imported`` came from the OpenVINO importer (an IR or ``ov.Model``)."""
    return hasattr(imported, "op_index")


def openvino_model_of(imported: Any) -> Any:
    """A fresh ``openvino.Model`` of the import, safe to annotate and compile: a clone of an
    imported IR, or the ONNX model read by OpenVINO's frontend."""
    if is_openvino_import(imported):
        return imported.model.clone()
    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    return read_onnx_into_openvino(with_weights(imported))


def output_names(imported: Any) -> list[str]:
    """Names of the model's outputs in OpenVINO's output order (ONNX: the graph outputs, which
    OpenVINO keeps in order; IR: each Result's tensor name, else ``output<i>``)."""
    if not is_openvino_import(imported):
        return [o.name for o in imported.model.graph.output]
    out = []
    for i, port in enumerate(imported.model.outputs):
        names = port.get_names()
        out.append(port.get_any_name() if names else f"output{i}")
    return out


def seeded_inputs(imported: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs (floats standard normal, integers 0/1, bools random), keyed by input name."""
    from onnx_sched.bench.inputs import import_feed

    return import_feed(imported, seed)
