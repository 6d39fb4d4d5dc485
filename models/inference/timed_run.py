"""Run an ONNX Runtime session that must end by a deadline.

A learned encoder attends over every pair of ops, so its one forward pass grows
with the square of the graph (5-8 s at 8,400 ops on this 2-core machine) and cannot
check a clock between layers the way the search loops do.  ONNX Runtime can be
told to stop from outside: :func:`run_by` arms a timer that sets the run's
``RunOptions.terminate`` when the deadline passes, and turns the aborted run into
:class:`~onnx_sched.errors.TimeLimitError` (one line from the CLI).  A portfolio
(``auto``) catches it and goes on without the learned candidate; a pass named
explicitly reports it, since no result of that method exists within the limit.

Example:
    >>> from onnx_sched.deadline import Deadline
    >>> from onnx_sched.errors import TimeLimitError
    >>> try:
    ...     run_by(None, [], {}, Deadline(0.0), "learned", 10)
    ... except TimeLimitError as exc:
    ...     print(exc)
    learned: no time to run the encoder over 10 ops in the 0 s the time limit left it; raise --time-limit ...
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from onnx_sched.deadline import Deadline
from onnx_sched.errors import TimeLimitError

__all__ = ["run_by"]


def _message(method: str, n_ops: int, deadline: Deadline, stopped: bool) -> str:
    what = f"the encoder over {n_ops} ops did not finish" if stopped else f"no time to run the encoder over {n_ops} ops"
    return (f"{method}: {what} in the {max(deadline.seconds, 0.0):.3g} s the time limit left it; "
            "raise --time-limit or use --method auto")


def run_by(session: Any, outputs: Sequence[str] | None, feeds: Mapping[str, Any], deadline: Deadline | None,
           method: str, n_ops: int) -> list[Any]:
    """``session.run(outputs, feeds)``, stopped when ``deadline`` passes (``None``: no limit).

    Raises :class:`~onnx_sched.errors.TimeLimitError` naming ``method`` and ``n_ops`` when the deadline has
    passed before the run or the run was stopped by it; any other failure of the run propagates unchanged.
    """
    if deadline is None:
        return session.run(outputs, dict(feeds))
    left = deadline.left()
    if left <= 0:
        raise TimeLimitError(_message(method, n_ops, deadline, stopped=False))
    import onnxruntime as ort

    options = ort.RunOptions()
    timer = threading.Timer(left, setattr, (options, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        return session.run(outputs, dict(feeds), options)
    except Exception:
        if options.terminate:  # ORT's own "Exiting due to terminate flag" failure
            raise TimeLimitError(_message(method, n_ops, deadline, stopped=True)) from None
        raise
    finally:
        timer.cancel()
