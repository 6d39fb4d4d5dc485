"""Placement passes (objective ``latency``): one device per op, scored by :mod:`onnx_sched.cost.latency`."""
