"""An ONNX Runtime session of a model with its weights, without serializing the weights.

``InferenceSession(model.SerializeToString())`` costs a model's weights three times over on top of the
``ModelProto`` that holds them: the serialized bytes (which ONNX Runtime's Python session keeps for as long as
it lives), ORT's parse of those bytes, and the session's own tensors.  :func:`inference_session` serializes the
model with every large initializer (:func:`~onnx_sched.onnx_structure.is_large`, of a plain numeric type)
as a placeholder that points to external data, and hands ORT the values themselves with
``SessionOptions.add_external_initializers``; ORT copies them into its graph before any optimization, so the
session runs the same graph as one built from the bytes, and the weights exist in it once.  Better still, a
weight that the model's own file holds inline (:func:`~onnx_sched.bench.file_weights.file_weights`) is pointed
at its bytes in that file, which ORT maps: then Python makes no copy at all.  The split executor,
``bench-placement``, the measured target, ORT profiling and the per-device processes build their sessions here:
``bench-placement`` of a 417 MB BERT held 7.7 times the file at its peak before, 2.75 times after (docs/results.md, 23).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_sched.bench.file_weights import FileWeights, model_for_sessions
from onnx_sched.onnx_structure import NUMPY_TYPES, copy_except, is_large
from onnx_sched.ort_crashes import for_onnx_runtime

__all__ = ["PLACEHOLDER_LOCATION", "import_session", "inference_session", "with_placeholders"]

#: The external-data location of a placeholder: never read, ORT replaces the tensor before it would be.
PLACEHOLDER_LOCATION = "onnx_sched.in_memory"

#: How ONNX Runtime 1.22 to 1.30 fail to make a session of some parts the split executor cuts (1.31 fixed it;
#: measured with 1.22, 1.26, 1.29 and 1.30): where MatMulAddFusion turns a 3-d ``MatMul`` + ``Add`` into
#: ``Reshape -> Gemm -> Reshape``, ReshapeFusion joins the new ``Reshape`` with the one before it, and fails when that
#: one's shape is a ``Concat`` of the part's own inputs -- a transformer cut between computing a shape and using it.
_FUSION_FAILURE = "Attempting to get index by a name which does not exist"
#: Made again without it, such a part computes the same: one fusion fewer, no other change.
_WITHOUT_FAILING_FUSION = ["ReshapeFusion"]


def _held_apart(tensor: onnx.TensorProto) -> bool:
    """A weight handed to ORT as a value: large, in this model (not in an external file) and of a plain type."""
    return (is_large(tensor) and tensor.data_location != onnx.TensorProto.EXTERNAL
            and tensor.data_type in NUMPY_TYPES)


def with_placeholders(model: onnx.ModelProto, weights: FileWeights | None = None,
                      ) -> tuple[onnx.ModelProto, list[str], list[np.ndarray]]:
    """``(light, names, values)``: ``model`` with each large plain-typed initializer as a placeholder (same name,
    type and shape, its data "external" at :data:`PLACEHOLDER_LOCATION`), and those initializers' names and
    values; an initializer that ``weights`` places in its file (the file ``model`` or the model it was cut from
    was read from) points to its bytes there instead, and has no value.  ``light`` is ``model`` itself when
    there is no such initializer; ``model`` is never changed.

    >>> w = numpy_helper.from_array(np.ones((128, 64), np.float32), "w")
    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 128])
    >>> y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 64])
    >>> matmul = helper.make_node("MatMul", ["x", "w"], ["y"])
    >>> model = helper.make_model(helper.make_graph([matmul], "g", [x], [y], [w]))
    >>> light, names, values = with_placeholders(model)
    >>> names, values[0].shape, len(light.SerializeToString()) < 1000 < len(model.SerializeToString())
    (['w'], (128, 64), True)
    """
    graph = model.graph
    if not any(_held_apart(t) for t in graph.initializer):
        return model, [], []
    light = onnx.ModelProto()
    copy_except(model, light, "graph")
    copy_except(graph, light.graph, "initializer")
    names: list[str] = []
    values: list[np.ndarray] = []
    spans = weights.spans if weights is not None else {}
    for tensor in graph.initializer:
        if not _held_apart(tensor):
            light.graph.initializer.append(tensor)
            continue
        placeholder = light.graph.initializer.add()
        placeholder.name, placeholder.data_type = tensor.name, tensor.data_type
        placeholder.dims.extend(tensor.dims)
        placeholder.data_location = onnx.TensorProto.EXTERNAL
        nbytes = math.prod(tensor.dims) * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        span = spans.get(tensor.name)
        if weights is not None and span is not None and span[1] == nbytes:
            where = {"location": weights.path.name, "offset": str(span[0]), "length": str(span[1])}
        else:
            names.append(tensor.name)
            values.append(numpy_helper.to_array(tensor))
            where = {"location": PLACEHOLDER_LOCATION, "length": str(nbytes)}
        for key, val in where.items():
            entry = placeholder.external_data.add()
            entry.key, entry.value = key, val
    return light, names, values


def inference_session(model: onnx.ModelProto, options: Any, providers: Sequence[Any],
                      weights: FileWeights | None = None) -> Any:
    """``onnxruntime.InferenceSession`` of ``model`` (with its weights) under ``options`` and ``providers``, its
    large weights given to ORT as values, or read by ORT from the model's file where ``weights``
    (:func:`~onnx_sched.bench.file_weights.file_weights` of the import ``model`` comes from) places them
    (module docstring); weights in external data files stay there, read by ORT from the files beside the model
    file (``weights`` is then needed).  ``options`` takes the weights: give each session its own.  A part that an
    ONNX Runtime before 1.31 fails to fuse (:data:`_FUSION_FAILURE`) gets its session without that fusion; a
    ``Split`` with an omitted output gets it named (:func:`~onnx_sched.ort_crashes.for_onnx_runtime`)."""
    import onnxruntime as ort

    light, names, values = with_placeholders(model, weights)
    light = for_onnx_runtime(light)
    if names:
        options.add_external_initializers(names, [ort.OrtValue.ortvalue_from_numpy(v) for v in values])
    if weights is not None and any(t.data_location == onnx.TensorProto.EXTERNAL for t in light.graph.initializer):
        # the model's file and its external data files: where ORT resolves their locations
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         str(weights.path.parent))
    blob = light.SerializeToString()
    try:
        return ort.InferenceSession(blob, options, providers=list(providers))
    except Exception as error:  # ORT's own exception classes
        if _FUSION_FAILURE not in str(error):
            raise
    return ort.InferenceSession(blob, options, providers=list(providers), disabled_optimizers=_WITHOUT_FAILING_FUSION)


def import_session(imported: Any, options: Any, providers: Sequence[Any]) -> Any:
    """:func:`inference_session` of the whole model of an ONNX import: its weights read from its file and the
    data files beside it where it was read from a file (:func:`~onnx_sched.bench.file_weights.model_for_sessions`).
    This is the user's model itself, so ONNX Runtime refusing it is bad input: one line
    (:func:`~onnx_sched.bench.ort_load.ort_loads`), never a traceback."""
    from onnx_sched.bench.inputs import import_label
    from onnx_sched.bench.ort_load import ort_loads

    model, weights = model_for_sessions(imported)
    with ort_loads(import_label(imported)):
        return inference_session(model, options, providers, weights)
