"""ONNX Runtime refusing a user's model, as one line.

Commands that run the model itself (``optimize --ort-graph``, the ``measured``
target) need ONNX Runtime to load it.  A model ORT rejects -- an op from a
domain it does not know, two nodes with one name -- is bad input, not a bug:
:func:`ort_loads` turns ORT's refusal into a
:class:`~onnx_sched.errors.ModelLoadError` that the CLI prints as one line,
with ORT's own reason.

>>> ort_error_line(RuntimeError("[ONNXRuntimeError] : 1 : FAIL : x:Foo is not a registered op\\nmore"))
'x:Foo is not a registered op'
>>> ort_error_line(RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Load model from m.onnx failed:x:Foo is unknown"))
'x:Foo is unknown'
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from onnx_sched.errors import ModelLoadError

__all__ = ["ort_error_line", "ort_loads"]

_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*(Load model from .* failed:\s*)?")


def ort_error_line(exc: BaseException) -> str:
    """The first line of ONNX Runtime's message, without its ``[ONNXRuntimeError] : 1 : FAIL :`` prefix (nor the
    ``Load model from PATH failed:`` that repeats the file the caller names)."""
    text = str(exc).strip().splitlines()
    return _PREFIX.sub("", text[0]) if text else type(exc).__name__


def _ort_errors() -> tuple[type[BaseException], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return tuple(t for t in vars(state).values()
                 if isinstance(t, type) and issubclass(t, Exception) and t.__module__.startswith("onnxruntime"))


@contextlib.contextmanager
def ort_loads(what: str, verb: str = "load") -> Iterator[None]:
    """Run the block that creates ONNX Runtime sessions of ``what`` (a model's name or path), or with ``verb="run"``
    runs them; an error ONNX Runtime raises there becomes ``ModelLoadError("WHAT: ONNX Runtime cannot VERB the
    model: REASON")``."""
    try:
        yield
    except _ort_errors() as exc:
        raise ModelLoadError(f"{what}: ONNX Runtime cannot {verb} the model: {ort_error_line(exc)}") from None
