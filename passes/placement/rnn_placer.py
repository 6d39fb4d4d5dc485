"""The RNN (seq2seq LSTM) placer of Mirhoseini et al. 2017, paper 004's section 3.3 baseline, as the ``latency`` pass ``rnn-placer``.

An LSTM encoder reads the co-location sets in topological order, an attentional LSTM
decoder emits a device per set (:mod:`~onnx_sched.models.inference.lstm_placer`, numpy
forward and backward through time, no torch); the weights start fresh from the seed and
are trained on this graph by REINFORCE on HSDAG's reward
(:mod:`~onnx_sched.models.inference.lstm_search`).  Options as for ``placeto``
(:mod:`~onnx_sched.passes.placement.placeto`), plus ``hidden`` (32; the paper used 256,
kept small so the episodes fit seconds of budget).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement.placeto import run_learned_placer
from onnx_sched.schedule import Schedule


@register("rnn-placer", objective="latency")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    from onnx_sched.models.inference.lstm_search import RnnPolicy

    hidden = int(ctx.option("hidden", 32))
    if hidden < 1:
        raise ValueError(f"rnn-placer: hidden must be >= 1, got {hidden}")

    def make(problem: lat.PlacementProblem) -> Any:
        return RnnPolicy(problem, hidden, np.random.default_rng([ctx.seed, 1]))

    return run_learned_placer(graph, ctx, "rnn-placer", make, lr=1e-2)
