"""An imported model (ONNX or OpenVINO IR) as OpenVINO runs it: a fresh ``ov.Model``, seeded inputs, output names.

The placement bench (:mod:`~onnx_sched.bench.runtimes.openvino`) and OpenVINO
profiling (:mod:`onnx_sched.profiling.runtimes`) take either importer's result;
this module is where the two formats differ for them.  An IR gets the same seeded
inputs as ``onnx-sched bench`` gives it (the rules of
:func:`onnx_sched.bench.inputs.import_feed`, applied to the IR's input specs).

An ONNX import is read into OpenVINO once (every later model is a clone, whose constants share the
first one's buffers), and without its weights passing through Python where its file holds them
(:func:`weights_in_files`): OpenVINO's frontend reads the model with those weights as inputs, and
each such input becomes a constant over a map of the file.  (OpenVINO's own external-data reader
refuses a data file outside the folder of the model it reads, which here would be a copy in a
temporary folder.)  ``bench-placement`` of a 417 MB BERT on OpenVINO held 7.6 times the file at its
peak before (docs/results.md, 24).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnx_sched.importers.onnx_weights import with_weights

__all__ = ["FileTensor", "is_openvino_import", "openvino_model_of", "output_names", "seeded_inputs",
           "weights_in_files"]

#: The ``ov.Model`` each ONNX import was read into, cloned for every caller.
_READ: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class FileTensor:
    """A weight's raw bytes in a file: ``path``, byte ``offset``, numpy ``dtype`` and ``shape``."""

    path: Path
    offset: int
    dtype: np.dtype
    shape: tuple[int, ...]


def is_openvino_import(imported: Any) -> bool:
    """Whether ``imported`` came from the OpenVINO importer (an IR or ``ov.Model``)."""
    return hasattr(imported, "op_index")


def openvino_model_of(imported: Any) -> Any:
    """A fresh ``openvino.Model`` of the import, safe to annotate and compile: a clone of an
    imported IR, or the ONNX model read by OpenVINO's frontend; its inputs at the shapes the import planned with."""
    if is_openvino_import(imported):
        return _at_planned_shapes(imported.model.clone(), imported)
    if imported not in _READ:
        from onnx_sched.bench.inputs import import_label
        from onnx_sched.errors import ModelLoadError

        try:
            _READ[imported] = _at_planned_shapes(_read_onnx_import(imported), imported)
        except ModelLoadError as exc:  # OpenVINO read bytes: name the file, as every other refusal does
            raise ModelLoadError(f"{import_label(imported)}: {exc}") from None
    return _READ[imported].clone()


def _read_onnx_import(imported: Any) -> Any:
    """The ONNX import read by OpenVINO's frontend, its weights mapped from their files where they are there."""
    from onnx_sched.errors import ModelLoadError
    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    found = weights_in_files(imported)
    if found:
        from onnx_sched.importers.onnx_weights import with_dense_weights
        from onnx_sched.onnx_structure import weights_as_inputs

        # OpenVINO reads no sparse initializer: dense ones, and the weights in files as inputs bound to them below
        structure = weights_as_inputs(with_dense_weights(imported.model), lambda t: t.name in found)
        try:
            return _constants_from_files(read_onnx_into_openvino(structure), found)
        except (ModelLoadError, RuntimeError):  # a converter that needs one of them as a constant: hand them over
            pass
    return read_onnx_into_openvino(with_weights(imported))


def _at_planned_shapes(ov_model: Any, imported: Any) -> Any:
    """``ov_model`` with its dynamic inputs at the shapes the import was planned with (``--dim``,
    ``--input-shape``), which every run feeds anyway: OpenVINO's HETERO cannot create an infer request for a
    split whose tensors between sub-models stay dynamic (a dynamic-quantized transformer with ``--dim b=2 --dim
    s=10``).  A model OpenVINO cannot reshape stays as it was read."""
    from onnx_sched.bench.inputs import planned_input_shapes

    planned = planned_input_shapes(imported)
    new = {}
    for port in ov_model.inputs:
        shape = next((planned[n] for n in port.get_names() if n in planned), None)
        if shape is not None and port.get_partial_shape().is_dynamic:
            new[port] = list(shape)
    if new:
        try:
            ov_model.reshape(new)
        except RuntimeError:
            pass
    return ov_model


def weights_in_files(imported: Any) -> dict[str, FileTensor]:
    """Where each large weight of an ONNX import read from a file lies, for numpy to map it: in that file
    (:func:`~onnx_sched.bench.file_weights.file_weights`: held inline, its bytes there the model's own) or in a
    data file inside the model's folder.  Empty for a model given in memory; a weight of a type numpy cannot
    hold as it is, or with external data that does not fit its file, is left out."""
    from onnx import helper

    from onnx_sched.bench.file_weights import file_weights
    from onnx_sched.importers.onnx_file import external_data_place
    from onnx_sched.onnx_structure import NUMPY_TYPES, is_large

    weights = file_weights(imported, runtime="openvino")
    if weights is None:
        return {}
    folder = weights.path.parent
    found: dict[str, FileTensor] = {}
    for t in imported.model.graph.initializer:
        dtype = helper.tensor_dtype_to_np_dtype(t.data_type) if t.data_type in NUMPY_TYPES else None
        if dtype is None or not is_large(t):
            continue
        shape, nbytes = tuple(int(d) for d in t.dims), int(np.prod(t.dims, dtype=np.int64)) * dtype.itemsize
        if t.data_location == onnx.TensorProto.EXTERNAL:
            try:
                path, offset, length = external_data_place(t, folder)
            except ValueError:  # onnx's reader says what is wrong, where the weights are read in
                continue
            if length in (None, nbytes) and 0 <= offset and offset + nbytes <= path.stat().st_size:
                found[t.name] = FileTensor(path, offset, dtype, shape)
        elif t.name in weights.spans and weights.spans[t.name][1] == nbytes:
            found[t.name] = FileTensor(weights.path, weights.spans[t.name][0], dtype, shape)
    return found


def _constants_from_files(ov_model: Any, found: Mapping[str, FileTensor]) -> Any:
    """``ov_model`` with each parameter named in ``found`` replaced by a constant over its bytes in their file
    (a copy-on-write map, never written: the pages stay the file's).  A parameter is found by any of its names:
    OpenVINO before 2025.4 folds an ``Identity`` of an input into the input, which then bears the ``Identity``'s
    name and keeps the input's among its tensor names."""
    import openvino as ov

    files: dict[Path, np.ndarray] = {}
    for param in list(ov_model.get_parameters()):
        names = {param.get_friendly_name(), *param.output(0).get_names()}
        name = next((n for n in sorted(names) if n in found), None)
        if name is None:
            continue
        where = found[name]
        if where.path not in files:
            files[where.path] = np.memmap(where.path, dtype=np.uint8, mode="c")
        nbytes = int(np.prod(where.shape, dtype=np.int64)) * where.dtype.itemsize
        value = files[where.path][where.offset:where.offset + nbytes].view(where.dtype).reshape(where.shape)
        constant = ov.op.Constant(value, shared_memory=True)
        constant.set_friendly_name(name)
        constant.output(0).get_tensor().set_names(set(param.output(0).get_names()) | {name})
        for target in list(param.output(0).get_target_inputs()):
            reader = target.get_node()
            if reader.get_type_name() == "Identity":  # the frontend folds an Identity of a constant: so do we
                constant.output(0).get_tensor().add_names(reader.output(0).get_names())
                reader.output(0).replace(constant.output(0))
            else:
                target.replace_source_output(constant.output(0))
        ov_model.remove_parameter(param)
    ov_model.validate_nodes_and_infer_types()
    return ov_model


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
