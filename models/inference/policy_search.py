"""Per-problem policy search: REINFORCE on a factorised categorical policy.

Paper 004 (HSDAG) optimises its placement policy on the graph being placed: each RL
episode samples placements, measures their latency and updates the policy with
reward ``1 / latency``.  Running the full network update at optimize time would
need torch, so this module adapts only the policy's output: the per-item logits
the trained network produced are the starting parameters, and REINFORCE moves
them (a learned prior refined by the measured or modelled cost of the problem at
hand).  Nothing here is specific to placement: any one-of-``k`` choice per item
with a batched cost function can use it.

Example:

>>> import numpy as np
>>> logits = np.zeros((3, 2))
>>> cost = lambda c: 1.0 + (c != np.array([1, 0, 1])).sum(axis=1)  # best: choices 1, 0, 1
>>> best, value, _ = reinforce_search(logits, cost, episodes=40, batch=16, rng=np.random.default_rng(0))
>>> best.tolist(), value
([1, 0, 1], 1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onnx_sched.jit import work_clock

__all__ = ["SearchTrace", "reinforce_search", "sample_choices", "softmax"]


@dataclass(frozen=True)
class SearchTrace:
    """What the search did: best cost after each episode and the greedy cost at the start."""

    start_cost: float
    best_per_episode: tuple[float, ...]
    evaluations: int


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax that tolerates ``-inf`` (forbidden choices)."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def sample_choices(p: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``(count, items)`` choices, each row drawn from the per-item distributions ``p``."""
    cum = p.cumsum(axis=1)
    u = rng.random((count, len(p), 1))
    return np.minimum((u > cum[None]).sum(axis=2), p.shape[1] - 1)


def reinforce_search(
    logits: np.ndarray,
    cost: Callable[[np.ndarray], np.ndarray],
    *,
    episodes: int,
    batch: int,
    rng: np.random.Generator,
    lr: float = 2.0,
    time_limit: float | None = None,
) -> tuple[np.ndarray, float, SearchTrace]:
    """Best choice vector found while REINFORCE refines ``logits`` (items x options) against ``cost``.

    ``cost`` maps a ``(B, items)`` integer array to ``(B,)`` costs (lower is better).  Each
    episode draws ``batch`` samples plus the current greedy choice, rewards each with
    ``1 / cost`` standardised across the batch, and takes one gradient step on the logits
    (the exact score-function gradient of a categorical: ``onehot - p``).  The first
    evaluation is the greedy choice of the initial logits, so the result is never worse.
    ``time_limit`` (seconds) stops the search early; the first episode always runs.
    """
    if logits.ndim != 2:
        raise ValueError(f"logits must be (items, options), got shape {logits.shape}")
    theta = np.array(logits, dtype=np.float64)
    forbidden = ~np.isfinite(theta)
    greedy = np.argmax(theta, axis=1)
    best = greedy.copy()
    best_cost = float(cost(greedy[None, :])[0])
    start = best_cost
    history: list[float] = []
    evals = 1
    items = np.arange(theta.shape[0])
    t0 = work_clock()
    for ep in range(max(0, episodes)):
        if ep and time_limit is not None and work_clock() - t0 > time_limit:
            break
        p = softmax(theta)
        draws = np.vstack([np.argmax(theta, axis=1)[None, :], sample_choices(p, batch, rng)])
        c = np.asarray(cost(draws), dtype=np.float64)
        if (c < 0).any():
            raise ValueError(f"reinforce_search: costs must be >= 0 (the reward is 1 / cost), got {c.min():g}")
        evals += len(draws)
        i = int(np.argmin(c))
        if c[i] < best_cost:
            best_cost, best = float(c[i]), draws[i].copy()
        reward = 1.0 / np.maximum(c, 1e-300)
        sd = reward.std()
        if sd > 0:
            adv = (reward - reward.mean()) / sd
            grad = -p * adv.sum()
            for a, d in zip(adv, draws):
                grad[items, d] += a
            theta += lr * grad / len(draws)
            theta[forbidden] = -np.inf
        history.append(best_cost)
    return best, best_cost, SearchTrace(start, tuple(history), evals)
