"""Element type and static shape of every tensor of an ONNX model, from a chain of inference engines.

onnx's shape inference first, then ONNX Runtime's symbolic shape inference, then OpenVINO's ONNX
frontend, each only for what the ones before left unknown; then OpenVINO's upper bounds for
data-dependent shapes (:mod:`onnx_sched.importers.bounded_shapes`), the shapes two ONNX Runtime
runs agree on for contrib ops no engine infers and the ops that read them
(:mod:`onnx_sched.importers.observed_shapes`), and last the shapes an op's definition fixes where
every engine leaves them out (``Dropout``'s mask).  ``sources`` counts what each engine gave
(``onnx-sched inspect`` shows it).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnx_sched.importers.bounded_shapes import upper_bound_shape
from onnx_sched.importers.observed_shapes import observed_shapes
from onnx_sched.onnx_structure import infer_shapes, structure_only

__all__ = ["infer_types", "propagate_types"]

TensorType = tuple[int, "tuple[int, ...] | None"]


def infer_types(model: onnx.ModelProto, path: Path | None = None,
                changed: bool = False) -> tuple[dict[str, TensorType], dict[str, int]]:
    """``(types, sources)``: ``types[name] = (elem_type, shape or None)`` for the graph's inputs, outputs
    and node outputs.  ``path``: the file ``model`` was read from, which OpenVINO reads itself, or, when
    ``model`` was ``changed`` since (inputs pinned), where the external data of its copy is found."""
    g = model.graph
    types = _collect_types(model)
    sources: dict[str, int] = {}
    after_custom = _after_custom_ops(g)
    needed = [o for n in g.node for o in n.output if o] + [i.name for i in g.input]

    def missing() -> list[str]:
        return [t for t in needed if t not in types or types[t][1] is None]

    openvino_shapes = functools.cache(lambda: _infer_openvino(model, path, changed))
    for engine, infer in (
        ("onnx", lambda: _infer_onnx(model)),
        ("ort-symbolic", lambda: _infer_ort_symbolic(model)),
        ("openvino", lambda: openvino_shapes()[0]),
        ("openvino-upper-bound", lambda: openvino_shapes()[1]),
        ("ort-run", lambda: observed_shapes(model, [t for t in missing() if t in after_custom],
                                            path.parent if path is not None else None)),
    ):
        if not missing():
            break
        found = infer()
        got = 0
        for name in missing():
            if name in found and found[name][1] is not None:
                types[name] = found[name]
                got += 1
        sources[engine] = got
    if missing() and any(got for engine, got in sources.items() if engine != "onnx"):
        downstream = propagate_types(model, types)
        if downstream:
            sources["onnx-downstream"] = downstream
    _fill_known_rules(g, types, opset=_default_opset(model))
    return types, sources


def propagate_types(model: onnx.ModelProto, types: dict[str, TensorType], rounds: int = 3) -> int:
    """Give onnx's shape inference ``types`` (what every engine, or a control-flow body, found) as the model's value
    infos and keep what it then infers for the tensors still unknown: an op downstream of a shape only a later
    engine found (a ``Loop`` output OpenVINO sized) is sized too.  Updates ``types``; returns how many it sized.

    >>> from onnx import TensorProto as T, helper as h
    >>> nodes = [h.make_node("Custom", ["x"], ["a"], domain="x.y"), h.make_node("Relu", ["a"], ["b"])]
    >>> g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2])], [])
    >>> m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("x.y", 1)])
    >>> types = {"x": (T.FLOAT, (2,)), "a": (T.FLOAT, (4,))}
    >>> propagate_types(m, types), types["b"]
    (1, (1, (4,)))
    """
    g = model.graph
    made = [o for n in g.node for o in n.output if o]
    sized = 0
    for _ in range(rounds):
        unknown = [t for t in made if t not in types or types[t][1] is None]
        if not unknown:
            break
        found = _infer_onnx(_with_types(model, types))
        got = [t for t in unknown if t in found and found[t][1] is not None]
        for name in got:
            types[name] = found[name]
        sized += len(got)
        if not got:
            break
    return sized


def _with_types(model: onnx.ModelProto, types: dict[str, TensorType]) -> onnx.ModelProto:
    """A weightless copy of ``model`` (:func:`structure_only`) whose node outputs of known type are declared: graph
    outputs typed, the others as value infos."""
    light = structure_only(model)
    g = light.graph
    outputs = {o.name for o in g.output}
    known = {o: types[o] for n in g.node for o in n.output if o and o in types and types[o][1] is not None}
    graph = onnx.helper.make_graph(
        list(g.node), g.name, list(g.input),
        [onnx.helper.make_tensor_value_info(o.name, *known[o.name]) if o.name in known else o for o in g.output],
        list(g.initializer),
        value_info=[onnx.helper.make_tensor_value_info(name, elem, list(shape)) for name, (elem, shape)
                    in known.items() if name not in outputs],
        sparse_initializer=list(g.sparse_initializer))
    copy = onnx.helper.make_model(graph, opset_imports=list(light.opset_import), functions=list(light.functions))
    copy.ir_version = light.ir_version
    return copy


def _after_custom_ops(g: onnx.GraphProto) -> set[str]:
    """The outputs of ops outside the standard domains (``com.microsoft``'s contrib ops, custom ops) and of the ops
    that read them, transitively: the tensors whose shapes may be unknown only because no engine knows such an op,
    which a run may observe.  A standard op's unknown shape is data-dependent (an index read at run time): a run
    would show one input's size, not a bound, so those stay with the bounds."""
    found: set[str] = set()
    for node in g.node:
        if node.domain not in ("", "ai.onnx") or any(x in found for x in node.input):
            found.update(o for o in node.output if o)
    return found


def _shape_of(t: onnx.TypeProto) -> tuple[int, ...] | None:
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out = []
    for d in t.tensor_type.shape.dim:
        if not d.HasField("dim_value") or d.dim_value < 0:
            return None
        out.append(int(d.dim_value))
    return tuple(out)


def _collect_types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int, ...] | None]]:
    g = model.graph
    out: dict[str, tuple[int, tuple[int, ...] | None]] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type"):
            prev = out.get(vi.name)
            shape = _shape_of(vi.type)
            if prev is None or (prev[1] is None and shape is not None):
                out[vi.name] = (vi.type.tensor_type.elem_type, shape)
    for init in g.initializer:
        out[init.name] = (init.data_type, tuple(int(d) for d in init.dims))
    return out


def _infer_onnx(model: onnx.ModelProto) -> dict:
    try:
        inferred = infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - fall through to the other engines
        return {}
    return _collect_types(inferred)


@functools.cache
def _symbolic_shape_inference() -> Any:
    """ONNX Runtime's ``SymbolicShapeInference``, loaded from its file, or ``None``.

    Importing it as ``onnxruntime.tools.symbolic_shape_infer`` first runs ``onnxruntime/tools/__init__.py``,
    which imports torch whenever torch is installed (1.8 s here) for helpers this module never uses; the file
    itself needs only numpy, onnx and packaging."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("onnxruntime")
        path = Path(next(iter(spec.submodule_search_locations))) / "tools" / "symbolic_shape_infer.py"
        module_spec = importlib.util.spec_from_file_location("onnx_sched._ort_symbolic_shape_infer", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return module.SymbolicShapeInference
    except Exception:  # noqa: BLE001 -- no ONNX Runtime, or a layout without the file: the other engines remain
        return None


def _infer_ort_symbolic(model: onnx.ModelProto) -> dict:
    SymbolicShapeInference = _symbolic_shape_inference()  # noqa: N806 -- ONNX Runtime's class
    if SymbolicShapeInference is None:
        return {}
    import contextlib
    import tempfile

    try:
        # it writes a scratch file into the working directory: keep that out of the user's folder
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
            inferred = SymbolicShapeInference.infer_shapes(structure_only(model), auto_merge=True,
                                                            guess_output_rank=False)
    except Exception:  # noqa: BLE001
        return {}
    return _collect_types(inferred) if inferred is not None else {}


def _infer_openvino(model: onnx.ModelProto, path: Path | None, changed: bool) -> tuple[dict, dict]:
    """``(static, upper_bound)``: OpenVINO's static output shapes, and the data-dependent ones at their
    upper bound (:mod:`onnx_sched.importers.bounded_shapes`)."""
    try:
        import openvino as ov
    except Exception:  # noqa: BLE001
        return {}, {}
    try:
        if path is not None and not changed and not model.graph.value_info:
            ov_model = ov.Core().read_model(str(path))
        else:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "m.onnx"
                onnx.save(_self_contained(model, path.parent) if path is not None else model, str(f))
                ov_model = ov.Core().read_model(str(f))
    except Exception:  # noqa: BLE001
        return {}, {}
    static: dict = {}
    bounded: dict = {}
    from onnx.helper import np_dtype_to_tensor_dtype

    for op in ov_model.get_ordered_ops():
        for o in op.outputs():
            ps = o.get_partial_shape()
            shape = upper_bound_shape(ps)
            if shape is None:
                continue
            try:
                elem = np_dtype_to_tensor_dtype(np.dtype(o.get_element_type().to_dtype()))
            except Exception:  # noqa: BLE001
                continue
            for name in o.get_names():
                (static if ps.is_static else bounded)[name] = (elem, shape)
    return static, bounded


#: External tensors up to this size are read into the copy OpenVINO infers shapes on: shape-like constants.
SMALL_EXTERNAL_BYTES = 1 << 16


def _self_contained(model: onnx.ModelProto, data_dir: Path) -> onnx.ModelProto:
    """A copy of ``model`` that needs no external data file: small external tensors (shape-like constants) are read
    in from ``data_dir``, large ones (weights, whose values no output shape depends on) become graph inputs of the
    same type and shape.  OpenVINO refuses data files outside the model's folder, so a copy saved elsewhere must not
    refer to them; reading gigabytes of weights only to infer shapes is what the importer avoids."""
    from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

    if not any(uses_external_data(t) for t in model.graph.initializer):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept, inputs = [], []
    for t in copy.graph.initializer:
        if not uses_external_data(t):
            kept.append(t)
            continue
        size = int(np.prod(t.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        if size <= SMALL_EXTERNAL_BYTES:
            load_external_data_for_tensor(t, str(data_dir))
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
            kept.append(t)
        else:
            inputs.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    listed = {i.name for i in copy.graph.input}
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    copy.graph.input.extend(i for i in inputs if i.name not in listed)
    return copy


def _default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _fill_known_rules(g: onnx.GraphProto, types: dict, opset: int) -> None:
    """Shapes that inference engines leave out but the op's definition fixes,
    e.g. the mask of ``Dropout`` (same shape as its input; bool from opset 10)."""
    for node in g.node:
        if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
            mask, src = node.output[1], node.input[0]
            if (mask not in types or types[mask][1] is None) and src in types and types[src][1] is not None:
                elem = onnx.TensorProto.BOOL if opset >= 10 else types[src][0]
                types[mask] = (elem, types[src][1])
