"""Errors that the CLI turns into one line on stderr and a non-zero exit."""

from __future__ import annotations

__all__ = [
    "DeviceError", "ModelLoadError", "NothingToScheduleError", "OnnxSchedError", "RuntimeCrashError", "TimeLimitError",
    "TooLargeError", "UnknownOpError", "UnknownShapeError", "first_line", "last_line",
]


def first_line(exc: BaseException, limit: int | None = 300) -> str:
    """The first line of ``exc``'s message (at most ``limit`` characters), or its type's name when it has none:
    what a one-line error quotes of a library's multi-line one.

    >>> first_line(RuntimeError("bad input\\nat frame 3")), first_line(KeyError())
    ('bad input', 'KeyError')
    """
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def last_line(exc: BaseException, limit: int = 300) -> str:
    """The last line of ``exc``'s message (at most ``limit`` characters), or its type's name: OpenVINO puts its
    reason there, after the source locations of its checks.

    >>> last_line(RuntimeError("Exception from src/core.cpp:117:\\nUnsupported operation of type: Convert"))
    'Unsupported operation of type: Convert'
    """
    lines = str(exc).strip().splitlines()
    return lines[-1].strip()[:limit] if lines else type(exc).__name__


class OnnxSchedError(Exception):
    """A problem with the user's input, reported without a traceback."""


class RuntimeCrashError(OnnxSchedError):
    """A runtime killed the process it ran a model in (a signal: SIGSEGV, SIGABRT), in its own code."""


class ModelLoadError(OnnxSchedError):
    """The model file is missing, unreadable or not a valid model."""


class UnknownShapeError(OnnxSchedError):
    """Some tensor sizes could not be inferred; the message lists them."""


class UnknownOpError(OnnxSchedError):
    """An op type no registered opset defines."""


class DeviceError(OnnxSchedError):
    """A device was asked for that this machine does not have."""


class TooLargeError(OnnxSchedError):
    """The graph is too large for the method asked for on this machine (a learned encoder's memory)."""


class TimeLimitError(OnnxSchedError):
    """The method asked for cannot give a result within ``--time-limit`` (a learned encoder's one forward pass
    on a large graph); ``auto`` goes on without it."""


class NothingToScheduleError(OnnxSchedError, ValueError):
    """The model has no operators to order or place (its outputs are inputs or constants).  The CLI
    reports it; pipeline passes (onnx_ir, OpenVINO, Olive) hand such a model back unchanged."""
