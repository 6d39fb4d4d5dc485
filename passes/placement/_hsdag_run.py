"""What the ``hsdag`` pass and its table-3 ablations share: options, candidates, the choice.

Options (``--option KEY=VALUE``): ``episodes`` (100), ``update_timestep`` (20), ``k_epochs``
(4), ``lr`` (1e-4), ``gamma`` (0.99), ``dropout`` (0.2), ``rounds`` (4) -- see
:class:`~onnx_sched.models.inference.hsdag_search.EpisodeSettings`; ``reward``: ``model``
(default, the problem's latency model) or ``measured`` (real OpenVINO HETERO runs,
:mod:`~onnx_sched.passes.placement._measured`, with ``run_devices`` (OpenVINO device per
profile device, e.g. ``CPU,CPUB``), ``measure_budget`` (8 placements beyond the single-device
ones) and ``margin`` (0.10)).  The weights start from the shipped checkpoint in every run
(the episodes of one graph never leak into the next).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext
from onnx_sched.passes.placement._common import problem_of
from onnx_sched.passes.placement._measured import (
    choose_placement,
    measured_reward,
    predicted_latency,
    reward_option,
)
from onnx_sched.passes.placement.single import single_device
from onnx_sched.schedule import Schedule

__all__ = ["run_hsdag", "settings_of"]

_PARAMS: dict[str, np.ndarray] | None = None


def _params() -> dict[str, np.ndarray]:
    global _PARAMS
    if _PARAMS is None:
        from onnx_sched.models.inference.hsdag_net import load_params

        try:
            _PARAMS = load_params()
        except FileNotFoundError as exc:
            raise ValueError(str(exc)) from None
    return {k: v.copy() for k, v in _PARAMS.items()}


def settings_of(ctx: PassContext) -> Any:
    """The episode settings from the pass options (table 4 defaults)."""
    from onnx_sched.models.inference.hsdag_search import EpisodeSettings

    d = EpisodeSettings()
    return EpisodeSettings(**{name: type(getattr(d, name))(ctx.option(name, getattr(d, name)))
                              for name in ("episodes", "update_timestep", "k_epochs", "lr", "gamma", "dropout", "rounds")})


def _mask(ablate: tuple[str, ...]) -> np.ndarray | None:
    if not ablate:
        return None
    from onnx_sched.models.inference.hsdag_features import N_NODE_FEATURES, feature_columns

    cols = feature_columns()
    mask = np.ones(N_NODE_FEATURES)
    for name in ablate:
        mask[cols[name]] = 0.0
    return mask


def run_hsdag(graph: Graph, ctx: PassContext, method: str, ablate: tuple[str, ...] = ()) -> Schedule:
    """Episodes on this graph (weights updated), then the best candidate (module docstring)."""
    from onnx_sched.jit import work_clock
    from onnx_sched.models.inference.hsdag_search import run_episodes

    t0 = work_clock()
    problem = problem_of(graph, ctx)
    settings = settings_of(ctx)
    reward = reward_option(ctx, method)
    params = _params()
    singles = [single_device(problem, d) for d in range(problem.n_devices)]
    measured = measured_reward(problem, ctx, singles) if reward == "measured" else None
    latency_of = measured if measured is not None else predicted_latency
    left = None if ctx.time_limit is None else max(0.0, ctx.time_limit - (work_clock() - t0))  # less timed singles
    res = run_episodes(problem, params, settings, latency_of, np.random.default_rng(ctx.seed),
                       time_limit=left, mask=_mask(ablate))
    info: dict[str, Any] = {"reward": reward, "episodes_run": res.episodes_run, "steps": res.steps,
                            "weight_updates": res.updates, "candidates": len(res.candidates) + len(singles),
                            "groups_round0": res.groups_per_round[0] if res.groups_per_round else 0.0,
                            "ablated": ",".join(ablate)}
    return choose_placement(problem, method, measured, list(res.candidates.values()), singles, info)
