"""Output comparison for the runtime benches: does a placed run compute what one device does?

:func:`compare_outputs` checks a placed run's outputs against single-device
execution of the same runtime within ``rtol = atol = 1e-5`` (:data:`RTOL`,
:data:`ATOL`), NaN equal to NaN (corpus weights are zeros, some outputs are NaN);
:func:`outputs_informative` says whether the reference holds a finite non-zero
value at all, i.e. whether that equality means something.  A model that computes
in a narrower float type is compared within :func:`output_tolerance` instead: ONNX
Runtime's CPU kernels lack most float16 / bfloat16 ops and each session inserts
casts around them, so where a split falls decides which intermediate values get
rounded to the narrow type.

Outputs an unseeded random op feeds (:func:`random_outputs`) are left out of every
comparison: ONNX Runtime seeds such an op per process and its draws follow the order
ops run in, so they differ between any two runs of a reordered or split model.

Not :func:`onnx_sched.bench.measure.compare_outputs`, the bitwise check of a
reordered model's outputs saved as ``.npz`` (:func:`npz_outputs` lays them out:
a sequence output is one entry per element, an empty optional one marker).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ATOL", "RTOL", "compare_outputs", "npz_entries", "npz_outputs", "output_pairs", "output_tolerance",
           "outputs_informative", "random_outputs"]

RTOL = ATOL = 1e-5

#: rtol = atol per float element type (a few units in the last place: the check is for a wrong result, not rounding)
_NARROW_FLOAT_TOLERANCE = {"FLOAT16": 5e-3, "BFLOAT16": 5e-2, "FLOAT8E4M3FN": 0.25, "FLOAT8E4M3FNUZ": 0.25,
                           "FLOAT8E5M2": 0.5, "FLOAT8E5M2FNUZ": 0.5, "FLOAT8E8M0": 0.5, "FLOAT4E2M1": 0.5}


def npz_outputs(values: Sequence[Any]) -> dict[str, np.ndarray]:
    """The ``.npz`` entries of one run's outputs, in order: a tensor as ``o{i}``; a sequence (a list) as ``o{i}.len``
    and ``o{i}.{j}`` per element; an empty optional (``None``) as ``o{i}.none``.  String tensors are written as
    fixed-width unicode, so loading needs no pickle.

    >>> sorted(npz_outputs([np.zeros(2), [np.ones(1), np.ones(3)], None]))
    ['o0', 'o1.0', 'o1.1', 'o1.len', 'o2.none']
    """
    def array(value: Any) -> np.ndarray:
        value = np.asarray(value)
        return value.astype(np.str_) if value.dtype == object else value

    out: dict[str, np.ndarray] = {}
    for i, value in enumerate(values):
        if value is None:
            out[f"o{i}.none"] = np.zeros(0)
        elif isinstance(value, list):
            out[f"o{i}.len"] = np.asarray(len(value))
            out.update((f"o{i}.{j}", array(v)) for j, v in enumerate(value))
        else:
            out[f"o{i}"] = array(value)
    return out


def npz_entries(files: Sequence[str], i: int) -> list[str]:
    """The ``.npz`` keys :func:`npz_outputs` wrote for output ``i``, sorted."""
    return sorted(k for k in files if k == f"o{i}" or k.startswith(f"o{i}."))


def output_tolerance(model: Any) -> float:
    """``rtol = atol`` for two ONNX Runtime runs of ``model`` (``ModelProto``) split differently: :data:`RTOL`,
    or the tolerance of the narrowest float type the model names (inputs, outputs, value infos, initializers,
    ``Cast`` targets).

    >>> from onnx import TensorProto, helper
    >>> node = helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)
    >>> output_tolerance(helper.make_model(helper.make_graph([node], "g", [], [])))
    0.005
    """
    from onnx import TensorProto

    narrow = {getattr(TensorProto, t): tol for t, tol in _NARROW_FLOAT_TOLERANCE.items() if hasattr(TensorProto, t)}
    g = model.graph
    types = {vi.type.tensor_type.elem_type for vi in [*g.input, *g.output, *g.value_info]}
    types |= {t.data_type for t in g.initializer}
    types |= {a.i for n in g.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"}
    return max([RTOL, *(narrow[t] for t in types if t in narrow)])


def outputs_informative(ref: Mapping[str, Any]) -> bool:
    """Whether some float output (or sequence element) holds a finite non-zero value (the corpus's zero weights
    make many outputs all-zero or NaN, where equality proves little)."""
    for value in ref.values():
        for a in _elements(value):
            a = np.asarray(a) if a is not None else np.zeros(0)
            if a.dtype.kind in "fc" and np.any(np.isfinite(a) & (a != 0)):
                return True
    return False


def output_pairs(ref: Mapping[str, Any], got: Mapping[str, Any],
                 unchecked: Collection[str] = ()) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The tensors to compare, output by output but ``unchecked``: a tensor with its counterpart, a sequence (a list)
    element by element; ``None`` when the two differ in kind (tensor, sequence, empty optional) or length.

    >>> len(output_pairs({"s": [np.ones(2), np.zeros(3)], "o": None}, {"s": [np.ones(2), np.zeros(3)], "o": None}))
    2
    >>> output_pairs({"s": [np.ones(2)]}, {"s": np.ones(2)}) is None
    True
    """
    pairs = []
    for name, a in ref.items():
        if name in unchecked:
            continue
        b = got[name]
        if isinstance(a, list) != isinstance(b, list) or (a is None) != (b is None):
            return None
        xs, ys = _elements(a), _elements(b)
        if len(xs) != len(ys):
            return None
        pairs += [(np.asarray(x), np.asarray(y)) for x, y in zip(xs, ys) if x is not None]
    return pairs


def compare_outputs(ref: Mapping[str, Any], got: Mapping[str, Any], tol: float = RTOL,
                    unchecked: Collection[str] = (), atol: float | None = None,
                    scaled: bool = False) -> tuple[bool, float]:
    """All outputs but ``unchecked`` equal within ``rtol = tol`` and ``atol`` (default: ``tol``; 1e-5 both by
    default; NaN == NaN; exact for non-floats); also the max abs error.  Sequences and empty optionals as
    :func:`output_pairs` pairs them.  ``scaled``: ``atol`` is a share of each output's largest magnitude (at least
    1), for runs whose kernels sum in another order (torch, CUDA): their error grows with the magnitudes summed,
    so an element near zero of a large output can miss a per-element tolerance by rounding alone.

    >>> compare_outputs({"s": [np.ones(2), np.zeros(3)], "o": None}, {"s": [np.ones(2), np.zeros(3)], "o": None})
    (True, 0.0)
    >>> compare_outputs({"s": [np.ones(2)]}, {"s": [np.ones(2), np.ones(2)]})
    (False, inf)
    >>> big = {"y": np.array([1000.0, 0.0])}
    >>> [compare_outputs(big, {"y": np.array([1000.0, 1e-3])}, 1e-4, scaled=s)[0] for s in (False, True)]
    [False, True]
    """
    pairs = output_pairs(ref, got, unchecked)
    if pairs is None:
        return False, float("inf")
    ok, worst = True, 0.0
    for a, b in pairs:
        if a.shape != b.shape:
            return False, float("inf")
        if a.dtype.kind in "fc":
            a_tol = tol if atol is None else atol
            if scaled:
                finite_a = np.abs(a[np.isfinite(a)])
                a_tol *= max(1.0, float(finite_a.max()) if finite_a.size else 1.0)
            if not np.allclose(a, b, rtol=tol, atol=a_tol, equal_nan=True):
                ok = False
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.size else 0.0)
        elif not np.array_equal(a, b):
            ok = False
            worst = float("inf")
    return ok, worst


def _elements(value: Any) -> list[Any]:
    """A sequence output's elements; ``[None]`` for an empty optional; ``[value]`` for a tensor."""
    return list(value) if isinstance(value, list) else [value]


def random_outputs(model: Any) -> frozenset[str]:
    """Graph outputs of ``model`` (an ONNX ``ModelProto``; an OpenVINO model's random ops are not looked for: none)
    that an unseeded random op feeds, directly, through other ops or from inside a subgraph or a model-local
    function: their values differ between runs of the same model in two processes, and between two orders of its
    ops in one, so no equality check applies to them.  A random op with a ``seed`` draws the same values in every
    run order; ``Dropout`` draws only with a ``training_mode`` input.

    >>> from onnx import TensorProto, helper
    >>> nodes = [helper.make_node("RandomUniformLike", ["x"], ["u"]), helper.make_node("Add", ["x", "u"], ["y"]),
    ...          helper.make_node("RandomNormalLike", ["x"], ["n"], seed=1.0), helper.make_node("Relu", ["x"], ["r"])]
    >>> outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("y", "n", "r")]
    >>> graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], outs)
    >>> sorted(random_outputs(helper.make_model(graph)))
    ['y']
    """
    import onnx

    from onnx_sched.importers.onnx import RANDOM_OPS

    if not isinstance(model, onnx.ModelProto):
        return frozenset()

    def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
        return [g for a in node.attribute for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs)]

    functions = {(f.domain, f.name): f for f in model.functions}

    def draws(node: onnx.NodeProto) -> bool:
        random = node.op_type in RANDOM_OPS or (node.op_type == "Dropout" and len(node.input) > 2 and node.input[2])
        if random and node.domain in ("", "ai.onnx"):
            return not any(a.name == "seed" for a in node.attribute)
        body = functions.get((node.domain, node.op_type))  # a call of a model-local function
        inner = [*(n for g in subgraphs(node) for n in g.node), *(body.node if body is not None else ())]
        return any(draws(n) for n in inner)

    def reads(node: onnx.NodeProto) -> set[str]:  # its inputs and every name its subgraphs' nodes read
        return {*node.input, *(x for g in subgraphs(node) for n in g.node for x in reads(n))}

    nodes = [(n, reads(n)) for n in model.graph.node]
    tainted = {o for n, _ in nodes if draws(n) for o in n.output if o}
    grown = bool(tainted)
    while grown:  # a fixed point: the nodes need not be in topological order
        before = len(tainted)
        tainted.update(o for n, names in nodes if names & tainted for o in n.output if o)
        grown = len(tainted) > before
    return frozenset(o.name for o in model.graph.output if o.name in tainted)
