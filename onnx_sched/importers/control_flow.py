"""Control-flow bodies (the subgraphs of ``If``, ``Loop``, ``Scan``) as models of their own: their memory.

ONNX Runtime runs a body as a graph of its own while the control-flow node runs, in the
body's node order (``PRIORITY_BASED`` orders it as it orders the main graph), and frees
the body's tensors when the node is done.  So a control-flow op needs its body's peak
activation memory for the one step it runs: transient bytes (``Graph.op_param_bytes``,
paper 000 eq. 15).  Without them a model whose work lives in an ``If`` (the merged
decoders of Hugging Face Optimum: the whole decoder in each branch) looked as small as
its inputs and outputs.

:func:`body_model` makes a body a standalone model: its formal inputs, then every outer
value it reads, become graph inputs typed from the outer graph (the outer values stay
live in the outer graph, so they are inputs here, outside the transient bytes);
:func:`import_bodies` imports each body like any model and :func:`transient_bytes`
gives its peak over the body's own inputs and outputs.  ``If`` takes the larger
branch; ``Loop`` and ``Scan`` one iteration (the scan outputs they stack up are the op's
outputs; a ``Loop``'s are sized where its trip count is a constant), plus what ONNX
Runtime's ``Loop`` copies at its end.  The op's FLOP and byte estimates (the time cost
models') take its largest body's work the same way.  A body whose sizes stay unknown (a
loop-carried value that grows, a sequence) counts nothing, and :class:`BodyImports` says
how many.

Example (an ``If`` whose branches hold a 4 KB intermediate):
    >>> import numpy as np
    >>> from onnx import TensorProto as T, helper as h
    >>> x = h.make_tensor_value_info("x", T.FLOAT, [1024])
    >>> def branch(p):
    ...     return h.make_graph([h.make_node("Relu", ["x"], [p + "a"]), h.make_node("Neg", [p + "a"], [p + "y"])],
    ...                         p, [], [h.make_tensor_value_info(p + "y", T.FLOAT, [1024])])
    >>> node = h.make_node("If", ["c"], ["y"], then_branch=branch("t"), else_branch=branch("e"))
    >>> types = {"x": (T.FLOAT, (1024,)), "c": (T.BOOL, ())}
    >>> from onnx_sched.importers.onnx import import_onnx
    >>> bodies = import_bodies(h.make_model(h.make_graph([node], "g", [], [])), [0], types, import_onnx)
    >>> bodies.transient, len(bodies.bodies)
    ({0: 4096}, 2)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_sched.cost.memory import profile
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.onnx_structure import dtype_name, is_large, tensor_nbytes
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.importers.onnx import ImportedOnnx

__all__ = ["CONTROL_FLOW_OPS", "Body", "BodyImports", "body_model", "import_bodies", "subgraph_reads",
           "transient_bytes", "trip_count"]

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})
#: A constant trip count above this is a "while" loop's sentinel, not a count (:func:`trip_count`).
MAX_TRIPS = 1 << 31
TensorType = tuple[int, "tuple[int, ...] | None"]


@dataclass(frozen=True, eq=False)
class Body:
    """One body of a control-flow node: ``node`` (its index in the parent graph's nodes), ``attribute``
    (``then_branch``, ``else_branch``, ``body``), the body imported as a standalone model and, once an objective
    ordered it (:func:`onnx_sched.objectives.peak_mem_bodies.order_bodies`), its ``schedule``, which the exporter
    writes into the body."""

    node: int
    attribute: str
    imported: ImportedOnnx
    schedule: Schedule | None = None
    resident: int = 0  # bytes of a loop's own inputs (its carried state), held beside the outer values, and of the
    # copies a Loop makes of its outputs at its end (_loop_copies)
    transient: int = 0  # what the op needs for it in its own order (:func:`transient_bytes`), as imported


@dataclass(frozen=True, eq=False)
class BodyImports:
    """What :func:`import_bodies` found: ``transient[node index]`` (bytes), ``output_bytes[name]`` (bytes, dtype)
    of the control-flow outputs the bodies size (:func:`_output_sizes`; ``bounded`` of them at an upper bound: a
    loop whose condition can end it before its trip count) and ``output_types[name]`` (elem type, shape) of those
    whose exact shape every body gives alike, the work of the largest body, ``flops`` and ``traffic`` (bytes read +
    written; for the time cost models), the imported ``bodies`` and how many bodies could not be sized
    (``unsized``)."""

    transient: Mapping[int, int] = field(default_factory=dict)
    output_bytes: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    output_types: Mapping[str, TensorType] = field(default_factory=dict)
    flops: Mapping[int, float] = field(default_factory=dict)
    traffic: Mapping[int, float] = field(default_factory=dict)
    bodies: tuple[Body, ...] = ()
    unsized: int = 0
    bounded: int = 0


def subgraph_reads(node: onnx.NodeProto) -> list[str]:
    """Outer-scope names read by the subgraphs of a node (a control-flow node's bodies; recursively), in first-read
    order."""
    reads: list[str] = []
    for attr in node.attribute:
        for sub in _graphs(attr):
            for name in _reads(sub):
                if name not in reads:
                    reads.append(name)
    return reads


def _graphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    return [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)


def _reads(sub: onnx.GraphProto) -> list[str]:
    """Names ``sub`` (and the bodies in it) reads that it does not define."""
    defined = {i.name for i in sub.input} | {t.name for t in sub.initializer} | \
        {t.values.name for t in sub.sparse_initializer}
    reads: list[str] = []
    for n in sub.node:
        for name in list(n.input) + subgraph_reads(n):
            if name and name not in defined and name not in reads:
                reads.append(name)
        defined.update(o for o in n.output if o)
    return reads


def _formal_input_types(node: onnx.NodeProto, sub: onnx.GraphProto,
                        types: Mapping[str, TensorType]) -> list[TensorType | None]:
    """The types of ``sub``'s formal inputs: as the body declares them when its shapes are whole; else from the
    node's inputs (``Loop``: the trip counter, the condition, then each carried value's initial value; ``Scan``: the
    state's initial values, then one slice of each scanned input; opset 8's ``Scan``: the same for one sequence of its
    batch, past its ``sequence_lens``)."""
    declared = [(vi.type.tensor_type.elem_type, _static(vi.type)) if vi.type.HasField("tensor_type") else None
                for vi in sub.input]
    if all(t is not None and t[1] is not None for t in declared):
        return declared
    outer = [types.get(name) if name else None for name in node.input]
    if node.op_type == "Loop":
        derived = [(onnx.TensorProto.INT64, ()), (onnx.TensorProto.BOOL, ()), *outer[2:]]
    elif node.op_type == "Scan" and _scan8(node, [vi.name for vi in sub.input]):
        outer = outer[1:]  # sequence_lens: no body input; the body sees one sequence of the batch, one slice of it
        n_state = len(outer) - _num_scan_inputs(node)
        derived = [*(_without(t, [0]) for t in outer[:n_state]), *(_without(t, [0, 1]) for t in outer[n_state:])]
    elif node.op_type == "Scan":
        n_scan = _num_scan_inputs(node)
        axes = _ints(node, "scan_input_axes", [0] * n_scan)
        n_state = len(outer) - n_scan
        derived = [*outer[:n_state], *(_without(t, [axis]) for t, axis in zip(outer[n_state:], axes))]
    else:
        derived = []
    return [d if d is not None and d[1] is not None else t for d, t in zip(derived + [None] * len(declared), declared)]


def _without(t: TensorType | None, axes: Sequence[int]) -> TensorType | None:
    """``t`` with the dimensions ``axes`` (negative from the end) taken out: one slice of a scanned tensor; ``None``
    where its shape is unknown or has too few dimensions.

    >>> _without((1, (2, 3, 4)), [0, -1])
    (1, (3,))
    """
    if t is None or t[1] is None or len(t[1]) < len(axes):
        return None
    drop = {a % len(t[1]) for a in axes}
    return t[0], tuple(d for i, d in enumerate(t[1]) if i not in drop)


def _static(t: onnx.TypeProto) -> tuple[int, ...] | None:
    shape = t.tensor_type.shape if t.tensor_type.HasField("shape") else None
    if shape is None or any(not d.HasField("dim_value") or d.dim_value < 0 for d in shape.dim):
        return None
    return tuple(int(d.dim_value) for d in shape.dim)


def _value_info(name: str, t: TensorType | None, fallback: onnx.ValueInfoProto | None) -> onnx.ValueInfoProto:
    if t is not None:
        return helper.make_tensor_value_info(name, t[0], list(t[1]) if t[1] is not None else None)
    if fallback is not None:
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(fallback)
        vi.name = name
        return vi
    return helper.make_value_info(name, onnx.TypeProto())


def _small_constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The outer graph's initializers and ``Constant`` tensors small enough to copy (a shape, an axis): a body
    reading one gets its value, which shape inference needs (a ``Reshape`` to a shape the main graph holds); the
    large ones are typed inputs, their values unread."""
    out = {t.name: t for t in graph.initializer if not is_large(t)}
    for n in graph.node:
        value = next((a.t for a in n.attribute if a.name == "value"), None)
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and value is not None and n.output \
                and not is_large(value):
            tensor = onnx.TensorProto()
            tensor.CopyFrom(value)
            tensor.name = n.output[0]
            out[tensor.name] = tensor
    return out


def body_model(model: onnx.ModelProto, node: onnx.NodeProto, sub: onnx.GraphProto,
               types: Mapping[str, TensorType], outer_infos: Mapping[str, onnx.ValueInfoProto],
               constants: Mapping[str, onnx.TensorProto] | None = None) -> onnx.ModelProto:
    """``sub`` (a body of ``node``, a node of ``model``'s graph) as a standalone model: its formal inputs, then the
    outer values it reads, as graph inputs typed by ``types`` (the outer graph's inferred types) or the outer
    ``outer_infos``, except the small outer constants it reads, copied as initializers (``constants``: those of
    ``model``'s graph, found when not given); its own nodes, small initializers (its large ones as typed inputs),
    value infos and outputs; ``model``'s opsets and functions.  Its nodes are ``sub``'s, in their order."""
    formal = _formal_input_types(node, sub, types)
    inputs = [_value_info(vi.name, t, vi) for vi, t in zip(sub.input, formal)]
    known = _small_constants(model.graph) if constants is None else constants
    reads = _reads(sub)
    inputs += [_value_info(name, types.get(name), outer_infos.get(name)) for name in reads if name not in known]
    own = [t for t in sub.initializer if not is_large(t)]  # a large one as a typed input: its bytes stay unread
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in sub.initializer
               if is_large(t)]
    graph = helper.make_graph(list(sub.node), f"{node.name or node.op_type}.{sub.name or 'body'}", inputs,
                              list(sub.output), [*own, *(known[n] for n in reads if n in known)],
                              value_info=list(sub.value_info), sparse_initializer=list(sub.sparse_initializer))
    wrapped = helper.make_model(graph, opset_imports=list(model.opset_import), functions=list(model.functions))
    wrapped.ir_version = model.ir_version
    return wrapped


def transient_bytes(graph: Graph, order: Sequence[int] | np.ndarray, inplace: bool = False, resident: int = 0) -> int:
    """A body's memory beyond its inputs (outer values, live outside it) and its outputs (the control-flow op's
    outputs, which the outer graph counts): the most, over the body's steps in ``order``, of the live bytes less
    its graph inputs and the graph outputs produced so far (``inplace``: the memory model's in-place reuse), plus
    ``resident``: a loop's carried state, which from its second iteration on is the last iteration's outputs, not
    the outer values it started from, and what a ``Loop`` holds at its end beside its outputs
    (:func:`_loop_copies`)."""
    if graph.n_ops == 0:
        return resident
    order = np.asarray(order, dtype=np.int64)
    prof = profile(graph, order, inplace)
    kept = np.where(graph.tensor_kind == TensorKind.OUTPUT, graph.tensor_bytes, 0).astype(np.int64)
    made = np.array([kept[graph.op_outputs.row(int(op))].sum() for op in order], dtype=np.int64)
    return max(0, int((prof.step - prof.base - np.cumsum(made)).max())) + resident


def import_bodies(model: onnx.ModelProto, nodes: Sequence[int], types: Mapping[str, TensorType],
                  import_onnx: Callable[..., ImportedOnnx]) -> BodyImports:
    """Import the bodies of the control-flow nodes ``nodes`` (indices into ``model.graph.node``) with
    ``import_onnx`` (the ONNX importer, which imports this module) and give each node the transient bytes of its
    bodies in their file order (the largest body's)."""
    g = model.graph
    outer_infos = {vi.name: vi for vi in [*g.input, *g.value_info, *g.output]}
    constants = _small_constants(g)
    transient: dict[int, int] = {}
    output_bytes: dict[str, tuple[int, str]] = {}
    partial: set[str] = set()
    shapes: dict[str, set[tuple[str, tuple[int, ...] | None]]] = {}
    bounded: set[str] = set()
    flops: dict[int, float] = {}
    traffic: dict[int, float] = {}
    bodies: list[Body] = []
    unsized = 0
    for idx in nodes:
        node = g.node[idx]
        for attr in node.attribute:
            for sub in _graphs(attr):
                try:
                    imported = import_onnx(body_model(model, node, sub, types, outer_infos, constants), check=False)
                except Exception:  # noqa: BLE001 -- sizes fixed only at run time, an op no inference knows: the body
                    unsized += 1  # counts nothing, as before bodies were imported, and the report says so
                    partial.update(o for o in node.output if o)  # an If's other branch alone does not size it
                    continue
                body = imported.graph
                held = _carried_bytes(node, body, [i.name for i in sub.input], sub.output, types)
                if held is None:  # a carried value that grows (or shrinks): one iteration does not size the loop
                    unsized += 1
                    partial.update(o for o in node.output if o)
                    continue
                trips = trip_count(node, constants)
                fixed = _output_sizes(node, body, [i.name for i in sub.input], sub.output, types, trips)
                if node.op_type == "Scan":
                    held += _scan_copies(node, fixed, types)
                if node.op_type == "Loop":
                    held += _loop_copies(node, fixed, types, trips)
                    if trips is not None and node.input[1]:  # its condition may end it sooner: a bound
                        bounded.update(o for o in node.output[len(node.input) - 2:] if o in fixed)
                need = transient_bytes(body, np.arange(body.n_ops), resident=held)
                bodies.append(Body(node=idx, attribute=attr.name, imported=imported, resident=held, transient=need))
                transient[idx] = max(transient.get(idx, 0), need)
                flops[idx] = max(flops.get(idx, 0.0), float(body.op_flops.sum()))
                traffic[idx] = max(traffic.get(idx, 0.0), float(body.op_bytes.sum()))
                if node.op_type == "If":  # a branch that leaves an output unsized leaves the If's unsized
                    partial.update(o for o in node.output if o and o not in fixed)
                for name, (nbytes, dtype, shape) in fixed.items():
                    if nbytes > output_bytes.get(name, (-1, ""))[0]:
                        output_bytes[name] = (nbytes, dtype)
                    shapes.setdefault(name, set()).add((dtype, shape))
    sized = {name: value for name, value in output_bytes.items() if name not in partial}
    alike = {name: next(iter(seen)) for name, seen in shapes.items() if name in sized and len(seen) == 1}
    typed = {name: (getattr(onnx.TensorProto, dtype.upper()), shape) for name, (dtype, shape) in alike.items()
             if shape is not None}
    return BodyImports(transient=transient, output_bytes=sized, output_types=typed, flops=flops, traffic=traffic,
                       bodies=tuple(bodies), unsized=unsized, bounded=len(bounded & set(sized)))


def _carried_bytes(node: onnx.NodeProto, body: Graph, inputs: Sequence[str],
                   outputs: Sequence[onnx.ValueInfoProto], types: Mapping[str, TensorType]) -> int | None:
    """The buffers a loop holds beside its body's inputs and outputs (measured, docs/results.md 28): a ``Loop`` holds
    its body's own inputs (trip counter, condition, carried state) as separate buffers from its second iteration on;
    a ``Scan`` double-buffers each state (none for one slice, one for two, two from three on; two where the length
    is unknown), and reads its scanned slices in place.  0 for an ``If``; ``None`` when a carried value's output is
    not the size of its input (it grows over the iterations)."""
    if node.op_type == "If":
        return 0
    ids = {name: i for i, name in enumerate(body.tensor_names)}
    size = [int(body.tensor_bytes[ids[n]]) if n in ids else 0 for n in inputs]
    out = [-1 if o is None else o[0] for o in (_size_in(body, ids.get(vi.name), vi) for vi in outputs)]
    if node.op_type == "Loop":
        pairs = zip(size[2:], out[1:1 + len(size) - 2])
        held = sum(size)
    else:  # Scan: the states
        n_state = len(inputs) - _num_scan_inputs(node)
        pairs = zip(size[:n_state], out[:n_state])
        held = _state_copies(node, inputs, types) * sum(size[:n_state])
    if any(a != b for a, b in pairs):
        return None
    return held


def _state_copies(node: onnx.NodeProto, formal: Sequence[str], types: Mapping[str, TensorType]) -> int:
    """How many copies of its states a ``Scan`` holds: ONNX Runtime double-buffers them, none for one slice, one for
    two, two from three on; opset 8's ``Scan`` does so for each sequence of its batch.  Two where the length (or
    the batch) is unknown."""
    if not _scan8(node, formal):
        length = _scan_length(node, types)
        return 2 if length is None else min(max(length - 1, 0), 2)
    first = _first_scanned(node, types)
    if first is None or first[1] is None or len(first[1]) < 2:
        return 2
    batch, length = first[1][:2]
    return int(batch) * min(max(int(length) - 1, 0), 2)


def _scan8(node: onnx.NodeProto, formal: Sequence[str]) -> bool:
    """Whether a ``Scan`` is opset 8's: its first input is ``sequence_lens``, which its body has no input for, and it
    scans a batch of sequences (axis 1); the sizes here are opset 9's, so the body does not size its outputs."""
    return len(formal) == len(node.input) - 1


def _num_scan_inputs(node: onnx.NodeProto) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 0)


def _ints(node: onnx.NodeProto, name: str, default: list[int]) -> list[int]:
    """The node's ints attribute ``name`` (a ``Scan``'s axes), ``default`` where it has none."""
    return next((list(a.ints) for a in node.attribute if a.name == name), default)


def _first_scanned(node: onnx.NodeProto, types: Mapping[str, TensorType]) -> TensorType | None:
    """The type of a ``Scan``'s first scanned input (its inputs end with the scanned ones), where known."""
    n_scan = _num_scan_inputs(node)
    return types.get(node.input[len(node.input) - n_scan]) if n_scan else None


def _scan_length(node: onnx.NodeProto, types: Mapping[str, TensorType]) -> int | None:
    """How many slices a ``Scan`` runs its body on: its first scanned input's length along its scan axis, where
    that input's shape is known; ``None`` otherwise."""
    first = _first_scanned(node, types)
    if first is None or not first[1]:
        return None
    axes = _ints(node, "scan_input_axes", [0])
    return int(first[1][axes[0] % len(first[1])])


def _loop_copies(node: onnx.NodeProto, fixed: Mapping[str, tuple], types: Mapping[str, TensorType],
                 trips: int | None) -> int:
    """What ONNX Runtime's ``Loop`` holds at its end beside its outputs (measured, docs/results.md 28): the pieces of
    each scan output, one per iteration, until it stacks them into the output; and the last iteration's carried
    values, which it copies into the outputs (after one iteration they are the state :func:`_carried_bytes`
    counts; after none, nothing).  An output the bodies do not size counts at the size its declared type gives."""
    if trips == 0:
        return 0

    def nbytes(name: str) -> int:
        if name in fixed:
            return fixed[name][0]
        elem, shape = types.get(name, (0, None))
        return (tensor_nbytes(elem, shape) or 0) if elem and shape is not None else 0

    n_carried = len(node.input) - 2
    stacked = sum(nbytes(o) for o in node.output[n_carried:] if o)
    copied = sum(nbytes(o) for o in node.output[:n_carried] if o) if trips != 1 else 0
    return stacked + copied


def _scan_copies(node: onnx.NodeProto, fixed: Mapping[str, tuple], types: Mapping[str, TensorType]) -> int:
    """What ONNX Runtime's ``Scan`` holds beside its body and state for scan axes other than 0 (measured,
    docs/results.md 28): a transposed copy of each input scanned along another axis, for the whole run; and each
    output stacked along another axis, built along axis 0 first and transposed into the output at the end."""
    n_state = len(node.input) - _num_scan_inputs(node)
    in_axes, out_axes = _ints(node, "scan_input_axes", []), _ints(node, "scan_output_axes", [])
    held = 0
    for name, axis in zip(node.input[n_state:], in_axes):
        elem, shape = types.get(name, (0, None))
        if elem and shape and axis % len(shape) != 0:
            held += tensor_nbytes(elem, shape) or 0
    for name, axis in zip(node.output[n_state:], out_axes):
        shape = fixed[name][2] if name in fixed else None
        if name in fixed and (axis % len(shape) if shape else axis) != 0:
            held += fixed[name][0]
    return held


def trip_count(node: onnx.NodeProto, constants: Mapping[str, onnx.TensorProto]) -> int | None:
    """A ``Loop``'s trip count ``M`` where it is a constant (an initializer or a ``Constant`` node of the graph
    holding the loop; an initializer also listed as a graph input counts too, though a caller may feed another value):
    the most iterations it runs (its condition may end it sooner); ``None`` otherwise, and for a count over
    :data:`MAX_TRIPS` (PyTorch writes a ``while`` loop as ``M`` = INT64_MAX and a condition).

    >>> from onnx import numpy_helper
    >>> loop = helper.make_node("Loop", ["M", "", "x"], ["y"])
    >>> trip_count(loop, {"M": numpy_helper.from_array(np.array(3, np.int64), "M")})
    3
    >>> trip_count(loop, {}) is None
    True
    """
    if node.op_type != "Loop" or not node.input or node.input[0] not in constants:
        return None
    value = numpy_helper.to_array(constants[node.input[0]]).reshape(-1)
    return int(value[0]) if value.size == 1 and 0 <= value[0] <= MAX_TRIPS else None


def _output_sizes(node: onnx.NodeProto, body: Graph, formal: Sequence[str], declared: Sequence[onnx.ValueInfoProto],
                  types: Mapping[str, TensorType],
                  trips: int | None = None) -> dict[str, tuple[int, str, tuple[int, ...] | None]]:
    """The bytes, dtype and shape (``None`` where the body gives bytes only) of ``node``'s outputs that one of its
    bodies, imported as ``body`` (its inputs ``formal``, its outputs ``declared``; one the body computes from
    constants alone is not in ``body``, and its declared type sizes it), fixes: an ``If``
    output is its branch's output (the node takes the larger branch); a ``Loop``'s final carried values are the
    body's carried outputs (one iteration's size); a ``Scan``'s final states likewise, and a scan output is one
    iteration's times the scanned length, where the first scanned input's shape gives it.  A ``Loop``'s scan output
    is one iteration's times ``trips``, its constant trip count (:func:`trip_count`; bytes only, an upper bound,
    when its condition can end it sooner), and is not sized when the trip count is known only at run time.  A
    carried value (state) keeps a shape only where the body gives it its input's shape: the same bytes in another
    shape (a transpose) say nothing of the shape after several iterations."""
    ids = {name: i for i, name in enumerate(body.tensor_names)}  # a weight of unknown size has 0 bytes there
    outs = [_size_in(body, ids.get(vi.name), vi) for vi in declared]
    n_out = len(node.output)

    def stacked(o: tuple | None, length: int, axis: int = 0) -> tuple | None:
        if o is None:
            return None
        shape = o[2]
        if shape is not None:
            at = axis % (len(shape) + 1)
            shape = (*shape[:at], length, *shape[at:])
        return o[0] * length, o[1], shape

    def carried(o: tuple | None, start: str) -> tuple | None:
        shape = body.tensor_shapes[ids[start]] if start in ids else None
        return o if o is None or o[2] == shape else (o[0], o[1], None)

    if node.op_type == "If":
        pairs = list(zip(node.output, outs))
    elif node.op_type == "Loop":
        n_carried = len(node.input) - 2
        pairs = [(name, carried(o, start)) for name, o, start
                 in zip(node.output[:n_carried], outs[1:1 + n_carried], list(formal)[2:])]
        if trips is not None:
            exact = not (len(node.input) > 1 and node.input[1])  # no condition: it runs the trip count through
            pairs += [(name, stacked(o, trips) if exact or o is None else (o[0] * trips, o[1], None))
                      for name, o in zip(node.output[n_carried:n_out], outs[1 + n_carried:])]
    elif _scan8(node, formal):
        pairs = []
    else:  # Scan
        n_state = len(node.input) - _num_scan_inputs(node)
        pairs = [(name, carried(o, start)) for name, o, start in zip(node.output[:n_state], outs[:n_state], formal)]
        out_axes = _ints(node, "scan_output_axes", [])
        length = _scan_length(node, types)
        if length is not None:
            pairs += [(name, stacked(o, length, out_axes[i] if i < len(out_axes) else 0))
                      for i, (name, o) in enumerate(zip(node.output[n_state:n_out], outs[n_state:]))]
    return {name: o for name, o in pairs if name and o is not None and o[0] >= 0}


def _size_in(body: Graph, tensor: int | None, declared: onnx.ValueInfoProto) -> tuple | None:
    """(bytes, dtype, shape) of a body output: the body's tensor where it sizes it, else its declared type's."""
    if tensor is not None and (body.tensor_bytes[tensor] > 0 or body.tensor_kind[tensor] != TensorKind.WEIGHT):
        return int(body.tensor_bytes[tensor]), body.tensor_dtypes[tensor], body.tensor_shapes[tensor]
    shape = _static(declared.type) if declared.type.HasField("tensor_type") else None
    elem = declared.type.tensor_type.elem_type if shape is not None else 0
    nbytes = tensor_nbytes(elem, shape) if elem else None
    return None if nbytes is None else (nbytes, dtype_name(elem), shape)
