"""An ONNX model's structure without its large weights, for the work on it that reads types and shapes only.

onnx's shape inference and its checker take a ``ModelProto`` through C++ as bytes: a 440 MB model is
serialized, copied and parsed back although no large weight's values matter to them -- only the small
constants a ``Reshape``, ``Slice`` or ``Expand`` reads do.  :func:`structure_only` is the model with every
initializer with more than :data:`LARGE_ELEMENTS` elements, and every one whose data lives in external
files, declared as a typed graph input instead, built without copying those weights; :func:`infer_shapes`
runs onnx's shape inference on it, and :func:`annotate_shapes` writes what it finds into the model itself.
Used by the importer (its shape engines and, for a model given in memory, the checker), the split
executor, ONNX Runtime's optimized graph and the torch part-runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx
from onnx import helper

__all__ = ["LARGE_ELEMENTS", "NUMPY_TYPES", "annotate_shapes", "copy_except", "infer_shapes", "is_large",
           "structure_only", "weights_as_inputs"]

#: Initializers with more elements than this are weights to every shape rule: no op reads a shape, an axis
#: list or an index vector this long.
LARGE_ELEMENTS = 4096

#: ONNX element types whose raw bytes numpy holds as they are (little-endian, one value per element): weights that
#: can be handed to a runtime as an array, or mapped from a file.
NUMPY_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
    onnx.TensorProto.BOOL,
})


def is_large(tensor: onnx.TensorProto, max_elements: int | None = LARGE_ELEMENTS) -> bool:
    """Whether ``tensor``'s values stay out of :func:`structure_only`: external data, or over ``max_elements``
    (``None``: external data only)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return True
    return max_elements is not None and math.prod(tensor.dims) > max_elements


def copy_except(src: Any, dst: Any, *skip: str) -> None:
    """Every set field of protobuf message ``src`` but those named in ``skip`` into the empty message ``dst`` of the
    same type: a copy that leaves out what would be copied only to be replaced (a graph's weights, its nodes)."""
    for field, value in src.ListFields():
        if field.name in skip:
            continue
        if _repeated(field):
            getattr(dst, field.name).extend(value)
        elif field.message_type is not None:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


def _repeated(field: Any) -> bool:
    """Whether a protobuf field is repeated: ``is_repeated`` in recent protobuf, which deprecates ``label``."""
    repeated = getattr(field, "is_repeated", None)
    return field.label == field.LABEL_REPEATED if repeated is None else bool(repeated)


def structure_only(model: onnx.ModelProto, max_elements: int | None = LARGE_ELEMENTS) -> onnx.ModelProto:
    """``model`` with its large initializers (:func:`is_large`) and its sparse ones as typed graph inputs of the
    same name, type and shape (onnx's shape inference types a sparse initializer as no op's input accepts); the
    other initializers, nodes, value infos, opsets and functions as they are.  ``model`` itself when it has no
    large or sparse initializer.

    >>> import numpy as np
    >>> from onnx import numpy_helper
    >>> w = numpy_helper.from_array(np.zeros((256, 256), np.float32), "w")
    >>> s = numpy_helper.from_array(np.array([1, -1], np.int64), "s")
    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [256, 256])
    >>> y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    >>> nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Reshape", ["m", "s"], ["y"])]
    >>> model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w, s]))
    >>> light = structure_only(model)
    >>> [t.name for t in light.graph.initializer], [i.name for i in light.graph.input]
    (['s'], ['x', 'w'])
    """
    return weights_as_inputs(model, lambda t: is_large(t, max_elements))


def weights_as_inputs(model: onnx.ModelProto, chosen: Callable[[onnx.TensorProto], bool]) -> onnx.ModelProto:
    """``model`` with the initializers ``chosen`` picks, and its sparse ones, as typed graph inputs of the same name,
    type and shape (once: IR < 4 lists initializers as inputs already); the rest as it is, without copying the
    initializers kept.  ``model`` itself when nothing is picked and no initializer is sparse."""
    graph = model.graph
    if not any(chosen(t) for t in graph.initializer) and not graph.sparse_initializer:
        return model
    light = onnx.ModelProto()
    copy_except(model, light, "graph")
    copy_except(graph, light.graph, "initializer", "sparse_initializer")
    declared = {i.name for i in graph.input}
    for tensor in graph.initializer:
        if not chosen(tensor):
            light.graph.initializer.append(tensor)
        elif tensor.name not in declared:
            light.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    light.graph.input.extend(helper.make_tensor_value_info(t.values.name, t.values.data_type, list(t.dims))
                             for t in graph.sparse_initializer if t.values.name not in declared)
    return light


def infer_shapes(model: onnx.ModelProto, **kwargs: Any) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes`` (same ``kwargs``) of :func:`structure_only` ``(model)``: the same
    value infos as of ``model`` itself, at a fraction of the time and memory for a model with its weights.  The
    result's large initializers are graph inputs."""
    return onnx.shape_inference.infer_shapes(structure_only(model), **kwargs)


def annotate_shapes(model: onnx.ModelProto, **kwargs: Any) -> None:
    """Write :func:`infer_shapes`' findings (same ``kwargs``) into ``model`` itself: its value infos and output
    types, and its nodes when some hold subgraphs (whose bodies carry their own value infos); inputs and weights
    stay as they are, so nothing large is copied."""
    inferred = infer_shapes(model, **kwargs).graph
    graph = model.graph
    subgraphs = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                    for node in graph.node for a in node.attribute)
    for name in ("value_info", "output", *(("node",) if subgraphs else ())):
        field = getattr(graph, name)
        del field[:]
        field.extend(getattr(inferred, name))
