"""Placeto (Addanki et al. 2019; paper 004's baseline) per graph, and the REINFORCE loop both learned baselines share.

Placeto places a graph node by node: it visits the nodes in a fixed order and, at each
step, embeds the graph *with the current placement in the node features*, then picks the
device of the visited node.  Here the encoder and the device head are HSDAG's own
(:mod:`~onnx_sched.models.inference.hsdag_net`: input MLP, two GCN layers, placer head over
(node, device) features, started from the shipped checkpoint) run without grouping: every
co-location set (appendix G, :func:`~onnx_sched.models.inference.hsdag_features.colocate`)
is its own group, so HSDAG's one-round forward is an encoder-placer giving one row of
device logits per node.  The node features are HSDAG's plus ``k + 2`` columns: the
one-hot of the node's current device, "already visited" and "visited now" (Placeto's
placement features).  Their input weights start at zero, so the first policy is the
checkpoint's, and are learned by the episodes.

An episode starts from the best single-device placement (under the modelled latency) and
visits the co-location sets in topological order, sampling each one's device.  Rewards are
Placeto's intermediate ones, on HSDAG's reward scale: step ``t`` earns the change of
``1 / latency`` it causes, so the return from step ``t`` is ``R(p_T) - R(p_{t-1})``:
the final placement's reward, judged by ``latency_of`` (modelled, or measured on
OpenVINO), minus the reward of the placement step ``t`` found.  The second term uses the
latency *model* (times the measured/predicted calibration under a measured reward), so a
measured reward times one placement per episode, not one per node; it depends only on
earlier steps, so it is a baseline and the gradient stays unbiased.  Placeto's
discounting and learned baseline are left out (``gamma = 1``).

:func:`reinforce` is the loop (also used by the RNN placer,
:mod:`~onnx_sched.models.inference.lstm_search`, whose steps all share the final reward
minus the batch mean): ``batch`` episodes, advantages divided by the standard deviation
of the batch's final rewards, one Adam step on ``-mean_e(sum_t A_et * log pi(a_et))``; the
clock is checked before every episode (the first always runs; no episode starts that
would, at the mean episode time so far, end past the limit); every sampled placement, and
the greedy one at the end when time remains, is a candidate.  A Placeto episode that
is still running when the limit passes stops there (the sets it has not visited keep
their starting device, a valid placement).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.jit import work_clock
from onnx_sched.models.inference import hsdag_net as hn
from onnx_sched.models.inference.hsdag_features import colocate, group_times, node_features

__all__ = ["Episode", "PlacetoPolicy", "Policy", "ReinforceSettings", "SearchResult", "reinforce", "sample_device"]

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class ReinforceSettings:
    """Episodes, episodes per weight update (``batch``) and Adam's learning rate."""

    episodes: int = 100
    batch: int = 4
    lr: float = 1e-2

    def __post_init__(self) -> None:
        if int(self.episodes) < 0:
            raise ValueError(f"episodes must be >= 0, got {self.episodes}")
        if int(self.batch) < 2:
            raise ValueError(f"batch must be >= 2 (rewards are standardised over a batch), got {self.batch}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass(frozen=True, eq=False)
class Episode:
    """One sampled episode: placement per op; ``s1 = sum_t grad log pi(a_t)``; ``s2 = sum_t ref_t grad
    log pi(a_t)`` with ``ref_t`` the step's reference reward (``None``: the batch mean, for every step)."""

    placement: np.ndarray
    s1: Params | None
    s2: Params | None = None


class Policy(Protocol):
    """A per-graph placement policy: its weights, and one episode."""

    params: Params

    def sample(self, rng: np.random.Generator, greedy: bool = False,
               state_reward: Callable[[np.ndarray], float] | None = None,
               stop: Callable[..., bool] | None = None) -> Episode | None:
        """One episode (no gradients when ``greedy``); ``state_reward(placement)`` scores intermediate placements;
        once ``stop()`` is true a policy whose partial episodes are placements may end the episode early, and
        one whose are not may return ``None`` (no episode) or an episode without gradients (``s1`` None).
        ``stop(seconds)`` says whether that much more work would end past the limit."""
        ...


@dataclass(frozen=True, eq=False)
class SearchResult:
    """Candidates (key -> (placement per op, judged latency)), episodes run, weight updates made,
    and the judged latency of each episode's sampled placement (the learning curve)."""

    candidates: dict[bytes, tuple[np.ndarray, float]]
    episodes_run: int
    updates: int
    history: tuple[float, ...] = ()


def sample_device(logits: np.ndarray, rng: np.random.Generator, greedy: bool) -> int:
    """A device from ``softmax(logits)`` (``-inf`` = forbidden), or the argmax when ``greedy``."""
    if greedy:
        return int(np.argmax(logits))
    prob = np.exp(logits - logits.max())
    prob /= prob.sum()
    return int(min((rng.random() > prob.cumsum()).sum(), len(prob) - 1))


def reinforce(problem: lat.PlacementProblem, policy: Policy, settings: ReinforceSettings,
              latency_of: Callable[[np.ndarray, float], float], rng: np.random.Generator, *,
              time_limit: float | None = None) -> SearchResult:
    """Train ``policy`` on ``problem`` (weights updated in place) and collect candidates (module docstring)."""
    candidates: dict[bytes, tuple[np.ndarray, float]] = {}
    states: dict[bytes, float] = {}

    def judge(placement: np.ndarray) -> float:
        key = placement.astype(np.int8).tobytes()
        if key not in candidates:
            candidates[key] = (placement, float(latency_of(placement, float(lat.evaluate(problem, placement)))))
        return candidates[key][1]

    def state_reward(placement: np.ndarray) -> float:  # modelled, calibrated to the judged scale
        key = placement.astype(np.int8).tobytes()
        if key not in states:
            if len(states) > 200_000:
                states.clear()
            states[key] = float(lat.evaluate(problem, placement))
        calibration = getattr(latency_of, "calibration", None)
        return 1.0 / max(states[key] * (calibration() if calibration else 1.0), 1e-12)

    opt = hn.Adam(policy.params, settings.lr)
    batch: list[tuple[float, Episode]] = []
    history: list[float] = []
    episodes = updates = 0
    t0 = work_clock()

    def out_of_time() -> bool:  # would one more episode (as long as the mean so far) overrun the limit?
        used = work_clock() - t0
        return time_limit is not None and used + used / max(episodes, 1) > time_limit

    def out_of_time_now(seconds: float = 0.0) -> bool:  # the limit has passed, or would in ``seconds`` more
        return time_limit is not None and work_clock() - t0 + seconds > time_limit

    for _ in range(max(1, settings.episodes)):
        if episodes and out_of_time():
            break
        ep = policy.sample(rng, state_reward=state_reward, stop=out_of_time_now)
        if ep is None:  # stopped at the limit before it placed anything
            break
        episodes += 1
        history.append(judge(ep.placement))
        if ep.s1 is None:  # stopped at the limit after placing: judged, no gradient to learn from
            break
        batch.append((1.0 / max(history[-1], 1e-12), ep))
        if len(batch) == settings.batch and settings.episodes > 0:
            r = np.array([b[0] for b in batch])
            sd = float(r.std())
            if sd > 1e-12 * abs(float(r.mean())):  # all final rewards equal: nothing to learn from this batch
                mean = float(r.mean())
                grad = {n: np.zeros_like(v) for n, v in policy.params.items()}
                for re, ep in batch:
                    for n in grad:  # loss = -mean_e sum_t (R_e - ref_et) / sd * log pi(a_et)
                        ref = ep.s2[n] if ep.s2 is not None else mean * ep.s1[n]
                        grad[n] -= (re * ep.s1[n] - ref) / (sd * len(batch))
                opt.step(policy.params, grad)
                updates += 1
            batch.clear()
    if not out_of_time():
        judge(policy.sample(rng, greedy=True).placement)
    return SearchResult(candidates, episodes, updates, tuple(history))


class PlacetoPolicy:
    """Placeto's node-by-node policy on HSDAG's encoder (module docstring)."""

    def __init__(self, problem: lat.PlacementProblem, params: Params) -> None:
        g = problem.graph
        c = colocate(g)
        k, H = problem.n_devices, params["t1.W"].shape[1]
        self.problem, self.member, self.order, self.n, self.k = problem, c.member, c.topo, c.n, k
        self.x = node_features(g, c, problem.op_time, problem.host).astype(np.float64)
        if params["t1.W"].shape[0] != self.x.shape[1]:
            raise ValueError(f"placeto: checkpoint input width {params['t1.W'].shape[0]} != {self.x.shape[1]} node features")
        self.params = dict(params)
        self.params["t1.W"] = np.vstack([params["t1.W"], np.zeros((k + 2, H))])  # placement columns, learned
        rg = hn.round_graph(problem, c.member, c.n, c.edges)
        none = np.zeros(0, np.int64)  # without grouping the edge scorer plays no part: keep the adjacency only
        self.rg = replace(rg, edges=np.zeros((0, 2), np.int64), src=none, dst=none)
        self.force = (np.arange(c.n, dtype=np.int64), np.full(c.n, -1, np.int64))  # no grouping
        t = group_times(c, problem.op_time)
        singles = [float(lat.evaluate(problem, np.where(np.isfinite(problem.op_time[:, d]), d, problem.host)))
                   for d in range(k)]
        best = int(np.argmin(singles))
        self.start = np.where(np.isfinite(t[:, best]), best, problem.host).astype(np.int64)

    def _inputs(self, place: np.ndarray, visited: np.ndarray, now: int) -> np.ndarray:
        extra = np.zeros((self.n, self.k + 2))
        extra[np.arange(self.n), place] = 1.0
        extra[:, self.k] = visited
        extra[now, self.k + 1] = 1.0
        return np.hstack([self.x, extra])

    def sample(self, rng: np.random.Generator, greedy: bool = False,
               state_reward: Callable[[np.ndarray], float] | None = None,
               stop: Callable[[], bool] | None = None) -> Episode:
        """Visit every co-location set once (topological order), choosing its device given the placement so far;
        once ``stop()`` is true the sets not yet visited keep their starting device (on a graph of thousands
        of ops one episode outlasts a typical time limit)."""
        place = self.start.copy()
        visited = np.zeros(self.n)
        learn = not greedy and state_reward is not None
        s1 = {n: np.zeros_like(v) for n, v in self.params.items()} if learn else None
        s2 = {n: np.zeros_like(v) for n, v in self.params.items()} if learn else None
        for v in self.order:
            if stop is not None and stop():
                break
            c = hn.forward(self.params, self.problem, self.rg, self._inputs(place, visited, int(v)), True,
                           force=self.force)
            a = sample_device(c.logits[v], rng, greedy)
            if s1 is not None and s2 is not None and state_reward is not None:
                ref = state_reward(place[self.member])  # R(p_{t-1}): the baseline of this step
                _, dl_row = hn.log_prob_grad(c.logits[v:v + 1], np.array([a]))
                dl = np.zeros_like(c.logits)
                dl[v] = dl_row[0]
                for n, gv in hn.backward(self.params, self.rg, c, dl, True).items():
                    s1[n] += gv
                    s2[n] += ref * gv
            place[v] = a
            visited[v] = 1.0
        return Episode(place[self.member], s1, s2)
