"""Reading an ONNX file for the importer: the model with one-line errors, its structure without its weights, or its
weights left in the file and referred to; and onnx's checker on it, with its message made one line of the right kind.

Apart from :mod:`onnx_sched.importers.onnx`, which turns the model read into a graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx

from onnx_sched.errors import ModelLoadError, OnnxSchedError, UnknownOpError, first_line
from onnx_sched.importers.onnx_topology import topology_problem
from onnx_sched.onnx_structure import structure_only

__all__ = ["check_data_files", "check_model_file", "external_data_place", "is_utf8_path", "load_model",
           "load_model_by_reference", "load_model_without_initializers"]


def load_model(path: str | os.PathLike) -> onnx.ModelProto:
    """Load an ONNX file without its external weight data, with one-line errors."""
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file")
    if p.is_dir():
        raise ModelLoadError(f"{p}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelLoadError(f"{p}: not a readable ONNX model ({type(exc).__name__}: {first_line(exc)})") from None
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"{p}: not an ONNX model (empty graph)")
    return model


def load_model_without_initializers(path: str | os.PathLike) -> onnx.ModelProto:
    """:func:`load_model` without the graph's initializers, whose bytes are never read (:mod:`onnx_sched.onnx_wire`):
    for reading a model's nodes and metadata (a placement written into a model) at a fraction of its size."""
    from onnx_sched.onnx_wire import without_initializers

    return _load_rewritten(Path(path), without_initializers)


def load_model_by_reference(path: str | os.PathLike) -> onnx.ModelProto:
    """:func:`load_model` with the file's large inline weights left in it: each becomes external data that points
    to its bytes in the file itself (:func:`~onnx_sched.onnx_wire.weights_by_reference`), so the model is read at
    a fraction of its size and every runtime reads the weights from the file as from a data file.  The ONNX
    exporter writes such weights inline again, from the file (:func:`onnx_sched.exporters.onnx.save_model_atomic`
    with the file as ``source_path``); ``onnx.save`` would write the references."""
    from onnx_sched.onnx_structure import LARGE_ELEMENTS
    from onnx_sched.onnx_wire import weights_by_reference

    p = Path(path)
    return _load_rewritten(p, lambda data: weights_by_reference(data, p.name, LARGE_ELEMENTS))


def _load_rewritten(p: Path, rewrite: Callable[[Any], bytes]) -> onnx.ModelProto:
    """The model that ``rewrite`` makes of the file's bytes (read through a map), with :func:`load_model`'s
    one-line errors; a file that is not plain protobuf goes to :func:`load_model`, which says what is wrong."""
    from onnx_sched.onnx_wire import mapped

    try:
        with mapped(p) as data:
            model = onnx.ModelProto.FromString(rewrite(data))
    except Exception:  # noqa: BLE001 - not plain protobuf, or gone: the full reader says what is wrong
        return load_model(p)
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"{p}: not an ONNX model (empty graph)")
    return model


def check_model_file(model: onnx.ModelProto | Path, where: str) -> None:
    """onnx.checker on a model's file, so external data resolves next to it, or on a model in memory, whose
    external initializers are then declared as inputs (:func:`~onnx_sched.onnx_structure.structure_only`): the
    checker would look for their files in the working directory.  A file that is not a readable model gets
    :func:`load_model`'s message."""
    try:
        onnx.checker.check_model(str(model) if isinstance(model, Path) else structure_only(model, max_elements=None))
    except Exception as exc:  # noqa: BLE001 - the checker raises other errors too on corrupt protos
        # a file that does not parse gets the reader's message; one that does is read once for the checker's
        raise _check_error(exc, where, load_model(model) if isinstance(model, Path) else model) from None


def check_data_files(model: onnx.ModelProto, path: Path) -> None:
    """What ``onnx.checker`` checks of a file's external data when it reads the file (a checker given the model in
    memory cannot): every initializer's data file lies in the model's folder and is a file; and, beyond it, that
    the bytes named lie inside that file."""
    folder = path.resolve().parent
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            try:
                external_data_place(t, folder)
            except ValueError as exc:
                raise ModelLoadError(f"{path}: invalid ONNX model: {exc}") from None


def external_data_place(tensor: onnx.TensorProto, folder: Path) -> tuple[Path, int, int | None]:
    """``(file, offset, length or None)`` of an external initializer's data, relative to the model's resolved
    ``folder``; ``ValueError`` saying what is wrong when the file is not a file inside ``folder``, the offset or
    length is not a number, or the bytes named run past the file's end."""
    info = {e.key: e.value for e in tensor.external_data}
    data = (folder / info.get("location", "")).resolve()
    if not data.is_relative_to(folder) or not data.is_file():
        raise ValueError(f"the data of initializer {tensor.name!r} should be in {info.get('location', '')!r} beside "
                         "the model, which is not a file there")
    try:
        offset, length = int(info.get("offset", 0)), (int(info["length"]) if "length" in info else None)
    except ValueError:
        raise ValueError(f"initializer {tensor.name!r} has external data at offset {info.get('offset')!r}, length "
                         f"{info.get('length')!r}") from None
    end, size = offset + (length or 0), data.stat().st_size
    if end > size:
        raise ValueError(f"the data of initializer {tensor.name!r} ends at byte {end} of {info.get('location')!r}, "
                         f"which has {size}")
    return data, offset, length


def _check_error(exc: Exception, where: str, model: onnx.ModelProto) -> OnnxSchedError:
    """The checker's failure ``exc`` on ``model`` as one line of the right kind."""
    msg = first_line(exc)
    if isinstance(exc, onnx.checker.ValidationError):
        if "No Op registered" in str(exc) or "No opset import" in str(exc):
            return UnknownOpError(f"{where}: unknown operator: {msg}")
        if "topologically sorted" in str(exc):
            return ModelLoadError(f"{where}: {topology_problem(model.graph) or msg}")
    return ModelLoadError(f"{where}: invalid ONNX model: {msg}")


def is_utf8_path(path: str | os.PathLike) -> bool:
    """Whether ``path`` can be handed to onnx's C++ functions (a name with undecodable bytes cannot)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ------------------------------------------------------------------- shapes
