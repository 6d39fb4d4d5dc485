"""Run models for real, one module per runtime and job.

Whole models in a fresh process (``onnx-sched bench``): :mod:`.fresh_process` (what
every runner shares: subprocess, peak RSS window, latency fields),
:mod:`onnx_sched.bench.ort_runner` and :mod:`.openvino_runner` (one per runtime),
:mod:`.openvino_model` (ONNX or IR into OpenVINO) and :mod:`.ort_graph` (ONNX
Runtime's own optimized graph as a file).

Placed models (``onnx-sched bench-placement``): each bench takes an imported model, a device index per op and the runtime's
devices, runs warm-ups then ``repeats`` timed inferences, and reports median and
p90 latency (``split``, ``single_device``), busy time per device, the number of
sub-models, and whether the outputs equal single-device execution of the same
runtime.

* :mod:`onnx_sched.bench.runtimes.ort`: ONNX Runtime, through the split executor
  (:mod:`onnx_sched.bench.split_executor`), one session per part; parts on a
  torch device (``cuda:N``, ``torch:cpu``) run through
  :mod:`onnx_sched.bench.runtimes.torch_parts` (PyTorch via onnx2torch; torch is
  imported only for such a device);
* :mod:`onnx_sched.bench.runtimes.openvino`: OpenVINO ``HETERO``.

What does not depend on the runtime lies beside this package:
:mod:`onnx_sched.bench.placement_file` (placement files),
:mod:`onnx_sched.bench.weights` (weights for stripped models),
:mod:`onnx_sched.bench.outputs` (output comparison) and
:mod:`onnx_sched.bench.timing` (timed calls).  Each bench imports its runtime
when called, so importing these modules needs neither runtime installed.
"""
