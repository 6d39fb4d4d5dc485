"""Output comparison for the runtime benches: does a placed run compute what one device does?

:func:`compare_outputs` checks a placed run's outputs against single-device
execution of the same runtime within ``rtol = atol = 1e-5`` (:data:`RTOL`,
:data:`ATOL`), NaN equal to NaN (corpus weights are zeros, some outputs are NaN);
:func:`outputs_informative` says whether the reference holds a finite non-zero
value at all, i.e. whether that equality means something.

Not :func:`onnx_sched.bench.measure.compare_outputs`, the bitwise check of a
reordered model's outputs saved as ``.npz``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["ATOL", "RTOL", "compare_outputs", "outputs_informative"]

RTOL = ATOL = 1e-5


def outputs_informative(ref: Mapping[str, np.ndarray]) -> bool:
    """Whether some float output holds a finite non-zero value (the corpus's zero
    weights make many outputs all-zero or NaN, where equality proves little)."""
    for a in ref.values():
        a = np.asarray(a)
        if a.dtype.kind in "fc" and np.any(np.isfinite(a) & (a != 0)):
            return True
    return False


def compare_outputs(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> tuple[bool, float]:
    """All outputs equal within ``rtol = atol = 1e-5`` (NaN == NaN); also the max abs error."""
    ok, worst = True, 0.0
    for name, a in ref.items():
        b = np.asarray(got[name])
        a = np.asarray(a)
        if a.shape != b.shape:
            return False, float("inf")
        if a.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                ok = False
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.size else 0.0)
        elif not np.array_equal(a, b):
            ok = False
            worst = float("inf")
    return ok, worst
