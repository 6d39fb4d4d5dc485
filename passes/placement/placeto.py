"""Placeto (paper 004's section 3.3 baseline) as the ``latency`` pass ``placeto``, and what it shares with ``rnn-placer``.

Placeto places node by node with HSDAG's encoder, the current placement part of the node
features, trained on this graph by REINFORCE
(:mod:`~onnx_sched.models.inference.placeto_search`, numpy, no torch).  The reward is
HSDAG's: ``1 / latency``, modelled by default or measured on OpenVINO with
``--option reward=measured`` (the same :class:`~onnx_sched.passes.placement._measured.MeasuredLatency`
as ``hsdag``: HETERO runs, paper 004's protocol, pre-filtered by the latency model).  The
single-device placements are candidates too (timed first under ``reward=measured``), so the
choice is never worse than the best single device under the latency that judged it.

Options (``--option KEY=VALUE``): ``episodes`` (100), ``batch`` (4 episodes per weight
update), ``lr`` (1e-2), ``reward`` (``model`` | ``measured``)
and, with ``measured``, ``run_devices`` (e.g. ``CPU,CPUB``), ``measure_budget`` (8) and
``margin`` (0.10) as for ``hsdag``.  Deterministic for a seed; the clock is checked before
every episode (the first always runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.placement._common import problem_of
from onnx_sched.passes.placement._measured import (
    choose_placement,
    measured_reward,
    predicted_latency,
    reward_option,
)
from onnx_sched.passes.placement.single import single_device
from onnx_sched.schedule import Schedule

__all__ = ["run_learned_placer"]


def run_learned_placer(graph: Graph, ctx: PassContext, method: str, make_policy: Callable[[lat.PlacementProblem], Any],
                       lr: float) -> Schedule:
    """Train ``make_policy(problem)`` on this graph with REINFORCE and return the best candidate (module docstring)."""
    from onnx_sched.jit import work_clock
    from onnx_sched.models.inference.placeto_search import ReinforceSettings, reinforce

    t0 = work_clock()
    problem = problem_of(graph, ctx)
    settings = ReinforceSettings(episodes=int(ctx.option("episodes", 100)), batch=int(ctx.option("batch", 4)),
                                 lr=float(ctx.option("lr", lr)))
    reward = reward_option(ctx, method)
    singles = [single_device(problem, d) for d in range(problem.n_devices)]
    measured = measured_reward(problem, ctx, singles) if reward == "measured" else None
    latency_of: Callable[[np.ndarray, float], float] = measured if measured is not None else predicted_latency
    policy = make_policy(problem)
    left = None if ctx.time_limit is None else max(0.0, ctx.time_limit - (work_clock() - t0))  # features, timed singles
    res = reinforce(problem, policy, settings, latency_of, np.random.default_rng(ctx.seed), time_limit=left)
    first, last = res.history[:settings.batch], res.history[-settings.batch:]
    info: dict[str, Any] = {"reward": reward, "episodes_run": res.episodes_run, "weight_updates": res.updates,
                            "candidates": len(res.candidates) + len(singles), "seed": ctx.seed,
                            # mean judged latency of the first / last batch of sampled episodes: did it learn?
                            # (None: not one episode fitted in the time limit)
                            "episode_latency_first": float(np.mean(first)) if first else None,
                            "episode_latency_last": float(np.mean(last)) if last else None}
    return choose_placement(problem, method, measured, list(res.candidates.values()), singles, info)


def _placeto_policy(problem: lat.PlacementProblem) -> Any:
    from onnx_sched.models.inference.hsdag_net import load_params
    from onnx_sched.models.inference.placeto_search import PlacetoPolicy

    try:
        params = load_params()
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    return PlacetoPolicy(problem, params)


@register("placeto", objective="latency")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    return run_learned_placer(graph, ctx, "placeto", _placeto_policy, lr=1e-2)
