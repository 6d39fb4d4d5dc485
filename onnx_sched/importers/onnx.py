"""ONNX model (file or ``ModelProto``) -> :class:`~onnx_sched.graph.Graph`.

What becomes what:

* every node that depends on a graph input is a compute **op**; nodes computed
  only from initializers / ``Constant`` (e.g. ``ConstantOfShape`` of a constant
  shape, the corpus's stripped weights) are **weight** producers: their outputs are
  weight tensors and the exporter places them just before their first consumer;
* control-flow nodes (If / Loop / Scan) are single ops whose inputs include the
  outer-scope values their subgraphs read;
* tensor sizes come from onnx shape inference, then ONNX Runtime's symbolic shape
  inference, then OpenVINO's ONNX frontend, whose bounds size data-dependent outputs
  (``NonZero``, ``NonMaxSuppression``) at their upper bound (:mod:`.bounded_shapes`);
  ``input_shapes`` / ``dims`` pin dynamic dimensions.  Any size still unknown raises
  :class:`UnknownShapeError` naming the tensors: sizes are never silently zero.

Weight bytes are never read: files are loaded with ``load_external_data=False``,
so models with external data and models over 2 GB import in memory proportional to
their graph, not their weights.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from onnx_sched.cost.flops import op_flops
from onnx_sched.errors import ModelLoadError, UnknownShapeError
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.importers._assemble import assemble_graph
from onnx_sched.importers.control_flow import CONTROL_FLOW_OPS, Body, BodyImports, import_bodies, subgraph_reads
from onnx_sched.importers.onnx_file import (
    check_data_files,
    check_model_file,
    is_utf8_path,
    load_model,
    load_model_by_reference,
    load_model_without_initializers,
)
from onnx_sched.importers.onnx_shapes import infer_types, propagate_types
from onnx_sched.importers.sequence_sizes import sequence_bytes
from onnx_sched.onnx_structure import NUMPY_TYPES, dtype_name, structure_only, tensor_nbytes

__all__ = [  # the file readers are onnx_file's, kept importable from here
    "RANDOM_OPS", "ImportedOnnx", "check_dim_names", "check_weight_bytes", "import_onnx", "initializer_names",
    "is_utf8_path", "load_model", "load_model_by_reference", "load_model_without_initializers", "parse_dims",
    "parse_input_shapes",
    "stable_op_names", "tensor_nbytes", "weight_nbytes",
]

def stable_op_names(nodes: Sequence[onnx.NodeProto]) -> tuple[str, ...]:
    """A unique name per node that does not depend on the node order.

    ONNX allows nodes without names and several nodes with one name (many exporters
    write them).  A node keeps its own name when it is non-empty and unique;
    otherwise it is named ``"<name or op type>:<first output tensor>"``, which is
    unique because ONNX tensors have one producer.  Reordering a model (what
    onnx-sched exports) keeps these names, so placements written for one order
    apply to the other.

    Example:
        >>> from onnx import helper
        >>> stable_op_names([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"], name="a"),
        ...                  helper.make_node("Neg", ["z"], ["w"], name="b"), helper.make_node("Neg", ["w"], ["v"], name="b")])
        ('Relu:y', 'a', 'b:w', 'b:v')
    """
    counts = Counter(n.name for n in nodes if n.name)
    names = []
    for i, node in enumerate(nodes):
        if node.name and counts[node.name] == 1:
            names.append(node.name)
            continue
        out = next((o for o in node.output if o), None)
        names.append(f"{node.name or node.op_type}:{out}" if out is not None else f"{node.name or node.op_type}#{i}")
    clash = Counter(names)
    return tuple(n if clash[n] == 1 else f"{n}#{i}" for i, n in enumerate(names))


#: Bytes no tensor can hold: past them a declared shape is a mistake (sizes are int64).
MAX_TENSOR_BYTES = 2**63 - 1
#: ops that draw random values: never folded into weights (and see :func:`onnx_sched.bench.outputs.random_outputs`)
RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
_SEQUENCE_OPS = frozenset({"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase", "SequenceAt",
                           "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap"})
_OPTIONAL_OPS = frozenset({"Optional", "OptionalGetElement", "OptionalHasElement"})


@dataclass(frozen=True, eq=False)
class ImportedOnnx:
    """The graph plus what the exporter needs to write the model back.

    ``op_node[i]`` is the index in ``model.graph.node`` of graph op ``i``;
    ``weight_nodes`` are the node indices that only compute weights.
    """

    graph: Graph
    model: onnx.ModelProto
    op_node: np.ndarray
    weight_nodes: tuple[int, ...]
    path: Path | None = None
    shape_sources: Mapping[str, int] = field(default_factory=dict)
    bodies: tuple[Body, ...] = ()  # the control-flow ops' bodies, imported (:mod:`.control_flow`)


# ----------------------------------------------------------------- CLI parsing
def parse_input_shapes(specs: list[str] | tuple[str, ...] | None) -> dict[str, tuple[int, ...]]:
    """``["x=1x3x224x224"]`` -> ``{"x": (1, 3, 224, 224)}``."""
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs or ():
        name, sep, dims = spec.rpartition("=")
        if name in out:
            raise ValueError(f"--input-shape: input {name!r} is given twice")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = tuple(int(d) for d in dims.lower().split("x"))
            if min(out[name]) < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"--input-shape {spec!r}: expected NAME=D1xD2x... with positive sizes, "
                             "e.g. input=1x3x224x224") from None
    return out


def parse_dims(specs: list[str] | tuple[str, ...] | None) -> dict[str, int]:
    """``["batch=1"]`` -> ``{"batch": 1}``; sizes must be positive (a zero or negative size would make
    every tensor empty and every order trivially optimal)."""
    out: dict[str, int] = {}
    for spec in specs or ():
        name, sep, value = spec.rpartition("=")
        if name in out:
            raise ValueError(f"--dim: dimension {name!r} is given twice")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = int(value)
            if out[name] < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"--dim {spec!r}: expected NAME=VALUE with a positive VALUE, e.g. batch_size=1") from None
    return out


# ---------------------------------------------------------------------- loading
def check_dim_names(model: onnx.ModelProto, dims: Mapping[str, int]) -> None:
    """``ValueError`` for a ``--dim`` name that no input of ``model`` has as a symbolic dimension."""
    named = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    for name in dims:
        if name not in named:
            have = f"its symbolic dims are {', '.join(sorted(named))}" if named else "it has no symbolic dims"
            raise ValueError(f"--dim {name} (dims= in Python): no input of the model has a dimension named {name!r} "
                             f"({have})")


def _pin_inputs(model: onnx.ModelProto, input_shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]) -> onnx.ModelProto:
    """For shape inference: a copy of ``model``'s structure (:func:`structure_only`: its weights are typed inputs,
    not copied) with ``input_shapes`` and ``dims`` set on its inputs; ``model`` itself when neither names anything."""
    if not input_shapes and not dims:
        return model
    m = onnx.ModelProto()
    m.CopyFrom(structure_only(model))
    names = {i.name for i in model.graph.input}  # not the weights the structure declares as inputs
    for name in input_shapes:
        if name not in names:
            fed = sorted(names - initializer_names(model.graph))  # an IR 3 model also lists its weights
            shown = ", ".join(repr(n) for n in fed[:10]) + (f" and {len(fed) - 10} more" if len(fed) > 10 else "")
            raise ValueError(f"--input-shape {name} (input_shapes= in Python): the model has no input {name!r} "
                             f"(its inputs: {shown or 'none'})")
    check_dim_names(m, dims)
    for inp in m.graph.input:
        tt = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            continue
        if inp.name in input_shapes:
            shape = input_shapes[inp.name]
            declared = "x".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                                for d in tt.shape.dim)
            if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
                raise ValueError(f"--input-shape {inp.name}={'x'.join(map(str, shape))}: the input has "
                                 f"{len(tt.shape.dim)} dimensions ({declared}), not {len(shape)}")
            fixed = [(k, d.dim_value) for k, (d, want) in enumerate(zip(tt.shape.dim, shape))
                     if d.HasField("dim_value") and d.dim_value != want]
            if fixed:
                k, have = fixed[0]
                raise ValueError(f"--input-shape {inp.name}={'x'.join(map(str, shape))}: dimension {k} of the "
                                 f"input is fixed at {have} ({declared}); only symbolic dimensions can be set")
            tt.ClearField("shape")
            for d in shape:
                tt.shape.dim.add().dim_value = int(d)
            continue
        for d in tt.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims:
                value = dims[d.dim_param]
                d.Clear()
                d.dim_value = value
    # the value_info of the file may carry the old symbolic dims: drop them, re-infer
    if input_shapes or dims:
        del m.graph.value_info[:]
    return m


def check_weight_bytes(model: onnx.ModelProto, where: str) -> None:
    """Every initializer of a plain numeric type holds at least the bytes its shape and type need: its ``raw_data``,
    or the ``length`` its external data names (a weight read by reference, :func:`load_model_by_reference`).
    onnx's checker never sees the bytes of a weight read by reference, and checks inline bytes only in recent
    releases (1.17 to 1.20 pass a truncated weight; measured): such a model was read, and written out by
    ``optimize``, instead of refused in one line here."""
    for t in model.graph.initializer:
        if t.data_type not in NUMPY_TYPES:
            continue
        if t.data_location == onnx.TensorProto.EXTERNAL:
            length = next((e.value for e in t.external_data if e.key == "length"), None)
            if length is None or not length.isdigit():
                continue
            have = int(length)
        elif t.HasField("raw_data"):
            have = len(t.raw_data)
        else:
            continue
        need = tensor_nbytes(t.data_type, tuple(t.dims))
        if have < need:
            raise ModelLoadError(f"{where}: invalid ONNX model: initializer {t.name!r} holds {have} bytes, its shape "
                                 f"{list(t.dims)} and type {onnx.TensorProto.DataType.Name(t.data_type)} need {need}")


def weight_nbytes(model: onnx.ModelProto) -> int:
    """Bytes of the main graph's weights as their shapes and types give them: its initializers (sparse ones: their
    values and indices) and the tensors of its ``Constant`` nodes (types without a fixed size count nothing); reads
    no weight's bytes, so a model read by reference costs nothing here."""
    tensors = [*model.graph.initializer,
               *(part for t in model.graph.sparse_initializer for part in (t.values, t.indices)),
               *(a.t for n in model.graph.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx")
                 for a in n.attribute if a.name == "value")]
    return sum(tensor_nbytes(t.data_type, tuple(t.dims)) or 0 for t in tensors)


def _param_bytes(model: onnx.ModelProto, op_names: tuple[str, ...]) -> np.ndarray | None:
    """Transient parameter bytes per op (paper 000 eq. 15) from the model metadata key
    ``onnx_sched.op_param_bytes`` (a JSON map op name -> bytes), as the synthetic
    ONNX writer stores them; ``None`` when absent."""
    raw = next((p.value for p in model.metadata_props if p.key == "onnx_sched.op_param_bytes"), None)
    if raw is None:
        return None
    import json

    try:
        table = json.loads(raw)
        return np.asarray([int(table.get(name, 0)) for name in op_names], dtype=np.int64)
    except (ValueError, TypeError, AttributeError):
        raise ModelLoadError("metadata onnx_sched.op_param_bytes is not a JSON map of op name to bytes") from None


# ------------------------------------------------------------------ structure
def initializer_names(graph: onnx.GraphProto) -> set[str]:
    """Names of a graph's initializers, dense and sparse."""
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def _attrs(node: onnx.NodeProto) -> dict:
    out = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSOR):
            continue
        try:
            out[a.name] = helper.get_attribute_value(a)
        except Exception:  # noqa: BLE001
            continue
    return out


def _upper_bound_tensors(sources: Mapping[str, int]) -> int:
    """Tensors sized at an upper bound: OpenVINO's bounds, and the shapes onnx's inference passed on from them (all
    of its second pass, which may also hold exact ones: the note errs on the side of "worst case")."""
    bounded = sources.get("openvino-upper-bound", 0)
    return bounded + sources.get("onnx-downstream", 0) if bounded else 0


def _import_bodies(model: onnx.ModelProto, pinned: onnx.ModelProto, flow: list[int],
                   types: dict[str, tuple[int, tuple[int, ...] | None]], sources: dict[str, int]) -> BodyImports:
    """The bodies of the control-flow nodes ``flow`` (:func:`import_bodies`); the output shapes they give that
    inference left unknown go into ``types``, and on to the ops downstream (:func:`propagate_types`), counted in
    ``sources["control-flow"]``.  While a body stayed unsized and new shapes came, every body is imported again
    (a body may read such an output): a round per level of control flow feeding control flow, at most."""
    sized = 0
    for _ in range(len(flow)):
        bodies = import_bodies(model, flow, types, import_onnx)
        shaped = {n: t for n, t in bodies.output_types.items() if n not in types or types[n][1] is None}
        if not shaped:
            break
        types.update(shaped)
        sized += len(shaped) + propagate_types(pinned, types)
        if not bodies.unsized:
            break
    if sized:
        sources["control-flow"] = sized
    return bodies


def import_onnx(
    source: str | os.PathLike | onnx.ModelProto,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    dims: Mapping[str, int] | None = None,
    check: bool = True,
    weights_in_file: bool = False,
) -> ImportedOnnx:
    """Import an ONNX model for scheduling (see module docstring).  ``weights_in_file``: a file's large inline
    weights stay in it, the model referring to them (:func:`load_model_by_reference`; write it with the ONNX
    exporter and the file as ``source_path``, which writes them inline again).

    Raises :class:`ModelLoadError`, :class:`UnknownOpError` or
    :class:`UnknownShapeError` with a one-line message on bad input.
    """
    path, checked = None, False
    if isinstance(source, onnx.ModelProto):
        model = source
        where = model.graph.name or "model"
    else:
        path = Path(source)
        where = str(path)
        if weights_in_file:  # checked below, its weights referred to: the checker reads no weight's bytes
            model = load_model_by_reference(path)
            if check:
                check_data_files(model, path)
        else:
            if check and path.is_file() and is_utf8_path(path):  # onnx's C++ code takes UTF-8 paths only
                check_model_file(path, where)  # before this process reads the model: the checker's copy is gone by then
                checked = True
            model = load_model(path)
    if check and not checked:
        check_model_file(model, where)
    if check:
        check_weight_bytes(model, where)
    g = model.graph
    pinned = _pin_inputs(model, input_shapes or {}, dims or {})

    types, sources = infer_types(pinned, path, changed=bool(input_shapes or dims))

    initializers = initializer_names(g)
    graph_inputs = [i.name for i in g.input if i.name not in initializers]
    graph_outputs = [o.name for o in g.output]

    # weights: initializers, Constant, and deterministic nodes fed only by weights
    weight_names = set(initializers)
    weight_nodes: list[int] = []
    op_node: list[int] = []
    for idx, node in enumerate(g.node):
        ins = [x for x in list(node.input) + (subgraph_reads(node) if node.op_type in CONTROL_FLOW_OPS else []) if x]
        is_weight = node.domain in ("", "ai.onnx") and (
            node.op_type == "Constant"
            or (ins and node.op_type not in RANDOM_OPS and node.op_type not in CONTROL_FLOW_OPS
                and all(x in weight_names for x in ins))
        )
        if is_weight:
            weight_nodes.append(idx)
            weight_names.update(o for o in node.output if o)
        else:
            op_node.append(idx)

    # tensors: graph inputs, weights actually read by ops, op outputs
    tensor_id: dict[str, int] = {}
    names: list[str] = []
    kinds: list[int] = []
    producer: list[int] = []

    def add_tensor(name: str, kind: TensorKind, prod: int) -> int:
        tensor_id[name] = len(names)
        names.append(name)
        kinds.append(int(kind))
        producer.append(prod)
        return tensor_id[name]

    for name in graph_inputs:
        add_tensor(name, TensorKind.INPUT, -1)
    op_in: list[list[int]] = []
    op_out: list[list[int]] = []
    out_set = set(graph_outputs)
    for op, idx in enumerate(op_node):
        node = g.node[idx]
        reads = list(node.input) + (subgraph_reads(node) if node.op_type in CONTROL_FLOW_OPS else [])
        row = []
        for name in reads:
            if not name:
                continue
            if name not in tensor_id:
                if name in weight_names:
                    add_tensor(name, TensorKind.WEIGHT, -1)
                else:
                    raise ModelLoadError(f"{where}: node {node.name or node.op_type!r} reads {name!r}, which nothing defines")
            row.append(tensor_id[name])
        op_in.append(row)
        outs = []
        for name in node.output:
            if not name:
                continue
            if name in tensor_id:
                raise ModelLoadError(f"{where}: tensor {name!r} is defined twice")
            outs.append(add_tensor(name, TensorKind.OUTPUT if name in out_set else TensorKind.ACTIVATION, op))
        op_out.append(outs)

    flow = [i for i in op_node if g.node[i].op_type in CONTROL_FLOW_OPS and g.node[i].domain in ("", "ai.onnx")]
    bodies = _import_bodies(model, pinned, flow, types, sources) if flow else None
    unknown: list[str] = []
    sizes = np.zeros(len(names), dtype=np.int64)
    dtypes: list[str] = []
    shapes: list[tuple[int, ...] | None] = []
    for i, name in enumerate(names):
        elem, shape = types.get(name, (0, None))
        nbytes = tensor_nbytes(elem, shape) if elem and shape is not None else None
        dtypes.append(dtype_name(elem))
        shapes.append(shape)
        if nbytes is None:
            if kinds[i] != TensorKind.WEIGHT:
                unknown.append(name)
            sizes[i] = 0 if kinds[i] == TensorKind.WEIGHT else -1
            continue
        if nbytes > MAX_TENSOR_BYTES:
            raise ModelLoadError(f"{where}: tensor {name!r} of shape {list(shape)} would hold {nbytes:,} bytes, more "
                                 f"than any memory ({MAX_TENSOR_BYTES + 1:,}): fix its declared shape, or pin a "
                                 f"symbolic dimension with --dim / --input-shape")
        sizes[i] = nbytes
    strings = sum(1 for i, name in enumerate(names)
                  if kinds[i] != TensorKind.WEIGHT and types.get(name, (0, None))[0] == onnx.TensorProto.STRING)
    bounded_sequences = 0
    for name in [u for u in unknown if bodies is not None and u in bodies.output_bytes]:  # e.g. If branches that
        sizes[tensor_id[name]], dtypes[tensor_id[name]] = bodies.output_bytes[name]  # differ: the larger one
    unknown = [u for u in unknown if sizes[tensor_id[u]] < 0]
    made_by = {o: n.op_type for n in g.node for o in n.output} if unknown else {}
    if unknown and any(n.op_type in _SEQUENCE_OPS | _OPTIONAL_OPS for n in g.node):
        known = {name: int(sizes[i]) for i, name in enumerate(names) if sizes[i] >= 0}
        seq_sizes, seq_bounded = sequence_bytes(g, known)
        for name in [u for u in unknown if u in seq_sizes]:
            sizes[tensor_id[name]] = seq_sizes[name]
            if name not in types:  # a sequence or optional value, not a tensor read out of one
                dtypes[tensor_id[name]] = "optional" if made_by.get(name) == "Optional" else "sequence"
        bounded_sequences = len(seq_bounded & set(unknown))
        unknown = [u for u in unknown if u not in seq_sizes]
    if unknown:
        dyn = sorted({d.dim_param for i in pinned.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param})
        hint = (f"; pin dynamic dims with --dim ({', '.join(dyn)}) or --input-shape (in Python: dims= or "
                "input_shapes=)") if dyn else ""
        sequences = [n for n in g.node if n.op_type in _SEQUENCE_OPS]
        if sequences and not dyn:
            hint = (f"; the model uses sequence ops ({sequences[0].op_type} ...): onnx-sched sizes a sequence "
                    "only where the op that builds it fixes its elements (SplitToSequence, SequenceConstruct, "
                    "SequenceInsert, SequenceEmpty)")
        custom = [n for n in g.node if n.domain not in ("", "ai.onnx", "ai.onnx.ml") and set(n.output) & set(unknown)]
        if custom and not dyn:
            hint = (f"; {custom[0].domain}.{custom[0].op_type} is an op no shape inference knows and ONNX Runtime "
                    "could not run here: give its outputs' shapes in the model's value_info")
        flows = [u for u in unknown if made_by.get(u) in CONTROL_FLOW_OPS]
        if flows and not dyn:
            why = {"Loop": "its trip count is read at run time, or a loop value grows",
                   "Scan": "its scanned length is read at run time, or a state grows",
                   "If": "its branches give it different shapes, or a branch is sized only at run time"}
            hint = (f"; {flows[0]!r} is an output of {'an' if made_by[flows[0]] == 'If' else 'a'} "
                    f"{made_by[flows[0]]} whose size only a run fixes "
                    f"({why[made_by[flows[0]]]}): give its shape in the model's value_info")
        maps = [u for u in unknown if made_by.get(u) == "ZipMap"]
        if maps:
            hint = (f"; {maps[0]!r} is ZipMap's sequence of maps, which onnx-sched cannot size (it sizes tensors and "
                    "sequences of tensors): export the classifier without ZipMap (skl2onnx: the option "
                    "zipmap=False) to get the probabilities as a tensor")
        shown = ", ".join(repr(u) for u in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise UnknownShapeError(f"{where}: unknown size for {len(unknown)} tensors ({shown}){hint}")

    op_types = tuple(g.node[i].op_type for i in op_node)
    node_names = stable_op_names(g.node)
    op_names = tuple(node_names[i] for i in op_node)
    param = _param_bytes(model, op_names)
    if bodies is not None and bodies.transient:
        param = (np.zeros(len(op_node), np.int64) if param is None else param) + np.asarray(
            [bodies.transient.get(i, 0) for i in op_node], dtype=np.int64)
    graph = assemble_graph(
        name=path.stem if path else (g.name or "model"), op_names=op_names, op_types=op_types,
        op_attrs=tuple(_attrs(g.node[i]) for i in op_node), op_in=op_in, op_out=op_out, tensor_names=names,
        tensor_bytes=sizes, tensor_kind=kinds, tensor_producer=producer, tensor_dtypes=dtypes, tensor_shapes=shapes,
        flops_of=op_flops, metadata={"source": "onnx", "ir_version": int(model.ir_version),
                                     "upper_bound_tensors": _upper_bound_tensors(sources) + bounded_sequences
                                     + (bodies.bounded if bodies else 0),
                                     "string_tensors": strings,
                                     "control_flow_bodies": len(bodies.bodies) if bodies else 0,
                                     "unsized_bodies": bodies.unsized if bodies else 0},
        op_param_bytes=param,
    )
    if bodies is not None and bodies.flops:  # a control-flow op does its largest body's work
        graph = replace(graph, op_flops=graph.op_flops + [bodies.flops.get(i, 0.0) for i in op_node],
                        op_bytes=graph.op_bytes + [bodies.traffic.get(i, 0.0) for i in op_node])
    return ImportedOnnx(
        graph=graph,
        model=model,
        op_node=np.asarray(op_node, dtype=np.int64),
        weight_nodes=tuple(weight_nodes),
        path=path,
        shape_sources=sources,
        bodies=bodies.bodies if bodies else (),
    )
