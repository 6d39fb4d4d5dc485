"""HSDAG as paper 004 runs it: numpy network gradient, pooled graph, episodes that update the
weights, measured reward through OpenVINO HETERO, the AUTO baselines and the table-3 ablations."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import CORPUS
from test_placement import EXAMPLE_PROFILES, branch_model

from onnx_sched.cost import latency as lat
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.models.inference import hsdag_net as hn
from onnx_sched.models.inference.hsdag_features import N_NODE_FEATURES, colocate, feature_columns, node_features
from onnx_sched.models.inference.hsdag_search import EpisodeSettings
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.profiling import load_profiles


@pytest.fixture(scope="module")
def squeeze_problem() -> lat.PlacementProblem:
    g = import_onnx(CORPUS / "onnx" / "light_squeezenet.onnx").graph
    return lat.placement_problem(g, load_profiles(EXAMPLE_PROFILES), devices=["CPU", "GPU.1"])


def cpu_twice_problem(graph) -> lat.PlacementProblem:  # noqa: ANN001
    """The CPU and CPUB (the CPU plugin registered again) with the example CPU profile's rates."""
    base = lat.placement_problem(graph, load_profiles(EXAMPLE_PROFILES), devices=["CPU", "GPU.1"])
    t = np.repeat(base.op_time[:, :1], 2, axis=1)
    return replace(base, device_names=("CPU", "CPUB"), op_time=t, device_kinds=("cpu", "cpu"), simulated=False)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("first", [True, False])
def test_numpy_gradient_matches_finite_differences(squeeze_problem, first: bool, sparse: bool, monkeypatch) -> None:
    """Both GCN adjacencies: dense (graphs up to DENSE_ADJACENCY_MAX nodes) and sparse (larger ones)."""
    rng = np.random.default_rng(3)
    p = {k: rng.standard_normal(v.shape) * 0.2 for k, v in hn.load_params().items()}  # unsaturated weights
    g = squeeze_problem.graph
    c = colocate(g)
    if sparse:
        monkeypatch.setattr(hn, "DENSE_ADJACENCY_MAX", 0)
    rg = hn.round_graph(squeeze_problem, c.member, c.n, c.edges)
    assert isinstance(rg.adj, np.ndarray) != sparse
    x = node_features(g, c, squeeze_problem.op_time, squeeze_problem.host).astype(np.float64)
    inp = x if first else np.abs(rng.standard_normal((c.n, p["g1.W"].shape[0])))
    cache = hn.forward(p, squeeze_problem, rg, inp, first, drop=0.2, rng=np.random.default_rng(1))
    acts = rng.integers(0, 2, cache.logits.shape[0])
    _, dl = hn.log_prob_grad(cache.logits, acts)
    grads = hn.backward(p, rg, cache, dl, first)
    force = (cache.gid, cache.partner)
    for name in hn.PARAM_NAMES:
        if not first and name.startswith("t"):
            assert not grads[name].any()  # later rounds start from the state, not the input MLP
            continue
        for _ in range(3):
            idx = tuple(int(rng.integers(0, s)) for s in p[name].shape)
            old, eps = p[name][idx], 1e-6
            p[name][idx] = old + eps
            up = hn.log_prob_grad(hn.forward(p, squeeze_problem, rg, inp, first, force=force).logits, acts)[0]
            p[name][idx] = old - eps
            down = hn.log_prob_grad(hn.forward(p, squeeze_problem, rg, inp, first, force=force).logits, acts)[0]
            p[name][idx] = old
            assert grads[name][idx] == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-7), name


def test_pooled_graph_is_x_transpose_a_x(squeeze_problem) -> None:
    g = squeeze_problem.graph
    c = colocate(g)
    rg = hn.round_graph(squeeze_problem, c.member, c.n, c.edges)
    gid = np.arange(c.n) // 3
    nxt = hn.pooled_graph(squeeze_problem, rg, gid)
    x = np.zeros((c.n, gid.max() + 1))
    x[np.arange(c.n), gid] = 1
    a = np.zeros((c.n, c.n))
    a[c.edges[:, 0], c.edges[:, 1]] = 1
    ap = x.T @ a @ x
    np.fill_diagonal(ap, 0)
    assert {tuple(e) for e in nxt.edges.tolist()} == {tuple(e) for e in np.argwhere(ap > 0).tolist()}
    assert (nxt.member == gid[c.member]).all()  # ops map through X
    np.testing.assert_allclose(nxt.group_time.sum(axis=0), squeeze_problem.op_time.sum(axis=0))


def test_episodes_update_the_weights_and_never_lose_to_a_single_device(squeeze_problem) -> None:
    from onnx_sched.models.inference.hsdag_search import run_episodes

    p = hn.load_params()
    before = {k: v.copy() for k, v in p.items()}
    # three devices: on CPU + GPU.1 the shipped policy samples one placement only, and equal rewards teach nothing
    three = lat.placement_problem(squeeze_problem.graph, load_profiles(EXAMPLE_PROFILES))
    res = run_episodes(three, p, EpisodeSettings(episodes=10, rounds=2), lambda pl, pred: pred,
                       np.random.default_rng(0))
    assert res.steps == 20 and res.updates == 1  # update_timestep 20
    assert len({v for _, v in res.candidates.values()}) > 1
    assert any(not np.array_equal(p[k], before[k]) for k in p)
    g = squeeze_problem.graph
    s = get_pass("hsdag", "latency")(g, PassContext(problem=squeeze_problem, options={"episodes": 5}))
    singles = [get_pass(m, "latency")(g, PassContext(problem=squeeze_problem)).info["latency"] for m in ("cpu-only", "gpu-only")]
    assert s.info["latency"] <= min(singles) + 1e-12 and s.info["weight_updates"] == 1


def test_no_episode_starts_whose_first_step_would_end_past_the_limit(squeeze_problem, monkeypatch) -> None:
    from onnx_sched.models.inference import hsdag_search

    p = hn.load_params()
    roomy = hsdag_search.run_episodes(squeeze_problem, p, EpisodeSettings(episodes=1, rounds=1),
                                      lambda pl, pred: pred, np.random.default_rng(0), time_limit=60.0)
    assert roomy.episodes_run == 1 and roomy.candidates
    monkeypatch.setattr(hsdag_search, "FIRST_FORWARD_SECONDS_PER_EDGE", 1e3)  # as if every edge took 1000 s
    late = hsdag_search.run_episodes(squeeze_problem, p, EpisodeSettings(episodes=1, rounds=1),
                                     lambda pl, pred: pred, np.random.default_rng(0), time_limit=60.0)
    assert late.episodes_run == 0 and late.steps == 0 and not late.candidates
    g = squeeze_problem.graph
    s = get_pass("hsdag", "latency")(g, PassContext(problem=squeeze_problem, time_limit=60.0))
    singles = [get_pass(m, "latency")(g, PassContext(problem=squeeze_problem)).info["latency"]
               for m in ("cpu-only", "gpu-only")]
    assert s.info["episodes_run"] == 0 and s.info["latency"] == min(singles)


def test_no_round_starts_that_a_round_like_it_says_would_end_past_the_limit(squeeze_problem, monkeypatch) -> None:
    """A forward over thousands of ops takes seconds: a round (or a new episode's first round) is not started
    when the last one like it, from now, would end past the limit.  Here every forward takes one second of a
    clock that only forwards move."""
    from onnx_sched.models.inference import hsdag_search

    clock = [0.0]
    real = hsdag_search.net.forward

    def one_second(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        clock[0] += 1.0
        return real(*args, **kwargs)

    monkeypatch.setattr(hsdag_search, "work_clock", lambda: clock[0])
    monkeypatch.setattr(hsdag_search.net, "forward", one_second)
    p = hn.load_params()
    res = hsdag_search.run_episodes(squeeze_problem, p, EpisodeSettings(episodes=3, rounds=3), lambda pl, pred: pred,
                                    np.random.default_rng(0), time_limit=2.5)
    assert res.steps == 2 and res.episodes_run == 1 and clock[0] <= 2.5  # the third round would end at 3 s
    clock[0] = 0.0
    res = hsdag_search.run_episodes(squeeze_problem, p, EpisodeSettings(episodes=3, rounds=1), lambda pl, pred: pred,
                                    np.random.default_rng(0), time_limit=2.5)
    assert res.steps == 2 and res.episodes_run == 2 and clock[0] <= 2.5  # so would a third episode
    # rounds of 3, 2, 1, 1 s: a new episode's second round is estimated by its first, not by the last round
    cost = [3.0, 2.0, 1.0, 1.0]
    ran: list[float] = []

    def by_round(params, problem, rg, inputs, first, **kwargs):  # noqa: ANN001, ANN003, ANN202
        ran.append(cost[0] if first else cost[len(ran) - max(i for i, c in enumerate(ran) if c == cost[0])])
        clock[0] += ran[-1]
        return real(params, problem, rg, inputs, first, **kwargs)

    monkeypatch.setattr(hsdag_search.net, "forward", by_round)
    clock[0] = 0.0
    res = hsdag_search.run_episodes(squeeze_problem, p, EpisodeSettings(episodes=5, rounds=4, update_timestep=1000),
                                    lambda pl, pred: pred, np.random.default_rng(0), time_limit=11.5)
    assert ran == [3.0, 2.0, 1.0, 1.0, 3.0] and clock[0] <= 11.5  # a second round from 10 s would end at 12


def test_features_are_not_computed_when_their_estimate_passes_the_limit(squeeze_problem, monkeypatch) -> None:
    """The fractal dimension takes seconds on big graphs (2.8 s on a 20,993-op layered one): when its estimate
    alone ends past the limit, the features are not computed and no episode starts."""
    from onnx_sched.models.inference import hsdag_features, hsdag_search

    computed = []
    real = hsdag_search.node_features
    monkeypatch.setattr(hsdag_search, "node_features", lambda *a: computed.append(1) or real(*a))
    p = hn.load_params()
    run = lambda: hsdag_search.run_episodes(squeeze_problem, p, EpisodeSettings(episodes=1, rounds=1),  # noqa: E731
                                            lambda pl, pred: pred, np.random.default_rng(0), time_limit=60.0)
    assert run().episodes_run == 1 and computed == [1]
    monkeypatch.setattr(hsdag_features, "FRACTAL_SECONDS_PER_UNIT", 1e3)
    assert run().episodes_run == 1 and computed == [1, 1]  # remembered from the first run: free, so computed
    hsdag_features._FRACTAL_CACHE.clear()
    late = run()
    assert late.episodes_run == 0 and not late.candidates and computed == [1, 1]


def test_settings_and_reward_are_checked(squeeze_problem) -> None:
    with pytest.raises(ValueError, match="dropout"):
        EpisodeSettings(dropout=1.0)
    with pytest.raises(ValueError, match="update_timestep"):
        EpisodeSettings(update_timestep=0)
    g = squeeze_problem.graph
    with pytest.raises(ValueError, match="reward must be"):
        get_pass("hsdag", "latency")(g, PassContext(problem=squeeze_problem, options={"reward": "wall"}))
    with pytest.raises(ValueError, match="not OpenVINO devices"):
        get_pass("hsdag", "latency")(g, PassContext(problem=squeeze_problem, options={"reward": "measured"}))


def test_ablation_masks_zero_their_columns() -> None:
    cols = feature_columns()
    assert sorted(np.concatenate(list(cols.values())).tolist()) == list(range(48, 87))
    assert N_NODE_FEATURES == 90


def test_measured_reward_and_auto_run_on_openvino() -> None:
    from onnx_sched.api import optimize_model

    model = branch_model()
    problem = cpu_twice_problem(import_onnx(model).graph)
    opts = {"reward": "measured", "run_devices": "CPU,CPUB", "episodes": 2, "measure_budget": 2}
    res = optimize_model(model, "latency", "hsdag", 30, options=opts, problem=problem)
    d = res.report["details"]
    assert d["measured_latency_s"] <= d["measured_best_single_s"]  # single devices are timed candidates
    assert 2 <= d["measured_candidates"] <= 4 and d["run_devices"] == "CPU,CPUB"
    slower_b = replace(problem, op_time=problem.op_time * np.array([1.0, 2.0]))  # the model's CPUB: half as fast
    host_only = float(lat.evaluate(slower_b, np.zeros(problem.graph.n_ops, np.int64)))
    for method, first in (("openvino-auto-cpu-first", "CPU"), ("openvino-auto-gpu-first", "CPUB")):
        r = optimize_model(model, "latency", method, 30, options={"run_devices": "CPU,CPUB"}, problem=slower_b)
        assert r.report["details"]["auto_target"].startswith(f"AUTO:{first},")
        assert r.report["details"]["measured_latency_s"] > 0
        # the report's host-only is the model's, also when AUTO's device (a measured choice) is the baseline
        assert r.report["latency_s"]["host_only"] == pytest.approx(host_only)
    with pytest.raises(ValueError, match="needs the imported model"):
        get_pass("openvino-auto-cpu-first", "latency")(problem.graph, PassContext(problem=problem))
    three = lat.placement_problem(problem.graph, load_profiles(EXAMPLE_PROFILES))
    with pytest.raises(ValueError, match=r"^openvino-auto-gpu-first: .* run_devices=CPU,CPUB,CPU2$"):
        optimize_model(model, "latency", "openvino-auto-gpu-first", 30, problem=three)


def _squeezenet_tail_on_second_device(imp) -> np.ndarray:
    """light_squeezenet on CPU but its GlobalAveragePool on the second device: a split OpenVINO 2026.4's HETERO
    computes wrong (a uniform softmax) or fails on (an empty tensor between the parts)."""
    placement = np.zeros(imp.graph.n_ops, np.int64)
    placement[list(imp.graph.op_types).index("GlobalAveragePool")] = 1
    return placement


def test_placement_timer_checks_what_hetero_computes() -> None:
    from onnx_sched.bench.runtimes.openvino import PlacementTimer

    path = CORPUS / "onnx" / "light_squeezenet.onnx"
    if not path.exists():
        pytest.skip("corpus not present")
    imp = import_onnx(path)
    timer = PlacementTimer(imp, ["CPU", "CPUB"], runs=2, keep=1)
    half = (np.arange(imp.graph.n_ops) >= imp.graph.n_ops // 2).astype(np.int64)
    good = timer.time_placement(half)
    assert good["outputs_equal"] and np.isfinite(good["seconds"]) and good["max_abs_error"] == 0
    bad = timer.time_placement(_squeezenet_tail_on_second_device(imp))
    if bad["outputs_equal"]:
        pytest.skip("this OpenVINO computes the split right: the HETERO bug is fixed")
    assert "error" in bad or bad["max_abs_error"] > 1e-3


def test_measured_reward_refuses_placements_whose_outputs_differ(monkeypatch) -> None:
    from onnx_sched.bench.runtimes.openvino import PlacementTimer
    from onnx_sched.passes.placement._measured import MeasuredLatency

    model = branch_model()
    imp = import_onnx(model)
    problem = cpu_twice_problem(imp.graph)
    measured = MeasuredLatency(problem, imp, ["CPU", "CPUB"], budget=4, margin=10.0)
    wrong = np.arange(imp.graph.n_ops) % 2
    real = PlacementTimer.time_placement

    def timed(self, placement):  # noqa: ANN001, ANN202 - a HETERO run that got the numbers wrong (as above)
        report = real(self, placement)
        if np.array_equal(placement, wrong):
            return {**report, "seconds": 1e-9, "outputs_equal": False, "max_abs_error": 0.5}
        return report

    monkeypatch.setattr(PlacementTimer, "time_placement", timed)
    singles = [np.zeros(imp.graph.n_ops, np.int64), np.ones(imp.graph.n_ops, np.int64)]
    slowest = max(measured.measure(p) for p in singles)
    assert measured(wrong, predicted=0.0) == 2 * slowest  # refused: the penalty, not its 1 ns
    placement, _, seconds = measured.best()
    assert not np.array_equal(placement, wrong) and np.isfinite(seconds)
    assert measured.invalid == ["outputs differ (max abs error 0.5)"]
    only_wrong = MeasuredLatency(problem, imp, ["CPU", "CPUB"])
    only_wrong.measure(wrong)
    with pytest.raises(ValueError, match="ran no placement correctly"):
        only_wrong.best()
