"""Per-problem REINFORCE search over logits (models/inference/policy_search.py) and the HSDAG pass's quality on squeezenet."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS

from onnx_sched.models.inference.policy_search import reinforce_search, sample_choices, softmax


def _coupled_cost(target: np.ndarray):
    """Cost with a plateau: matching the target pays only when neighbours agree too."""

    def cost(c: np.ndarray) -> np.ndarray:
        hit = c == target[None, :]
        return 40.0 - hit.sum(axis=1) - 2.0 * (hit[:, 1:] & hit[:, :-1]).sum(axis=1)

    return cost


def test_search_finds_optimum_from_a_wrong_confident_prior() -> None:
    rng = np.random.default_rng(0)
    target = rng.integers(0, 3, size=12)
    logits = np.zeros((12, 3))
    logits[np.arange(12), (target + 1) % 3] = 2.0  # the prior prefers a wrong option everywhere
    cost = _coupled_cost(target)
    best, value, trace = reinforce_search(logits / 3.0, cost, episodes=200, batch=16, rng=np.random.default_rng(1))
    assert best.tolist() == target.tolist()
    assert value == pytest.approx(float(cost(target[None, :])[0]))
    assert trace.start_cost == pytest.approx(float(cost(((target + 1) % 3)[None, :])[0]))
    assert list(trace.best_per_episode) == sorted(trace.best_per_episode, reverse=True)  # best never gets worse


def test_search_never_picks_forbidden_options_and_never_loses_to_greedy() -> None:
    logits = np.array([[0.0, -np.inf, 1.0], [-np.inf, 0.5, 0.0], [2.0, 0.0, -np.inf]])
    seen: list[np.ndarray] = []

    def cost(c: np.ndarray) -> np.ndarray:
        seen.append(c.copy())
        return c.sum(axis=1).astype(float) + 1.0

    best, value, trace = reinforce_search(logits, cost, episodes=30, batch=8, rng=np.random.default_rng(0))
    allc = np.vstack(seen)
    assert not (allc[:, 0] == 1).any() and not (allc[:, 1] == 0).any() and not (allc[:, 2] == 2).any()
    assert value <= trace.start_cost
    assert best.tolist() == [0, 1, 0] and value == 2.0


def test_sampling_follows_the_distribution() -> None:
    p = softmax(np.log(np.array([[0.2, 0.8], [0.5, 0.5]])))
    draws = sample_choices(p, 20000, np.random.default_rng(0))
    assert abs(draws[:, 0].mean() - 0.8) < 0.02 and abs(draws[:, 1].mean() - 0.5) < 0.02


def test_hsdag_pass_reaches_the_min_cut_optimum_on_squeezenet() -> None:
    """The hsdag pass (per-group episodes that update the weights) with and without episodes is within 5 % of the optimum."""
    from onnx_sched.cost import latency as lat
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.models.inference.hsdag import ENCODER_PATH
    from onnx_sched.passes import PassContext, get_pass
    from onnx_sched.passes.placement._optimal import mincut_placement
    from onnx_sched.profiling import load_profiles

    if not ENCODER_PATH.exists():
        pytest.skip("HSDAG checkpoint not trained in this checkout")
    profiles = load_profiles(Path(__file__).resolve().parents[1] / "examples" / "profiles_cpu_igpu_dgpu.json")
    g = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx").graph
    problem = lat.placement_problem(g, profiles, "sequential", ["CPU", "GPU.0"])
    _, optimum = mincut_placement(problem)
    run = get_pass("hsdag", "latency")
    alone = run(g, PassContext(problem=problem, options={"episodes": 0}))
    refined = run(g, PassContext(problem=problem))
    assert refined.info["weight_updates"] > alone.info["weight_updates"] == 0
    assert refined.info["latency"] <= 1.05 * optimum
    assert lat.sequential_latency(problem, refined.placement) == pytest.approx(refined.info["latency"])
