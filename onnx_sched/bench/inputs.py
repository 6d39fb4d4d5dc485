"""Seeded inputs for a model: what ``bench``, the split executor and the measured target feed it.

Its own module so that the runtimes (``ort_graph``, ``split_executor``) can draw inputs without
importing :mod:`onnx_sched.bench.measure`, which imports them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.bench.runtimes.openvino_model import ir_input_specs, is_ir
from onnx_sched.errors import ModelLoadError, OnnxSchedError

__all__ = ["import_feed", "import_label", "load_model_header", "planned_input_shapes", "random_inputs"]


def load_model_header(path: str | os.PathLike[str]) -> Any:
    """An ONNX file's graph without its weights' bytes (its large inline weights referred to in the file,
    :func:`~onnx_sched.importers.onnx_file.load_model_by_reference`), with a one-line error."""
    from onnx_sched.importers.onnx_file import load_model_by_reference

    p = Path(path)
    if not p.is_file():
        raise ModelLoadError(f"model file not found: {p}")
    try:
        return load_model_by_reference(p)
    except ModelLoadError as exc:
        raise ModelLoadError(f"cannot read ONNX model {p}: {str(exc).removeprefix(f'{p}: ')}") from exc


#: One model input: name, numpy dtype (None: none), dims (int, symbolic name or None), type name.
_InputSpec = tuple[str, "np.dtype[Any] | None", list["int | str | None"], str]


def _random_words(rng: np.random.Generator, shape: list[int]) -> np.ndarray:
    """Lower-case words of 1-8 letters, as a fixed-width unicode array (saved without pickling; ONNX Runtime takes
    it for a string input)."""
    count = int(np.prod(shape, dtype=np.int64))
    letters = rng.integers(ord("a"), ord("z") + 1, size=(count, 8)).astype(np.uint32)
    lengths = rng.integers(1, 9, size=count)
    words = ["".join(map(chr, row[:k])) for row, k in zip(letters, lengths)]
    return np.array(words, dtype="<U8").reshape(shape)


def _onnx_input_specs(model: Any) -> list[_InputSpec]:
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    from onnx_sched.importers.onnx import initializer_names

    inits = initializer_names(model.graph)  # sparse ones too: an input that has one is not fed
    specs: list[_InputSpec] = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise OnnxSchedError(f"input {vi.name!r} is not a tensor; bench supports tensor inputs only")
        tt = vi.type.tensor_type
        dims: list[int | str | None] = [int(d.dim_value) if d.HasField("dim_value") else d.dim_param
                                        for d in tt.shape.dim]
        type_name = onnx.TensorProto.DataType.Name(tt.elem_type)
        specs.append((vi.name, np.dtype(tensor_dtype_to_np_dtype(tt.elem_type)), dims, type_name))
    return specs


def _shape_operands(graph: Any) -> set[str]:
    """Graph inputs read as an ``Expand`` shape or ``Tile`` repeats: ones, valid whatever the data's shape (a 0
    would make Expand fail on any dimension above 1)."""
    return {n.input[1] for n in graph.node if n.op_type in ("Expand", "Tile") and n.domain in ("", "ai.onnx")
            and len(n.input) > 1}


def import_feed(imported: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for an import (ONNX or OpenVINO) at the shapes it was planned with: a ``--dim`` or
    ``--input-shape`` pin changes the graph's input shapes, not the model's declared ones, and a run
    timed or profiled for a plan must feed what the plan assumed."""
    return random_inputs(imported.model, seed, shapes=planned_input_shapes(imported))


def import_label(imported: Any) -> str:
    """How an error names an import: its file, else its graph's name."""
    return str(imported.path) if getattr(imported, "path", None) else (imported.model.graph.name or "the model")


def planned_input_shapes(imported: Any) -> dict[str, tuple[int, ...]]:
    """Each graph input's shape as the import planned with it (after ``--dim`` / ``--input-shape``), by name."""
    from onnx_sched.graph import TensorKind

    g = imported.graph
    return {g.tensor_names[t]: tuple(g.tensor_shapes[t]) for t in range(g.n_tensors)
            if g.tensor_kind[t] == TensorKind.INPUT and g.tensor_shapes[t] is not None}


def random_inputs(
    model: Any, seed: int = 0, dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """Seeded random data for every model input that is not an initializer.

    ``model`` is an ``onnx.ModelProto``, an ``openvino.Model`` or the path of an
    ONNX file or of an OpenVINO IR ``.xml``.  Floats are standard normal; integer
    inputs are 0 or 1 (valid token ids, attention masks, indices), or 1 where they are an ``Expand`` shape or
    ``Tile`` repeats; bools are
    random.  Symbolic dims take their value from ``dims`` or 1 (a dynamic IR dim
    has no name: 1); ``shapes`` gives whole input shapes (:func:`import_feed`).
    """
    if isinstance(model, (str, os.PathLike)) and not is_ir(model):
        model = load_model_header(model)
    onnx_graph = model.graph if hasattr(model, "graph") else None
    specs = _onnx_input_specs(model) if onnx_graph is not None else ir_input_specs(model)
    ones = _shape_operands(onnx_graph) if onnx_graph is not None else set()
    rng = np.random.default_rng(seed)
    values = dict(dims or {})
    feed: dict[str, np.ndarray] = {}
    for name, dtype, spec_dims, type_name in specs:
        shape = [d if isinstance(d, int) else int(values.get(d or "", 1)) for d in spec_dims]
        if shapes and name in shapes and len(shapes[name]) == len(shape):
            shape = [int(d) for d in shapes[name]]
        if dtype is None:
            arr = None
        elif dtype == np.bool_:
            arr = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            arr = np.ones(shape, dtype) if name in ones else rng.integers(0, 2, size=shape).astype(dtype)
        elif np.issubdtype(dtype, np.floating):
            arr = rng.standard_normal(size=shape).astype(dtype)
        elif type_name == "STRING":
            arr = _random_words(rng, shape)
        else:
            arr = None
        if arr is None:
            raise OnnxSchedError(f"input {name!r}: element type {type_name} not supported by bench")
        feed[name] = arr
    return feed
