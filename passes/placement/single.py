"""Single-device baselines (paper 004 table 2): everything on the CPU, or on the GPU.

``gpu-only`` uses the first discrete GPU, else the first integrated one; ops the
GPU cannot run (``inf`` time) fall back to the host CPU, as OpenVINO HETERO's
fallback does.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.schedule import Schedule


def single_device(problem, device: int) -> np.ndarray:  # noqa: ANN001
    """All ops on ``device``; ops it cannot run go to the host."""
    p = np.full(problem.graph.n_ops, device, np.int64)
    p[~np.isfinite(problem.op_time[:, device])] = problem.host
    return p


def first_gpu(problem) -> int | None:  # noqa: ANN001
    """Index of the first discrete GPU, else of the first integrated one, else ``None``."""
    for kind in ("dgpu", "igpu"):
        if kind in problem.device_kinds:
            return problem.device_kinds.index(kind)
    return None


def _gpu(problem) -> int:  # noqa: ANN001
    gpu = first_gpu(problem)
    if gpu is None:
        raise ValueError(f"gpu-only: no GPU among devices {list(problem.device_names)} (kinds {list(problem.device_kinds)})")
    return gpu


@register("cpu-only", objective="latency")
def cpu_only(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    return make_placement_schedule(problem, single_device(problem, problem.device_index("cpu")), "cpu-only")


@register("gpu-only", objective="latency")
def gpu_only(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    return make_placement_schedule(problem, single_device(problem, _gpu(problem)), "gpu-only")
