"""Paper 004's OpenVINO-CPU / OpenVINO-GPU baselines: real runs of OpenVINO's AUTO plugin.

``openvino-auto-cpu-first`` compiles the whole model on ``AUTO:<cpu>,<other devices>`` and
``openvino-auto-gpu-first`` on ``AUTO:<other devices>,<cpu>``; AUTO picks the device
(``ENABLE_STARTUP_FALLBACK`` off, so the steady-state device is what runs).  The placement
returned is every op on the device AUTO reports in ``EXECUTION_DEVICES``, and
``measured_latency_s`` is the AUTO-compiled model timed with paper 004's protocol (10 runs,
mean of the last 5; :class:`~onnx_sched.bench.runtimes.openvino.PlacementTimer`).  Profile
devices map to OpenVINO devices by ``--option run_devices=CPU,CPUB`` (default: the profile's
names).  On a machine with one real device (the CPU plugin registered twice as ``CPU`` and
``CPUB``), AUTO chooses between two names of the same CPU.  They need the model
(``PassContext.source``); the modelled stand-ins without a run are ``auto-cpu-first`` /
``auto-gpu-first``.
"""

from __future__ import annotations

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.passes.placement.single import single_device
from onnx_sched.schedule import Schedule


def run_auto(graph: Graph, ctx: PassContext, cpu_first: bool) -> Schedule:
    """Compile on AUTO with the CPU first or last, time it, and report the device AUTO chose."""
    from onnx_sched.bench.runtimes.openvino import PlacementTimer
    from onnx_sched.devices import openvino_core
    from onnx_sched.passes.placement._measured import run_devices_for

    problem = problem_of(graph, ctx)
    method = "openvino-auto-cpu-first" if cpu_first else "openvino-auto-gpu-first"
    if ctx.option("warm_up", False):  # the objective's warm-up instance: nothing to run
        return make_placement_schedule(problem, single_device(problem, problem.host), method)
    if ctx.source is None:
        raise ValueError(f"{method} runs OpenVINO's AUTO plugin: it needs the imported model (PassContext.source)")
    devices = run_devices_for(problem, ctx.option("run_devices", None), list(openvino_core().available_devices),
                              method)
    host = devices[problem.host]
    others = [d for i, d in enumerate(devices) if i != problem.host]
    target = "AUTO:" + ",".join([host, *others] if cpu_first else [*others, host])
    timer = PlacementTimer(ctx.source, devices, seed=ctx.seed)
    timer.core.set_property("AUTO", {"ENABLE_STARTUP_FALLBACK": False})
    report = timer.time_device(target)
    chosen = [d for d in report["execution_devices"] if d in devices]
    if len(chosen) != 1:
        raise ValueError(f"{method}: AUTO ran on {report['execution_devices']}, expected one of {devices}")
    placement = single_device(problem, devices.index(chosen[0]))
    return make_placement_schedule(problem, placement, method, measured_latency_s=report["seconds"], auto_target=target,
                                   auto_device=chosen[0])


@register("openvino-auto-cpu-first", objective="latency")
def cpu_first(graph: Graph, ctx: PassContext) -> Schedule:
    return run_auto(graph, ctx, True)


@register("openvino-auto-gpu-first", objective="latency")
def gpu_first(graph: Graph, ctx: PassContext) -> Schedule:
    return run_auto(graph, ctx, False)


__all__ = ["cpu_first", "gpu_first", "run_auto"]
