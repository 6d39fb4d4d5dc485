"""OpenVINO IR (``.xml``/``.bin``) or in-memory ``ov.Model`` → :class:`~onnx_sched.graph.Graph`.

Ops are the compute nodes: everything except ``Parameter``, ``Result``,
``Constant`` and nodes computed only from constants (the corpus's
``Broadcast(0, shape)`` ``/stripped_weight`` nodes, ``Convert`` of a constant,
...).  Those constant subgraphs are folded into weight tensors sized by their
*result* (what a runtime materializes), because a schedule never decides when a
weight exists.  Tensors are op outputs sized from static shapes and element
types; ``Parameter`` outputs are graph inputs and the inputs of ``Result`` nodes
are graph outputs.  Op types are ``node.get_type_name()``.

OpenVINO is an optional dependency: importing this module works without it,
calling :func:`import_openvino` raises a clear error.

Example:
    >>> imp = import_openvino("model.xml")          # doctest: +SKIP
    >>> imp.graph.n_ops, imp.op_index[0]            # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.cost.flops import op_flops
from onnx_sched.errors import ModelLoadError, OnnxSchedError, UnknownShapeError
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.importers._assemble import assemble_graph
from onnx_sched.importers.bounded_shapes import upper_bound_shape
from onnx_sched.importers.control_flow import transient_bytes

__all__ = ["ImportedOpenVINO", "import_openvino", "is_openvino_source", "read_ir"]

# Never folded into weights even when all inputs are constant: state and randomness.
_NOT_FOLDABLE = frozenset({"ReadValue", "Assign", "RandomUniform", "Multinomial", "Parameter", "Result"})
# OpenVINO type -> ONNX-like name understood by :func:`op_flops` (shape layouts match).
_FLOP_ALIASES = {
    "Convolution": "Conv",
    "AvgPool": "AveragePool",
    "MVN": "LayerNormalization",
    "SoftMax": "Softmax",
    "NormalizeL2": "LayerNormalization",
}


@dataclass(frozen=True, eq=False)
class ImportedOpenVINO:
    """The graph plus the model it came from.

    ``op_index[i]`` is the friendly name of the OpenVINO node that is graph op ``i``
    (ops are numbered in ``model.get_ordered_ops()`` order); ``weight_nodes`` are
    the friendly names of nodes folded into weights.
    """

    graph: Graph
    model: Any  # openvino.Model
    op_index: tuple[str, ...]
    weight_nodes: tuple[str, ...] = ()
    path: Path | None = None


def _require_openvino() -> Any:
    try:
        import openvino as ov
    except ImportError as exc:  # pragma: no cover - openvino is a dev dependency here
        raise OnnxSchedError(
            "OpenVINO support needs the 'openvino' package: pip install 'onnx-sched[openvino]'"
        ) from exc
    return ov


def read_ir(path: str | os.PathLike) -> Any:
    """``openvino.Model`` of an IR ``.xml`` (weights from the ``.bin`` beside it, memory-mapped), with one-line errors.

    Read through OpenVINO's IR frontend alone: ``Core.read_model`` would offer a file
    the IR frontend rejects to every other frontend, and some (TensorFlow) print
    native log lines to stderr.  The model is the same as ``Core.read_model`` gives
    (checked on the corpus: identical re-serialization).  Raises
    :class:`ModelLoadError` for a missing file, a file that is not an IR, and what the
    frontend rejects (malformed XML, missing ``.bin``), cut to the line that says why."""
    _require_openvino()
    from openvino.frontend import FrontEndManager

    p = Path(path)
    if not p.is_file():
        raise ModelLoadError(f"OpenVINO model not found: {p}" if not p.is_dir() else f"{p}: is a directory, expected an .xml file")
    with p.open("rb") as fh:
        if not fh.read(256).lstrip().startswith(b"<"):
            raise ModelLoadError(f"cannot read OpenVINO model {p}: not an IR .xml file")
    frontend = FrontEndManager().load_by_framework("ir")
    if not frontend.supported(str(p)):
        raise ModelLoadError(f"cannot read OpenVINO model {p}: not an IR .xml file (no <net> with an IR version)")
    try:
        return frontend.convert(frontend.load(str(p), True))  # True: memory-map the weights, as Core.read_model does
    except Exception as exc:  # OpenVINO raises RuntimeError/GeneralFailure with a multi-line message
        raise ModelLoadError(f"cannot read OpenVINO model {p}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    """The line of an OpenVINO error that says why: not the ``Exception from <file>`` or
    ``Check '<condition>' failed at <file>`` headers."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    why = [ln for ln in lines if not ln.startswith(("Exception from", "Check '"))] or lines or [type(exc).__name__]
    if why[0].startswith("While validating node") and len(why) > 1:  # the node in a line of its own, then the cause
        node = re.search(r"with friendly_name '([^']*)'", why[0])
        return f"{why[1]} (node {node.group(1)!r})" if node else why[1]
    return why[0]


def _read_model(source: Any, ov: Any) -> tuple[Any, Path | None]:
    if isinstance(source, ov.Model):
        return source, None
    if is_openvino_source(source) and hasattr(source, "get_ordered_ops"):
        return ov.Model(source), None  # the C++ model a ModelPass gets: wrapped, not copied
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"import_openvino expects a path to an .xml file or an openvino.Model, got {type(source).__name__}"
        )
    return read_ir(source), Path(source)


def _reshaped(model: Any, input_shapes: Mapping[str, tuple[int, ...]], where: str) -> Any:
    """A copy of ``model`` with the named inputs set to static shapes (``ov.Model.reshape``)."""
    names = {n for p in model.inputs for n in p.get_names()}
    unknown = sorted(set(input_shapes) - names)
    if unknown:
        raise ModelLoadError(f"{where}: --input-shape names {unknown}, not inputs of the model (inputs: {sorted(names)})")
    copy = model.clone()
    try:
        copy.reshape({name: list(shape) for name, shape in input_shapes.items()})
    except Exception as exc:  # shape inference failure: OpenVINO's multi-line message
        raise ModelLoadError(f"{where}: cannot reshape to {dict(input_shapes)}: {_reason(exc)}") from exc
    return copy


def _type_bits(et: Any) -> int:
    return int(et.bitwidth)


def _dtype_name(et: Any) -> str:
    try:
        return str(np.dtype(et.to_dtype()))
    except Exception:  # sub-byte or exotic types have no numpy dtype
        return et.get_type_name()


def _flops(op_type: str, in_shapes: Sequence[tuple[int, ...] | None], out_shapes: Sequence[tuple[int, ...] | None],
           attrs: dict[str, Any]) -> float:
    """FLOPs of an OpenVINO op via the ONNX estimator, translating layouts that differ."""
    if op_type == "GroupConvolution" and len(in_shapes) > 1 and in_shapes[1] and len(in_shapes[1]) >= 3:
        w = in_shapes[1]  # [G, Cout/G, Cin/G, k...] -> [Cout, Cin/G, k...]
        return op_flops("Conv", [in_shapes[0], (w[0] * w[1], *w[2:])], out_shapes, {})
    if op_type == "MatMul" and in_shapes and in_shapes[0]:
        a = in_shapes[0]
        k = a[-2] if attrs.get("transpose_a") and len(a) >= 2 else a[-1]
        return 2.0 * sum(prod(s) for s in out_shapes if s is not None) * k
    if op_type in ("MaxPool", "AvgPool"):
        return op_flops("MaxPool", in_shapes, out_shapes[:1], {"kernel_shape": list(attrs.get("kernel", [1]))})
    return op_flops(_FLOP_ALIASES.get(op_type, op_type), in_shapes, out_shapes, attrs)


def _plain_attrs(node: Any) -> dict[str, Any]:
    try:
        attrs = dict(node.get_attributes())
    except Exception:  # some ops expose attributes Python cannot convert
        return {}
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}


def _tensor_name(node: Any, index: int) -> str:
    """The name a graph tensor takes for output ``index`` of OpenVINO node ``node``: one of its tensor names, else
    ``friendly_name:index``."""
    out = node.output(index)
    return out.get_any_name() if out.get_names() else f"{node.get_friendly_name()}:{index}"


@dataclass(frozen=True)
class _OpBodies:
    """What an op's bodies (an ``If``'s branches, a ``Loop``'s or ``TensorIterator``'s body) add to it: the largest
    body's transient bytes (its peak beyond its inputs and outputs, plus a loop's own state), FLOPs and bytes moved;
    how many bodies it has and how many could not be sized."""

    transient: int = 0
    flops: float = 0.0
    traffic: float = 0.0
    count: int = 0  # bodies imported
    unsized: int = 0


def _bodies(node: Any) -> _OpBodies:
    """The bodies of an OpenVINO control-flow op, each imported as a model of its own (:func:`import_openvino`):
    as for ONNX (:mod:`onnx_sched.importers.control_flow`), the op holds a body's memory while it runs.  A body's
    parameters are its inputs; a loop's merged (carried) and sliced ones are its own buffers from the second
    iteration on, its invariant ones the outer values themselves."""
    kind = node.get_type_name()
    if kind == "If":
        models = [node.get_then_body(), node.get_else_body()]
    elif kind in ("Loop", "TensorIterator"):
        models = [node.get_function()]
    else:
        return _OpBodies()
    invariant = {d.body_parameter_index for d in node.get_input_descriptions()
                 if type(d).__name__ == "InvariantInputDescription"} if kind != "If" else set()
    found = _OpBodies()
    for body in models:
        try:
            graph = import_openvino(body).graph
        except OnnxSchedError:  # a body sized only at run time: it counts nothing, and the report says so
            found = replace(found, unsized=found.unsized + 1)
            continue
        ids = {name: t for t, name in enumerate(graph.tensor_names)}
        own = [_tensor_name(p, 0) for k, p in enumerate(body.get_parameters()) if kind != "If" and k not in invariant]
        resident = int(sum(graph.tensor_bytes[ids[name]] for name in own if name in ids))
        need = transient_bytes(graph, np.arange(graph.n_ops), resident=resident)
        found = replace(found, count=found.count + 1, transient=max(found.transient, need),
                        flops=max(found.flops, float(graph.op_flops.sum())),
                        traffic=max(found.traffic, float(graph.op_bytes.sum())))
    return found


def is_openvino_source(source: Any) -> bool:
    """Whether ``source`` is for this importer: an ``openvino.Model`` or a path ending in ``.xml``.

    Decided without importing OpenVINO (an ``ov.Model`` is recognised by its class's module)."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source).suffix.lower() == ".xml"
    return type(source).__module__.split(".")[0] == "openvino"


def import_openvino(source: Any, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                    dims: Mapping[str, int] | None = None) -> ImportedOpenVINO:
    """Build the :class:`Graph` of an OpenVINO model (``.xml`` path or ``ov.Model``).

    ``input_shapes`` (``{input name: shape}``) reshapes a copy of the model to those
    static shapes first (``ov.Model.reshape``); the imported ``model`` is then that copy.
    ``dims`` (values for named symbolic dimensions, an ONNX notion) is refused: IR
    dimensions have no names.  Raises :class:`ModelLoadError` for unreadable files and
    :class:`UnknownShapeError` (listing the tensors) when op outputs have dynamic
    shapes or element types.  The model given is not modified.
    """
    ov = _require_openvino()
    model, path = _read_model(source, ov)
    where = str(path) if path else (model.get_friendly_name() or "ov.Model")
    if dims:
        raise OnnxSchedError(f"{where}: --dim names symbolic dimensions of ONNX inputs; the dimensions of an "
                             "OpenVINO model have no names: give --input-shape NAME=1x3x224x224 instead")
    if input_shapes:
        model = _reshaped(model, input_shapes, where)
    nodes = list(model.get_ordered_ops())
    node_key = {n.get_name(): i for i, n in enumerate(nodes)}  # get_name() is unique per model

    def src_of(inp: Any) -> tuple[int, int]:
        out = inp.get_source_output()
        return node_key[out.get_node().get_name()], int(out.get_index())

    # each node's inputs as (producer node, output index), read once: graphs reach 10^5 edges
    sources = [[src_of(inp) for inp in n.inputs()] for n in nodes]
    # classify: constant (weight-computing) nodes, ops, parameters, results
    constant = np.zeros(len(nodes), dtype=bool)
    for i, n in enumerate(nodes):
        t = n.get_type_name()
        if t == "Constant":
            constant[i] = True
        elif t not in _NOT_FOLDABLE and sources[i]:
            constant[i] = all(constant[src[0]] for src in sources[i])
    is_op = [
        not constant[i] and n.get_type_name() not in ("Parameter", "Result") for i, n in enumerate(nodes)
    ]
    output_srcs = {sources[i][0] for i, n in enumerate(nodes) if n.get_type_name() == "Result"}

    tensor_id: dict[tuple[int, int], int] = {}
    names: list[str] = []
    kinds: list[int] = []
    producer: list[int] = []
    outs_meta: list[Any] = []  # ov.Output per tensor

    def add_tensor(key: tuple[int, int], kind: TensorKind, prod_op: int) -> int:
        out = nodes[key[0]].output(key[1])
        tensor_id[key] = len(names)
        names.append(_tensor_name(nodes[key[0]], key[1]))
        kinds.append(int(kind))
        producer.append(prod_op)
        outs_meta.append(out)
        return tensor_id[key]

    for param in model.get_parameters():
        add_tensor((node_key[param.get_name()], 0), TensorKind.INPUT, -1)

    op_nodes: list[int] = []
    op_in: list[list[int]] = []
    op_out: list[list[int]] = []
    for i, n in enumerate(nodes):
        if not is_op[i]:
            continue
        op = len(op_nodes)
        op_nodes.append(i)
        row: dict[int, None] = {}  # distinct inputs in slot order
        for key in sources[i]:
            if key not in tensor_id:
                if not constant[key[0]]:
                    raise ModelLoadError(
                        f"{n.get_friendly_name()!r} reads an output of {nodes[key[0]].get_friendly_name()!r} "
                        "before it is produced"
                    )
                add_tensor(key, TensorKind.WEIGHT, -1)
            row[tensor_id[key]] = None
        op_in.append(list(row))
        op_out.append(
            [
                add_tensor((i, k), TensorKind.OUTPUT if (i, k) in output_srcs else TensorKind.ACTIVATION, op)
                for k in range(n.get_output_size())
            ]
        )

    unknown: list[str] = []
    sizes = np.zeros(len(names), dtype=np.int64)
    shapes: list[tuple[int, ...] | None] = []
    dtypes: list[str] = []
    bounded = 0
    for t, out in enumerate(outs_meta):
        pshape, et = out.get_partial_shape(), out.get_element_type()
        dtypes.append(_dtype_name(et))
        shape = upper_bound_shape(pshape)
        if shape is None or et.is_dynamic():
            unknown.append(f"{names[t]} {pshape} {et.get_type_name()}")
            shapes.append(None)
            continue
        bounded += not pshape.is_static
        shapes.append(shape)
        sizes[t] = (prod(shape) * _type_bits(et) + 7) // 8
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        if all(p.get_output_partial_shape(0).is_static for p in model.get_parameters()):
            hint = ("every input is static, so OpenVINO leaves these to run time (they depend on values the model "
                    "computes), and no --input-shape can size them")
        else:
            hint = "give static shapes with --input-shape NAME=1x3x224x224 (ov.Model.reshape)"
        raise UnknownShapeError(f"{where}: dynamic shape or type for {len(unknown)} tensors ({shown}); {hint}")

    op_types = tuple(nodes[i].get_type_name() for i in op_nodes)
    op_index = tuple(nodes[i].get_friendly_name() for i in op_nodes)
    bodies = [_bodies(nodes[i]) for i in op_nodes]
    graph = assemble_graph(
        name=path.stem if path else (model.get_friendly_name() or "model"), op_names=op_index, op_types=op_types,
        op_attrs=tuple(_plain_attrs(nodes[i]) for i in op_nodes), op_in=op_in, op_out=op_out, tensor_names=names,
        tensor_bytes=sizes, tensor_kind=kinds, tensor_producer=producer, tensor_dtypes=dtypes, tensor_shapes=shapes,
        flops_of=_flops, metadata={"source": "openvino", "upper_bound_tensors": bounded,
                                   "control_flow_bodies": sum(b.count for b in bodies),
                                   "unsized_bodies": sum(b.unsized for b in bodies)},
        op_param_bytes=np.array([b.transient for b in bodies], dtype=np.int64),
    )
    if any(b.count for b in bodies):  # a control-flow op does its largest body's work (one iteration of a loop)
        graph = replace(graph, op_flops=graph.op_flops + [b.flops for b in bodies],
                        op_bytes=graph.op_bytes + [b.traffic for b in bodies])
    weight_nodes = tuple(nodes[i].get_friendly_name() for i in np.flatnonzero(constant))
    return ImportedOpenVINO(graph=graph, model=model, op_index=op_index, weight_nodes=weight_nodes, path=path)
