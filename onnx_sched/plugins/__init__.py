"""Thin wrappers that expose :func:`onnx_sched.api.optimize` to other frameworks.

- :mod:`onnx_sched.plugins.onnx_ir_pass`: ``OnnxSchedPass``, an ``onnx_ir`` in-place pass.
- :mod:`onnx_sched.plugins.olive_pass`: ``OnnxSchedOlivePass``, an Olive pass (needs ``olive-ai``).

Submodules are imported on demand so that a missing optional framework never
breaks ``import onnx_sched``.
"""
