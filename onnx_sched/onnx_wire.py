"""An ONNX file read as protobuf wire format: where its weights' bytes are, and its messages without them.

Parsing a 440 MB model to learn where its initializers' bytes lie, or to read its nodes' metadata, costs
the whole model in memory twice over.  The protobuf wire format says where every field starts and ends, so a
walk over the file's bytes (an ``mmap``) finds each initializer's ``raw_data`` (:func:`initializer_spans`,
for ONNX Runtime to read the weights from the file) and copies out the model without its initializers
(:func:`without_initializers`), never touching the weights' bytes.

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
import mmap
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["file_uses_external_data", "initializer_spans", "length_delimited", "mapped", "uses_external_data",
           "without_initializers"]

# field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.name / raw_data /
# external_data / data_location
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_NAME, _TENSOR_RAW_DATA = 7, 5, 8, 9
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
    out = bytearray()
    for number, wire, head, a, z in _fields(data, 0, len(data)):
        if number != _MODEL_GRAPH or wire != 2:
            out += data[head:z]
            continue
        graph = bytearray()
        for g, gwire, ghead, _, gz in _fields(data, a, z):
            if g != _GRAPH_INITIALIZER:
                graph += data[ghead:gz]
        out += data[head:head + 1] + _encode_varint(len(graph)) + graph  # ModelProto.graph's tag is one byte
    return bytes(out)
