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

Not :func:`onnx_sched.bench.measure.compare_outputs`, the bitwise check of a
reordered model's outputs saved as ``.npz`` (:func:`npz_outputs` lays them out:
a sequence output is one entry per element, an empty optional one marker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ATOL", "RTOL", "compare_outputs", "npz_entries", "npz_outputs", "output_tolerance", "outputs_informative"]

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


def outputs_informative(ref: Mapping[str, np.ndarray]) -> bool:
    """Whether some float output holds a finite non-zero value (the corpus's zero
    weights make many outputs all-zero or NaN, where equality proves little)."""
    for a in ref.values():
        a = np.asarray(a)
        if a.dtype.kind in "fc" and np.any(np.isfinite(a) & (a != 0)):
            return True
    return False


def compare_outputs(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray],
                    tol: float = RTOL) -> tuple[bool, float]:
    """All outputs equal within ``rtol = atol = tol`` (default 1e-5; NaN == NaN); also the max abs error."""
    ok, worst = True, 0.0
    for name, a in ref.items():
        b = np.asarray(got[name])
        a = np.asarray(a)
        if a.shape != b.shape:
            return False, float("inf")
        if a.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
                ok = False
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.size else 0.0)
        elif not np.array_equal(a, b):
            ok = False
            worst = float("inf")
    return ok, worst
