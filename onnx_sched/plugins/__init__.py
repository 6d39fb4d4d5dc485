"""Thin wrappers that expose :func:`onnx_sched.api.optimize` to other frameworks.

- :mod:`onnx_sched.plugins.onnx_ir_pass`: ``OnnxSchedPass``, an ``onnx_ir`` in-place pass.
- :mod:`onnx_sched.plugins.olive_pass`: ``OnnxSchedOlivePass``, an Olive pass (needs ``olive-ai``).
- :mod:`onnx_sched.plugins.openvino_pass`: ``OnnxSchedOpenVINOPass``, an OpenVINO ``ModelPass``
  that schedules an in-memory ``ov.Model`` (needs ``openvino``).
- :mod:`onnx_sched.plugins.openvino_affinity`: ``ApplyAffinity`` (an OpenVINO ``ModelPass``) and
  ``read_placed_model``: apply a stored placement as HETERO affinities.

Submodules are imported on demand so that a missing optional framework never
breaks ``import onnx_sched``.
"""
