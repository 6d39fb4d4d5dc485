"""Paper 004's learned baselines Placeto (``placeto``) and the seq2seq LSTM placer (``rnn-placer``):
light install (torch blocked), never worse than a single device, seeded, the LSTM's gradient, the
measured reward through OpenVINO HETERO."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import BLOCK_TORCH, CORPUS
from test_placement import EXAMPLE_PROFILES, random_problem

from onnx_sched.models.inference import lstm_placer as lp
from onnx_sched.models.inference.hsdag_net import log_prob_grad
from onnx_sched.passes import PassContext, get_pass

METHODS = ("placeto", "rnn-placer")


def test_passes_run_without_torch_within_the_limit_and_beat_no_single_device() -> None:
    code = BLOCK_TORCH + textwrap.dedent(
        f"""
        import time
        import numpy as np
        from onnx_sched.cost import latency as lat
        from onnx_sched.importers.onnx import import_onnx
        from onnx_sched.passes import PassContext, get_pass
        from onnx_sched.passes.placement.single import single_device
        from onnx_sched.profiling import load_profiles
        g = import_onnx({str(CORPUS / "onnx" / "light_squeezenet.onnx")!r}).graph
        out = {{}}
        for devices in (["CPU", "GPU.0"], ["CPU", "GPU.0", "GPU.1"]):
            problem = lat.placement_problem(g, load_profiles({str(EXAMPLE_PROFILES)!r}), devices=devices)
            best_single = min(lat.evaluate(problem, single_device(problem, d)) for d in range(problem.n_devices))
            for method in {METHODS!r}:
                t0 = time.perf_counter()
                s = get_pass(method, "latency")(g, PassContext(time_limit=2, problem=problem))
                p = s.placement
                assert p is not None and p.shape == (g.n_ops,) and p.min() >= 0 and p.max() < len(devices), method
                assert np.isfinite(problem.op_time[np.arange(g.n_ops), p]).all(), method
                assert s.info["latency"] <= best_single * (1 + 1e-12), (method, s.info["latency"], best_single)
                out[method + str(len(devices))] = [time.perf_counter() - t0, s.info["episodes_run"]]
        assert "torch" not in sys.modules
        print(json.dumps(out))
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    for key, (seconds, episodes) in out.items():
        assert episodes >= 1, key
        assert seconds < 6.0, (key, seconds)  # 2 s budget; slack for loading and a shared machine


@pytest.mark.parametrize("method", METHODS)
def test_seeded_runs_repeat_and_learn_on_a_random_problem(method: str) -> None:
    problem = random_problem(24, 2, np.random.default_rng(5))
    runs = []
    for _ in range(2):
        ctx = PassContext(time_limit=120, seed=3, problem=problem, options={"episodes": 8, "batch": 4})
        runs.append(get_pass(method, "latency")(problem.graph, ctx))
    a, b = runs
    assert (a.placement == b.placement).all() and a.info["latency"] == b.info["latency"]
    assert a.info["episodes_run"] == 8
    if method == "rnn-placer":  # fresh weights sample widely; Placeto starts from HSDAG's (confident) checkpoint
        assert a.info["weight_updates"] >= 1
        c = get_pass(method, "latency")(problem.graph, PassContext(time_limit=120, seed=4, problem=problem,
                                                                 options={"episodes": 8, "batch": 4}))
        assert c.info["episode_latency_first"] != a.info["episode_latency_first"]  # another seed, other samples


@pytest.mark.parametrize("method", METHODS)
def test_options_are_checked(method: str) -> None:
    problem = random_problem(10, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="reward must be"):
        get_pass(method, "latency")(problem.graph, PassContext(problem=problem, options={"reward": "fast"}))
    with pytest.raises(ValueError, match="batch must be >= 2"):
        get_pass(method, "latency")(problem.graph, PassContext(problem=problem, options={"batch": 1}))
    with pytest.raises(ValueError, match="needs the imported model"):
        get_pass(method, "latency")(problem.graph, PassContext(problem=problem, options={"reward": "measured",
                                                                                        "run_devices": "CPU,CPUB"}))


@pytest.mark.parametrize("rows", [lp.ATTENTION_ROWS, 4])  # one block of attention rows, or two (4 + 2)
def test_lstm_backward_matches_finite_differences(rows: int, monkeypatch) -> None:
    monkeypatch.setattr(lp, "ATTENTION_ROWS", rows)
    rng = np.random.default_rng(0)
    T, F, H, k = 6, 5, 4, 3
    p = {n: rng.standard_normal(v.shape) * 0.5 for n, v in lp.init_params(F, H, k, rng).items()}
    x = rng.standard_normal((T, F))
    allowed = np.ones((T, k), bool)
    allowed[2, 1] = False  # a node one device cannot run
    acts = np.array([0, 2, 0, 1, 2, 1])

    def logp() -> float:
        return log_prob_grad(lp.forward(p, x, allowed, lambda t, _: int(acts[t])).logits, acts)[0]

    cache = lp.forward(p, x, allowed, lambda t, _: int(acts[t]))
    assert np.isneginf(cache.logits[2, 1]) and (cache.actions == acts).all()
    grads = lp.backward(p, cache, log_prob_grad(cache.logits, acts)[1])
    eps = 1e-6
    for name in lp.LSTM_PARAM_NAMES:
        for idx in list(np.ndindex(p[name].shape))[::3]:
            old = p[name][idx]
            p[name][idx] = old + eps
            up = logp()
            p[name][idx] = old - eps
            down = logp()
            p[name][idx] = old
            assert grads[name][idx] == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-7), (name, idx)


def test_lstm_rejects_a_forbidden_choice() -> None:
    rng = np.random.default_rng(0)
    p = lp.init_params(3, 4, 2, rng)
    allowed = np.array([[True, False], [True, True]])
    with pytest.raises(ValueError, match="device 1 chosen for node 0"):
        lp.forward(p, rng.standard_normal((2, 3)), allowed, lambda t, _: 1)


def test_measured_reward_on_openvino() -> None:
    from test_hsdag import cpu_twice_problem
    from test_placement import branch_model

    from onnx_sched.api import optimize_model
    from onnx_sched.importers.onnx import import_onnx

    model = branch_model()
    problem = cpu_twice_problem(import_onnx(model).graph)
    for method in METHODS:
        opts = {"reward": "measured", "run_devices": "CPU,CPUB", "episodes": 4, "batch": 2, "measure_budget": 2}
        d = optimize_model(model, "latency", method, 30, options=opts, problem=problem).report["details"]
        assert d["measured_latency_s"] <= d["measured_best_single_s"], method  # single devices are timed candidates
        assert 2 <= d["measured_candidates"] <= 4 and d["run_devices"] == "CPU,CPUB", method


def test_a_placeto_episode_stops_where_it_is_when_the_limit_passes() -> None:
    from onnx_sched.models.inference.hsdag_net import load_params
    from onnx_sched.models.inference.placeto_search import PlacetoPolicy, ReinforceSettings, reinforce

    problem = random_problem(30, 2, np.random.default_rng(2))
    policy = PlacetoPolicy(problem, load_params())
    rng = np.random.default_rng(0)
    full = policy.sample(rng)
    assert full.placement.shape == (30,)
    visited = []
    cut = policy.sample(rng, stop=lambda: len(visited.append(0) or visited) > 3)  # 3 sets visited, then stop
    untouched = np.asarray(policy.start)[policy.member]
    changed = cut.placement != untouched
    assert np.isin(np.flatnonzero(changed), np.flatnonzero(np.isin(policy.member, policy.order[:3]))).all()
    # no time at all: one episode, cut at once, still a full placement among the candidates
    res = reinforce(problem, policy, ReinforceSettings(episodes=50), lambda p, modelled: modelled, rng, time_limit=0.0)
    assert res.episodes_run == 1
    assert any((p == untouched).all() for p, _ in res.candidates.values())


def test_an_rnn_decode_stopped_at_the_limit_places_nothing_and_the_pass_keeps_a_single_device() -> None:
    """Half a seq2seq decode is no placement: a decode stopped on the way gives no episode, one that ends after
    the limit, or whose gradient would, gives its placement without gradients, and with no time at all the pass
    returns a single device."""
    from onnx_sched.models.inference.lstm_search import RnnPolicy
    from onnx_sched.models.inference.placeto_search import ReinforceSettings, reinforce
    from onnx_sched.passes.placement.single import single_device

    problem = random_problem(30, 2, np.random.default_rng(3))
    policy = RnnPolicy(problem, 8, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    assert policy.sample(rng, stop=lambda: True) is None
    def stop_after(looks: int):  # noqa: ANN202
        seen = []
        return lambda seconds=0.0: len(seen.append(0) or seen) > looks

    # 30 steps: the encoder and the decoder each look once (step 0), the episode once more after the decode
    assert policy.sample(rng, stop=stop_after(1)) is None  # stopped in the decoder
    done = policy.sample(rng, stop=stop_after(2))  # the limit passes after the decode
    assert done is not None and done.s1 is None and done.placement.shape == (30,)
    assert policy.sample(rng, stop=stop_after(3)).s1 is not None
    # the limit has not passed, but the gradient (about as long as the decode) would end past it: skipped
    short = policy.sample(rng, stop=lambda seconds=0.0: seconds > 0)
    assert short is not None and short.s1 is None
    res = reinforce(problem, policy, ReinforceSettings(episodes=50), lambda p, modelled: modelled, rng, time_limit=0.0)
    assert res.episodes_run == 0 and not res.candidates and res.history == ()
    s = get_pass("rnn-placer", "latency")(problem.graph, PassContext(time_limit=1e-9, problem=problem))
    singles = [single_device(problem, d) for d in range(problem.n_devices)]
    assert s.info["episodes_run"] == 0 and s.info["episode_latency_first"] is None
    assert any((s.placement == p).all() for p in singles)
