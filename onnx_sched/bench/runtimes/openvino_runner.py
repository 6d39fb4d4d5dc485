"""Run one model in OpenVINO (CPU, f32) and print one JSON line of measurements.

The OpenVINO counterpart of :mod:`onnx_sched.bench.ort_runner`, for
``onnx-sched bench IN [OUT] --runtime openvino``: meant to run in a *fresh*
process (``python -m onnx_sched.bench.runtimes.openvino_runner``) so that peak RSS
reflects only this model; :mod:`onnx_sched.bench.measure` starts it on the same
seeded inputs as the ORT path and compares the outputs.  Not
:mod:`onnx_sched.bench.runtimes.openvino`, which times device *placements*
(``HETERO``).  What every runner shares is in
:mod:`onnx_sched.bench.runtimes.fresh_process`.

The model is an ONNX file, read with
:func:`~onnx_sched.exporters.openvino.read_onnx_into_openvino` (legalization,
one-line errors), or an OpenVINO IR ``.xml``
(:mod:`~onnx_sched.bench.runtimes.openvino_model`).  It is compiled on ``CPU`` with
``INFERENCE_PRECISION_HINT=f32`` (the plugin would otherwise pick bf16 on AMX
hardware), no dynamic quantization (:func:`~onnx_sched.devices.exact_f32`) and
``INFERENCE_NUM_THREADS`` = ``--threads``.  Measured:

* ``compile_s``: ``compile_model`` + ``create_infer_request`` (also stored as
  ``session_create_s``, the slot of ORT's session creation);
* ``peak_rss_delta``: the RSS high-water mark during compile, warm-up and timed
  runs minus the RSS just before compile (model read, inputs loaded, the CPU
  plugin library loaded: about 8 MB that no order changes).  The plugin plans
  and allocates its intermediate buffers while compiling, so the window opens
  before compile; ``rss_after_compile`` tells the two parts apart;
* latency: median / p90 of the timed ``infer`` calls after the warm-up;
* with ``--heap``, the model is compiled a second time under the heap tracker
  (:func:`onnx_sched.bench.heap.heap_fields`): ``heap_reserved_bytes`` is the
  live heap peak from ``compile_model`` through the warm-up and one more
  inference (the plugin allocates its intermediate buffers while compiling),
  ``heap_peak_bytes`` what that one inference allocates on top.

OpenVINO transforms, fuses and orders the graph itself, so the operator order of
the file need not be the order it executes: the numbers say what OpenVINO does
with each file.

Usage::

    python -m onnx_sched.bench.runtimes.openvino_runner MODEL INPUTS.npz --outputs OUT.npz \\
        [--repeats 10] [--warmup 2] [--threads 1] [--heap]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onnx_sched.bench.heap import heap_fields
from onnx_sched.bench.runtimes.fresh_process import PeakRssWindow, latency_fields, rss, runner_main, runner_parser
from onnx_sched.bench.timing import time_calls
from onnx_sched.errors import OnnxSchedError, last_line

__all__ = ["DEVICE", "PRECISION", "main", "run_measurement"]

DEVICE = "CPU"
PRECISION = "f32"
#: Properties of the compiled model copied into the report (what OpenVINO really chose).
_REPORTED_PROPERTIES = ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS", "NUM_STREAMS", "PERFORMANCE_HINT",
                        "EXECUTION_DEVICES")


def run_measurement(
    model_path: str, inputs: Mapping[str, np.ndarray], *, repeats: int, warmup: int, threads: int = 1,
    heap: bool = False,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read, compile on CPU (f32), warm up, time ``repeats`` inferences; return (report, outputs).

    ``heap``: also measure live heap bytes of a second compile and its inferences."""
    import openvino as ov

    from onnx_sched.bench.runtimes.openvino import ov_inputs
    from onnx_sched.bench.runtimes.openvino_model import read_model
    from onnx_sched.devices import exact_f32, openvino_core

    if repeats < 1 or warmup < 0 or threads < 1:
        raise ValueError(f"repeats and threads must be >= 1 and warmup >= 0, got {repeats}, {threads}, {warmup}")
    model, onnx_names = read_model(model_path)
    core = openvino_core()
    config = {**exact_f32(core, DEVICE), "INFERENCE_NUM_THREADS": threads}  # PRECISION and no dynamic quantization
    device_name = str(core.get_property(DEVICE, "FULL_DEVICE_NAME"))  # loads the plugin outside the window
    with PeakRssWindow() as mem:
        t0 = time.perf_counter()
        try:
            compiled = core.compile_model(model, DEVICE, config)
        except RuntimeError as exc:
            raise OnnxSchedError(f"OpenVINO cannot compile {model_path} on {DEVICE}: {last_line(exc)}") from exc
        request = compiled.create_infer_request()
        compile_s = time.perf_counter() - t0
        rss_after_compile = rss()
        feed = ov_inputs(compiled, inputs)
        times, _ = time_calls(lambda: request.infer(feed, share_inputs=True, share_outputs=True), warmup, repeats)
    ports = list(compiled.outputs)
    # OpenVINO keeps the ONNX output order; an IR has no ONNX names, so take the port's.
    names = onnx_names if onnx_names and len(onnx_names) == len(ports) else [p.get_any_name() for p in ports]
    outputs = {n: np.array(request.get_output_tensor(i).data) for i, n in enumerate(names)}
    properties: dict[str, str] = {}
    for key in _REPORTED_PROPERTIES:
        try:
            value = compiled.get_property(key)
        except RuntimeError:  # not every plugin version exposes every key
            continue
        properties[key] = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    report: dict[str, Any] = {
        "model": model_path,
        "runtime": "openvino",
        "openvino_version": ov.get_version(),
        "device": DEVICE,
        "device_name": device_name,
        "properties": properties,
        "arena": None,  # ORT-only settings: no counterpart here
        "opt_level": None,
        "threads": threads,
        "repeats": repeats,
        "warmup": warmup,
        "compile_s": compile_s,
        "session_create_s": compile_s,
        "rss_after_compile": rss_after_compile,
        **mem.fields(),
        **latency_fields(times),
        "outputs": names,
        "output_tensor_names": [sorted(p.get_names()) for p in ports],
    }
    if heap:
        report.update(_heap_fields(core, model, config, inputs, warmup))
    return report, outputs


def _heap_fields(core: Any, model: Any, config: Mapping[str, Any], inputs: Mapping[str, np.ndarray],
                 warmup: int) -> dict[str, Any]:
    """Heap fields of a second compile of ``model`` and its inferences (the tracker slows them down)."""
    from onnx_sched.bench.runtimes.openvino import ov_inputs

    held: dict[str, Any] = {}

    def setup() -> None:
        compiled = core.compile_model(model, DEVICE, config)
        held["request"], held["feed"] = compiled.create_infer_request(), ov_inputs(compiled, inputs)
        held["compiled"] = compiled

    return heap_fields(lambda: held["request"].infer(held["feed"], share_inputs=True, share_outputs=True),
                       warmup, setup=setup)


def main(argv: Sequence[str] | None = None) -> int:
    parser = runner_parser("python -m onnx_sched.bench.runtimes.openvino_runner", __doc__)
    parser.add_argument("--heap", action="store_true", help="also measure live heap bytes (memray)")
    return runner_main(
        parser,
        lambda args, inputs: run_measurement(
            args.model, inputs, repeats=args.repeats, warmup=args.warmup, threads=args.threads, heap=args.heap
        ),
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
