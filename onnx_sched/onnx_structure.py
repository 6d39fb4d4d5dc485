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

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

__all__ = ["LARGE_ELEMENTS", "NUMPY_TYPES", "STRING_ELEMENT_BYTES", "annotate_shapes", "copy_except", "dtype_name",
           "infer_shapes", "is_large", "structure_only", "tensor_nbytes", "weights_as_inputs"]

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


_SUB_BYTE_BITS = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2, "FLOAT6E2M3": 6, "FLOAT6E3M2": 6}


#: Bytes a string tensor's buffer holds per element: ONNX Runtime stores ``std::string`` objects (32 bytes in 64-bit
#: libstdc++ and MSVC); characters beyond the 15 kept inside the object are separate heap blocks the model cannot see.
STRING_ELEMENT_BYTES = 32


@functools.lru_cache(maxsize=None)
def _element_bits(elem_type: int) -> int | None:
    """Bits per element (sub-byte types are packed: INT4 is 4, not numpy's 8; a string is its ``std::string`` object,
    :data:`STRING_ELEMENT_BYTES`); ``None`` when not fixed."""
    if elem_type == onnx.TensorProto.STRING:
        return 8 * STRING_ELEMENT_BYTES
    if elem_type == onnx.TensorProto.UNDEFINED:
        return None
    name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else ""
    if name in _SUB_BYTE_BITS:
        return _SUB_BYTE_BITS[name]
    try:
        return 8 * int(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize)
    except Exception:  # noqa: BLE001 - types numpy cannot hold
        return None


def tensor_nbytes(elem_type: int, shape: tuple[int, ...]) -> int | None:
    """Bytes of a dense tensor, sub-byte types packed at their bit width and rounded up to a byte.

    >>> tensor_nbytes(onnx.TensorProto.FLOAT, (2, 3)), tensor_nbytes(onnx.TensorProto.INT4, (5,))
    (24, 3)
    >>> tensor_nbytes(onnx.TensorProto.STRING, (4,))  # the string objects; long strings' characters not included
    128
    """
    bits = _element_bits(elem_type)
    return None if bits is None else -(-int(math.prod(shape)) * bits // 8)


def dtype_name(elem_type: int) -> str:
    """The lower-case name of an ONNX element type, as a :class:`~onnx_sched.graph.Graph` keeps it.

    >>> dtype_name(onnx.TensorProto.FLOAT16), dtype_name(0)
    ('float16', 'unknown')
    """
    return helper.tensor_dtype_to_string(elem_type).replace("TensorProto.", "").lower() if elem_type else "unknown"


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
