"""HSDAG learned placer (paper 004) as the ``latency`` pass ``hsdag``.

Runs the trained policy (:mod:`onnx_sched.models.inference.hsdag`: co-location coarsening,
GCN + graph-parsing grouping, MLP placer head; ONNX Runtime, no torch), then runs
REINFORCE episodes on this problem (reward ``1 / latency`` under the problem's
latency model) that move only the network's output logits, starting from them.
Paper 004's per-graph episodes update the network's weights; here the weights, the
groups and the embeddings stay fixed.  Options: ``samples`` (draws per episode,
default 16), ``episodes`` (default 100; 0 = best of the greedy placement and one
batch of draws, the network alone), ``temperature`` (default 3, exploration of
the first episodes).  The search stops at the pass time limit.  The greedy
placement of the network is the first candidate, so the result is never worse
than it.  Fails with a clear message when the checkpoint files are missing.
"""

from __future__ import annotations

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._common import make_placement_schedule, problem_of
from onnx_sched.schedule import Schedule

_PLACER = None


def _placer():  # noqa: ANN202
    global _PLACER
    if _PLACER is None:
        from onnx_sched.models.inference.hsdag import HsdagPlacer

        try:
            _PLACER = HsdagPlacer()
        except FileNotFoundError as exc:
            raise ValueError(str(exc)) from None
    return _PLACER


@register("hsdag", objective="latency")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    placement, info = _placer().place(problem, samples=int(ctx.option("samples", 16)), seed=ctx.seed,
                                      episodes=int(ctx.option("episodes", 100)),
                                      temperature=float(ctx.option("temperature", 3.0)), time_limit=ctx.time_limit)
    return make_placement_schedule(problem, placement, "hsdag", **info)
