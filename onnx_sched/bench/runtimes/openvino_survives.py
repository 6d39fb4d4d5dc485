"""Whether OpenVINO survives a model: one compile and run in a child process before a command compiles it in its own.

OpenVINO kills the process on some valid models (SIGSEGV in its CPU plugin; seen on a ``Scan`` inside a ``Loop``,
``tests/data/openvino_crashes.onnx``).  ``bench`` runs every model in a child of its own already
(:mod:`onnx_sched.bench.runtimes.openvino_runner`); ``profile`` and ``bench-placement`` compile in their own
process, where such a crash would end the command with no word.  They call :func:`survives_openvino` first.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.bench.runtimes.fresh_process import run_runner
from onnx_sched.errors import OnnxSchedError, RuntimeCrashError

__all__ = ["survives_openvino"]


def survives_openvino(imported: Any, feed: Mapping[str, np.ndarray], devices: Sequence[str]) -> None:
    """Compile and run the model file of ``imported`` once on OpenVINO's CPU in a child process (``bench``'s runner,
    on ``feed``) when ``devices`` include a CPU: a crash there is one line
    (:class:`~onnx_sched.errors.RuntimeCrashError`).  Any other failure there (inputs pinned to other shapes than
    the file's) is left to the caller's own compile to report; a model held in memory is not checked."""
    if getattr(imported, "path", None) is None or not any(d.startswith("CPU") for d in devices):
        return
    with tempfile.TemporaryDirectory(prefix="onnx_sched_openvino_") as tmp:
        inputs = Path(tmp) / "inputs.npz"
        np.savez(inputs, **feed)
        try:
            run_runner("onnx_sched.bench.runtimes.openvino_runner", "OpenVINO", imported.path, inputs, repeats=1,
                       warmup=0, threads=1)
        except RuntimeCrashError:
            raise
        except OnnxSchedError:
            pass
