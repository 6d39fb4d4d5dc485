"""HSDAG's per-graph episodes (paper 004, section 2.5 and appendix H): REINFORCE that updates the weights.

Each episode starts from the co-location graph (appendix G) and runs up to ``rounds``
time steps.  A step is one round of :func:`~onnx_sched.models.inference.hsdag_net.forward`:
embed, score edges, group (with ``dropout`` of the edges dropped), pool to
``A' = X^T A X``, sample one device per group from the policy, map it back to the ops
through ``X`` and get the placement's latency from ``latency_of`` (the latency model, or a
real OpenVINO run filtered by it: ``passes/placement/_measured.py``).  The reward is
``1 / latency``.  The state of the next step is the pooled graph with the updated
embeddings ``Z_v + Z_v'``; the state is an input of the policy, so no gradient flows
through it (the usual RL reading of "the new state").

Every ``update_timestep`` steps the buffer is used as in eq. 14: rewards are discounted
backwards within each episode (``gamma``), standardised over the buffer, and ``k_epochs``
Adam steps (``lr``) descend ``-mean(R_i * log pi(P_i | G_i))``, re-scoring the stored
actions under the stored groupings with the current weights.  Defaults are table 4's:
100 episodes, update_timestep 20, K_epochs 4, lr 1e-4, dropout 0.2.

Every placement a step draws, and the greedy placement of each step, is a candidate;
:func:`run_episodes` returns them all with the latency each was judged by, so the caller
picks (the pass adds the single-device placements).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.jit import work_clock
from onnx_sched.models.inference import hsdag_net as net
from onnx_sched.models.inference.hsdag_features import colocate, fractal_seconds, node_features

__all__ = ["EpisodeSettings", "EpisodeResult", "run_episodes"]

#: An update's cost per stored step, in forward passes: the forward again and its backward.
UPDATE_COST = 3.0
#: About what the first forward pass costs per directed edge of the co-location graph (it scores every edge):
#: measured 3.7-4.4 us on 455,000-690,000 edges (generated er / sbm graphs of 6,058 / 8,369 ops), 1.0 us on
#: 71,000 (a layered one), 3.7 us on 2,800 (swinv2_tiny); 1.9-5.4 us (median 3.1, nine runs, quiet machine) on
#: 1,230,802 (sbm, 14,237 ops).  Episodes do not start when features and this estimate would end past the time
#: limit.
FIRST_FORWARD_SECONDS_PER_EDGE = 4e-6


@dataclass(frozen=True)
class EpisodeSettings:
    """Table 4 of paper 004 (``rounds``, ``gamma`` are not given there; see the model card)."""

    episodes: int = 100
    update_timestep: int = 20
    k_epochs: int = 4
    lr: float = 1e-4
    gamma: float = 0.99
    dropout: float = 0.2
    rounds: int = 4

    def __post_init__(self) -> None:
        for name in ("episodes", "update_timestep", "k_epochs", "rounds"):
            if int(getattr(self, name)) < (0 if name == "episodes" else 1):
                raise ValueError(f"hsdag: {name} must be >= {0 if name == 'episodes' else 1}, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"hsdag: dropout must be in [0, 1), got {self.dropout}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"hsdag: gamma must be in (0, 1], got {self.gamma}")
        if self.lr <= 0:
            raise ValueError(f"hsdag: lr must be > 0, got {self.lr}")


@dataclass(frozen=True, eq=False)
class _Step:
    graph: net.RoundGraph
    inputs: np.ndarray
    first: bool
    gid: np.ndarray
    partner: np.ndarray
    actions: np.ndarray
    reward: float
    terminal: bool


@dataclass(frozen=True, eq=False)
class EpisodeResult:
    """Candidates (placement per op -> judged latency), the per-step log and the weight updates made."""

    candidates: dict[bytes, tuple[np.ndarray, float]]
    steps: int
    episodes_run: int
    updates: int
    groups_per_round: tuple[float, ...]
    best_per_episode: tuple[float, ...] = field(default=())


def _returns(buffer: list[_Step], gamma: float) -> np.ndarray:
    out = np.zeros(len(buffer))
    running = 0.0
    for i in range(len(buffer) - 1, -1, -1):
        if buffer[i].terminal:
            running = 0.0
        running = buffer[i].reward + gamma * running
        out[i] = running
    sd = out.std()
    return (out - out.mean()) / (sd + 1e-5)


def _update(params: net.Params, opt: net.Adam, problem: lat.PlacementProblem, buffer: list[_Step],
            settings: EpisodeSettings, mask: np.ndarray | None) -> None:
    ret = _returns(buffer, settings.gamma)
    for _ in range(settings.k_epochs):
        total = {n: np.zeros_like(v) for n, v in params.items()}
        for step, r in zip(buffer, ret):
            c = net.forward(params, problem, step.graph, step.inputs, step.first, force=(step.gid, step.partner),
                            mask=mask if step.first else None)
            _, dlogp = net.log_prob_grad(c.logits, step.actions)
            g = net.backward(params, step.graph, c, -r * dlogp / len(buffer), step.first)  # loss = -mean(R log pi)
            for n in total:
                total[n] += g[n]
        opt.step(params, total)


def run_episodes(problem: lat.PlacementProblem, params: net.Params, settings: EpisodeSettings,
                 latency_of: Callable[[np.ndarray, float], float], rng: np.random.Generator, *,
                 time_limit: float | None = None, mask: np.ndarray | None = None) -> EpisodeResult:
    """Run the episodes on ``problem``, updating ``params`` in place (module docstring).

    ``latency_of(placement, predicted)`` returns the latency that rewards a placement
    (``predicted`` is its modelled latency).  ``mask`` zeroes node-feature columns (the
    ablations).  Stops after ``time_limit`` seconds, inside an episode too (before a round as long as the last
    would end past it), and before an update that would end
    past it (an update only serves later episodes); the first step runs unless the features and
    :data:`FIRST_FORWARD_SECONDS_PER_EDGE` say it would end past the limit (then no episode, no candidate), and
    the features are not computed when their estimate (:func:`fractal_seconds`) already says so."""
    t0 = work_clock()  # the features count too (a fractal dimension over thousands of ops takes seconds)
    g = problem.graph
    coarse = colocate(g)
    if time_limit is not None and work_clock() - t0 + fractal_seconds(coarse.n, coarse.edges) \
            + FIRST_FORWARD_SECONDS_PER_EDGE * len(coarse.edges) > time_limit:
        return EpisodeResult({}, 0, 0, 0, ())  # the features and first step would not fit: not started
    x = node_features(g, coarse, problem.op_time, problem.host).astype(np.float64)
    rg0 = net.round_graph(problem, coarse.member, coarse.n, coarse.edges)
    if time_limit is not None and work_clock() - t0 + FIRST_FORWARD_SECONDS_PER_EDGE * len(rg0.src) > time_limit:
        return EpisodeResult({}, 0, 0, 0, ())
    opt = net.Adam(params, settings.lr)
    candidates: dict[bytes, tuple[np.ndarray, float]] = {}

    def judge(placement: np.ndarray) -> float:
        key = placement.astype(np.int8).tobytes()
        if key not in candidates:
            candidates[key] = (placement, float(latency_of(placement, float(lat.evaluate(problem, placement)))))
        return candidates[key][1]

    buffer: list[_Step] = []
    groups: dict[int, list[int]] = {}
    best_log: list[float] = []
    steps = updates = episodes_run = 0
    buffer_seconds = 0.0  # forward time of the steps in the buffer: an update re-runs them k_epochs times
    # forward times: the last first round's (the whole co-location graph, the longest) and this episode's last
    # later round's (a round's graph is the last one's, merged: about as long or less)
    first_forward = later_forward = 0.0
    out_of_time = False
    for _ in range(max(1, settings.episodes)):
        if out_of_time or (episodes_run and time_limit is not None and work_clock() - t0 > time_limit):
            break
        rg, inputs, first, steps_before = rg0, x, True, steps
        later_forward = 0.0  # the last episode's last round is its smallest: round 1 is estimated by round 0
        for r in range(settings.rounds):
            started = work_clock()
            expected = first_forward if r == 0 else later_forward or first_forward
            if steps and time_limit is not None and started - t0 + expected > time_limit:
                out_of_time = True  # a forward as long as the last like it would end past the limit
                break
            c = net.forward(params, problem, rg, inputs, first, drop=settings.dropout, rng=rng,
                            mask=mask if first else None)
            took = work_clock() - started
            if r == 0:
                first_forward = took
            else:
                later_forward = took
            buffer_seconds += took
            prob = np.exp(c.logits - c.logits.max(axis=1, keepdims=True))
            prob /= prob.sum(axis=1, keepdims=True)
            actions = (rng.random((len(prob), 1)) > prob.cumsum(axis=1)).sum(axis=1)
            actions = np.minimum(actions, prob.shape[1] - 1)
            op_group = c.next_graph.member
            value = judge(actions[op_group])
            judge(np.argmax(c.logits, axis=1)[op_group])
            groups.setdefault(r, []).append(len(prob))
            last = r == settings.rounds - 1 or c.next_graph.n <= 1
            buffer.append(_Step(rg, inputs, first, c.gid, c.partner, actions, 1.0 / max(value, 1e-12), last))
            steps += 1
            if len(buffer) == settings.update_timestep and settings.episodes > 0:
                update_seconds = UPDATE_COST * settings.k_epochs * buffer_seconds
                if time_limit is not None and work_clock() - t0 + update_seconds > time_limit:
                    out_of_time = True  # the update would only serve episodes there is no time for
                    break
                _update(params, opt, problem, buffer, settings, mask)
                buffer.clear()
                buffer_seconds = 0.0
                updates += 1
            if last or (time_limit is not None and work_clock() - t0 > time_limit):
                break  # an episode still running at the limit stops where it is (its placements are judged)
            rg, inputs, first = c.next_graph, c.next_state, False
        if steps == steps_before:
            break  # not one round fitted
        episodes_run += 1
        best_log.append(min(v for _, v in candidates.values()))
    return EpisodeResult(candidates, steps, episodes_run, updates,
                         tuple(float(np.mean(groups[r])) for r in sorted(groups)), tuple(best_log))
