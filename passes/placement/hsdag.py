"""HSDAG learned placer (paper 004) as the ``latency`` pass ``hsdag``.

Runs paper 004's per-graph episodes (:mod:`onnx_sched.models.inference.hsdag_search`,
numpy, no torch): grouping rounds on the co-location graph with the pooled graph
``A' = X^T A X``, one device per group mapped back through ``X``, the state update
``Z_v + Z_v'``, and REINFORCE with the discounted buffer that updates the network's
weights (table 4: 100 episodes, update_timestep 20, K_epochs 4, lr 1e-4, edge dropout 0.2).
The reward is ``1 / latency``: modelled by default, or measured on OpenVINO with
``--option reward=measured`` (:mod:`onnx_sched.passes.placement._measured`).  The
single-device placements are candidates too, so the result is never worse than them (under
the latency that judged it).  Options: :mod:`onnx_sched.passes.placement._hsdag_run`.
Fails with a clear message when the checkpoint files are missing.
"""

from __future__ import annotations

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._hsdag_run import run_hsdag
from onnx_sched.schedule import Schedule


@register("hsdag", objective="latency")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return run_hsdag(graph, ctx, "hsdag")
