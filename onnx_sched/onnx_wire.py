"""An ONNX file read as protobuf wire format: where its weights' bytes are, and its messages without them.

Parsing a 440 MB model to learn where its initializers' bytes lie, or to read its nodes' metadata, costs
the whole model in memory twice over.  The protobuf wire format says where every field starts and ends, so a
walk over the file's bytes (an ``mmap``) finds each initializer's ``raw_data`` (:func:`initializer_spans`,
for ONNX Runtime to read the weights from the file), copies out the model without its initializers
(:func:`without_initializers`) or with each large one an external-data reference to its bytes in the file
(:func:`weights_by_reference`), never touching the weights' bytes.

>>> import numpy as np, onnx
>>> from onnx import helper, numpy_helper
>>> w = numpy_helper.from_array(np.arange(6, dtype=np.float32), "w")
>>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [6])
>>> model = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [x], [w]))
>>> data = model.SerializeToString()
>>> off, n = initializer_spans(data)["w"]
>>> np.frombuffer(data[off:off + n], np.float32).tolist()
[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
>>> light = onnx.ModelProto.FromString(without_initializers(data))
>>> len(light.graph.initializer), light.graph.node[0].op_type, uses_external_data(data)
(0, 'Add', False)
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["file_uses_external_data", "initializer_spans", "length_delimited", "mapped", "uses_external_data",
           "weights_by_reference", "without_initializers"]

# field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.name / raw_data / dims /
# external_data / data_location
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_NAME, _TENSOR_RAW_DATA, _TENSOR_DIMS = 7, 5, 8, 9, 1
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14


def _varint(data: Any, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(data: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(field number, wire type, tag start, payload start, end)`` of each field of the message in
    ``data[start:end]`` (``ValueError`` where it is not protobuf)."""
    i = start
    while i < end:
        head = i
        tag, i = _varint(data, i)
        wire = tag & 7
        if wire == 0:
            _, stop = _varint(data, i)
        elif wire == 1:
            stop = i + 8
        elif wire == 5:
            stop = i + 4
        elif wire == 2:
            n, i = _varint(data, i)
            stop = i + n
        else:
            raise ValueError(f"wire type {wire} at byte {head}")
        if stop > end:
            raise ValueError(f"a field at byte {head} runs past byte {end}")
        yield tag >> 3, wire, head, i, stop
        i = stop


def length_delimited(data: Any, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """``(field number, start, end)`` of each length-delimited field (a message, bytes, a string) of the message
    in ``data[start:end]``."""
    for number, wire, _, a, z in _fields(data, start, end):
        if wire == 2:
            yield number, a, z


def _initializers(data: Any) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each graph initializer (a ``TensorProto``) of the serialized model ``data``, in every
    piece of a graph written in several."""
    for f, a, z in length_delimited(data, 0, len(data)):
        if f == _MODEL_GRAPH:
            yield from ((b, y) for g, b, y in length_delimited(data, a, z) if g == _GRAPH_INITIALIZER)


def initializer_spans(data: Any) -> dict[str, tuple[int, int]]:
    """Initializer name -> ``(offset, length)`` of its ``raw_data`` in the serialized model ``data`` (a field set
    twice: its last value, as protobuf reads it; a graph written in several pieces: all of them)."""
    spans: dict[str, tuple[int, int]] = {}
    for b, y in _initializers(data):
        name, raw = None, None
        for h, c, x in length_delimited(data, b, y):
            if h == _TENSOR_NAME:
                name = bytes(data[c:x]).decode("utf-8", "replace")
            elif h == _TENSOR_RAW_DATA:
                raw = (c, x - c)
        if name is not None and raw is not None:
            spans[name] = raw
    return spans


def uses_external_data(data: Any) -> bool:
    """Whether an initializer of the serialized model ``data`` keeps its bytes in an external data file (its
    ``data_location`` EXTERNAL, or an ``external_data`` entry)."""
    return any(number == _TENSOR_EXTERNAL_DATA or (number == _TENSOR_DATA_LOCATION and wire == 0
                                                   and _varint(data, c)[0] == 1)
               for b, y in _initializers(data) for number, wire, _, c, _ in _fields(data, b, y))


@contextlib.contextmanager
def mapped(path: str | os.PathLike) -> Iterator[mmap.mmap]:
    """The bytes of the file ``path``, mapped read-only for the walks of this module (``ValueError`` for an empty
    file, ``OSError`` for one that cannot be opened)."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield data


def file_uses_external_data(path: str | os.PathLike) -> bool:
    """:func:`uses_external_data` of the model file ``path``, read through an mmap; ``False`` for a file that is
    empty or not protobuf (the reader that loads it says what is wrong)."""
    try:
        with mapped(path) as data:
            return uses_external_data(data)
    except (OSError, ValueError, IndexError):
        return False


def without_initializers(data: Any) -> bytes:
    """The serialized model ``data`` without its graph's initializers (its nodes, inputs, outputs, metadata and
    everything else as they are): what reading a model's structure needs, at a fraction of its size."""
    return _with_initializers(data, lambda start, end: b"")


def _with_initializers(data: Any, initializer: Callable[[int, int], bytes]) -> bytes:
    """The serialized model ``data`` with each graph initializer field replaced by ``initializer(start, end)`` of
    its ``TensorProto``'s bytes (the whole field, tag included, or nothing); every other field as it is."""
    out = bytearray()
    for number, wire, head, a, z in _fields(data, 0, len(data)):
        if number != _MODEL_GRAPH or wire != 2:
            out += data[head:z]
            continue
        graph = bytearray()
        for g, _, ghead, b, y in _fields(data, a, z):
            graph += initializer(b, y) if g == _GRAPH_INITIALIZER else data[ghead:y]
        out += data[head:head + 1] + _encode_varint(len(graph)) + graph  # ModelProto.graph's tag is one byte
    return bytes(out)


def weights_by_reference(data: Any, location: str, max_elements: int) -> bytes:
    """The serialized model ``data`` with each graph initializer of more than ``max_elements`` elements held in
    ``raw_data`` given as external data at ``(location, offset, length)`` of those bytes in ``data`` -- the file it was
    read from, named ``location`` in its folder -- instead of holding them: a model that reads its weights from
    its own file, as a model saved with external data reads them from its data file.

    >>> import numpy as np, onnx
    >>> from onnx import helper, numpy_helper
    >>> w = numpy_helper.from_array(np.arange(6, dtype=np.float32), "w")
    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [6])
    >>> model = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [x], [w]))
    >>> data = model.SerializeToString()
    >>> light = onnx.ModelProto.FromString(weights_by_reference(data, "model.onnx", 4))
    >>> t = light.graph.initializer[0]
    >>> t.raw_data, {e.key: e.value for e in t.external_data} == {
    ...     "location": "model.onnx", "offset": str(initializer_spans(data)["w"][0]), "length": "24"}
    (b'', True)
    """
    return _with_initializers(data, lambda start, end: _by_reference(data, start, end, location, max_elements))


def _by_reference(data: Any, start: int, end: int, location: str, max_elements: int) -> bytes:
    """The initializer field (tag, length, ``TensorProto``) of ``data[start:end]``: as it is, or, when it has more
    than ``max_elements`` elements in ``raw_data`` and no external data yet, without ``raw_data`` and with an
    external-data reference to those bytes."""
    fields = list(_fields(data, start, end))
    raw = [(a, z) for number, wire, _, a, z in fields if number == _TENSOR_RAW_DATA and wire == 2]
    external = any(number in (_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION) for number, *_ in fields)
    if not raw or external or math.prod(_dims(data, fields)) <= max_elements:
        tensor = bytes(data[start:end])
    else:
        a, z = raw[-1]
        tensor = b"".join(bytes(data[head:stop]) for number, _, head, _, stop in fields if number != _TENSOR_RAW_DATA)
        for key, value in (("location", location), ("offset", str(a)), ("length", str(z - a))):
            entry = _field(1, key.encode()) + _field(2, value.encode())  # StringStringEntryProto: key 1, value 2
            tensor += _field(_TENSOR_EXTERNAL_DATA, entry)
        tensor += _encode_varint(_TENSOR_DATA_LOCATION << 3) + _encode_varint(1)  # EXTERNAL
    return _field(_GRAPH_INITIALIZER, tensor)


def _dims(data: Any, fields: list[tuple[int, int, int, int, int]]) -> list[int]:
    """``TensorProto.dims`` (field 1, int64, packed or not) from the fields of a tensor."""
    dims: list[int] = []
    for number, wire, _, i, z in fields:
        while number == _TENSOR_DIMS and wire in (0, 2) and i < z:  # one varint, or a packed run of them
            value, i = _varint(data, i)
            dims.append(value)
    return dims


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload
