"""The RNN placer's per-graph policy (Mirhoseini et al. 2017): the seq2seq LSTM over the ops in topological order.

The input sequence is the graph's co-location sets (appendix G of paper 004; Mirhoseini
et al. also place co-location groups) in topological order, each described by HSDAG's node
features (:func:`~onnx_sched.models.inference.hsdag_features.node_features`); the network
(:mod:`~onnx_sched.models.inference.lstm_placer`) emits one device per set, which all its
ops take.  The weights start fresh (seeded) on every graph, as in the paper, and are
trained by :func:`~onnx_sched.models.inference.placeto_search.reinforce` on the reward
HSDAG uses (``1 / latency``, modelled or measured).  Deviations: the paper's reward is
``-sqrt(runtime)`` with a moving-average baseline; here rewards are standardised over each
batch of episodes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.jit import work_clock
from onnx_sched.models.inference import hsdag_net as hn
from onnx_sched.models.inference import lstm_placer as lp
from onnx_sched.models.inference.hsdag_features import colocate, group_times, node_features
from onnx_sched.models.inference.placeto_search import Episode, sample_device

__all__ = ["RnnPolicy"]

#: The backward through time against the forward that sampled the episode: 1.15 measured at 3,000 and 8,000 steps.
BACKWARD_PER_FORWARD = 1.2


class RnnPolicy:
    """One episode = one decode of the whole sequence (sampled, or greedy)."""

    def __init__(self, problem: lat.PlacementProblem, hidden: int, rng: np.random.Generator) -> None:
        g = problem.graph
        c = colocate(g)
        self.member, self.order = c.member, c.topo
        self.x = node_features(g, c, problem.op_time, problem.host).astype(np.float64)[c.topo]
        self.allowed = np.isfinite(group_times(c, problem.op_time))[c.topo]
        self.params = lp.init_params(self.x.shape[1], int(hidden), problem.n_devices, rng)

    def sample(self, rng: np.random.Generator, greedy: bool = False,
               state_reward: Callable[[np.ndarray], float] | None = None,
               stop: Callable[..., bool] | None = None) -> Episode | None:
        """Decode a device per co-location set; the gradient of the summed ``log pi`` unless ``greedy``
        (every step shares the final reward: ``state_reward`` is not used).  A decoded sequence is only a
        placement when complete, so a decode that ``stop()`` ends early returns ``None`` (on 8,000 ops
        one decode takes about a second), and one whose gradient ``stop`` says would end past the limit skips it
        (``s1`` None)."""
        started = work_clock()
        cache = lp.forward(self.params, self.x, self.allowed, lambda t, logits: sample_device(logits, rng, greedy),
                           stop=stop)
        if cache is None:
            return None
        place = np.empty(len(self.order), np.int64)
        place[self.order] = cache.actions
        if greedy or (stop is not None and stop(BACKWARD_PER_FORWARD * (work_clock() - started))):
            return Episode(place[self.member], None)
        _, dl = hn.log_prob_grad(cache.logits, cache.actions)
        return Episode(place[self.member], lp.backward(self.params, cache, dl))
