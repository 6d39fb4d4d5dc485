"""Paper 004's table-3 ablations of HSDAG as ``latency`` passes: node features removed.

``hsdag-no-shape`` (no output shape), ``hsdag-no-node-id`` (no topological-position
encoding) and ``hsdag-no-structural`` (no in/out degree, no fractal dimension): the
``hsdag`` pass with those feature columns zeroed in every round-0 forward pass, episodes and
weight updates included.  Unlike the paper, the network is not retrained without the
features: all variants start from the one shipped checkpoint (trained with them), and the
per-graph episodes adapt it.
"""

from __future__ import annotations

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._hsdag_run import run_hsdag
from onnx_sched.schedule import Schedule


@register("hsdag-no-shape", objective="latency")
def no_shape(graph: Graph, ctx: PassContext) -> Schedule:
    return run_hsdag(graph, ctx, "hsdag-no-shape", ("output_shape",))


@register("hsdag-no-node-id", objective="latency")
def no_node_id(graph: Graph, ctx: PassContext) -> Schedule:
    return run_hsdag(graph, ctx, "hsdag-no-node-id", ("node_id",))


@register("hsdag-no-structural", objective="latency")
def no_structural(graph: Graph, ctx: PassContext) -> Schedule:
    return run_hsdag(graph, ctx, "hsdag-no-structural", ("structural",))


__all__ = ["no_node_id", "no_shape", "no_structural"]
