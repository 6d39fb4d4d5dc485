"""REGAL (paper 003): features, action dequantisation, the ONNX policy, the ``regal`` pass."""

from __future__ import annotations

import time

import numpy as np
import pytest

from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.models.inference import regal as rg
from onnx_sched.models.inference.regal_features import n_node_features, position_column, prepare
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.synth import generate


def _problem(n: int = 24, seed: int = 3) -> tuple[Graph, dm.DeviceMemoryProblem]:
    g = generate("er", n, seed)
    return g, dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))


def test_feature_shapes_and_scale() -> None:
    g, p = _problem()
    inp = prepare(p, seed=0)
    assert inp.x.shape == (g.n_ops, n_node_features(2)) and inp.x.dtype == np.float32
    ptr, _ = p.consumers
    produced = np.asarray(g.tensor_producer) >= 0
    assert len(inp.src) == len(inp.dst) == len(inp.edge_x) == int(np.diff(ptr)[produced].sum())
    assert (g.tensor_producer[np.repeat(np.arange(g.n_tensors), np.diff(ptr))][
        np.repeat(produced, np.diff(ptr))] == inp.src).all()
    assert max(inp.x[:, :3].max(), inp.edge_x.max()) == pytest.approx(1.0)  # scaled by the graph's largest
    np.testing.assert_allclose(inp.x[:, 3:5].sum(axis=1), 1.0, rtol=1e-6)  # expected placement sums to 1
    assert inp.x[:, 6].sum() == 1.0 and inp.x[inp.symmetry_op, 6] == 1.0
    assert inp.x[inp.symmetry_op, 3] == 1.0  # pinned to device 0 in every chromosome
    assert inp.warm.evaluations == 100  # one population: the host-only chromosome and 99 uniform ones
    assert prepare(p, seed=0, evaluations=400).warm.evaluations == 370  # the paper's: 100 + 3 generations of 90


def test_the_feature_run_is_the_one_the_checkpoint_was_trained_with(tmp_path) -> None:
    pytest.importorskip("torch")
    import onnx

    from onnx_sched.models.training.regal_net import PolicyNet, export_policy

    _, p = _problem(30, 1)
    net = PolicyNet(n_node_features(2), 2, hidden=8, rounds=2)
    runs = {}
    for name, features in (("one_population", 100), ("paper", 400)):
        policy = rg.RegalPolicy(export_policy(net, tmp_path / f"{name}.onnx", pin=False, feature_evaluations=features))
        assert policy.feature_evaluations == features
        runs[name] = rg.run_regal(p, policy, 1000, seed=0).info["feature_evaluations"]
    assert runs == {"one_population": 100, "paper": 370}
    old = onnx.load(tmp_path / "paper.onnx")  # a checkpoint from before the key: the paper's feature run
    kept = [prop for prop in old.metadata_props if prop.key != "feature_evaluations"]
    del old.metadata_props[:]
    old.metadata_props.extend(kept)
    onnx.save(old, tmp_path / "old.onnx")
    assert rg.RegalPolicy(tmp_path / "old.onnx").feature_evaluations == 400
    old.metadata_props.add(key="feature_evaluations", value="0")
    onnx.save(old, tmp_path / "bad.onnx")
    with pytest.raises(ValueError, match="feature_evaluations='0' is not a positive integer"):
        rg.RegalPolicy(tmp_path / "bad.onnx")
    assert rg.run_regal(p, None, 1000, seed=0).info["feature_evaluations"] == 100  # the feature prior alone


def test_solution_action_encodes_the_solution_in_its_modes() -> None:
    """Decoding the distributions' means gives back the solution's placement; with as many levels as steps, its
    exact step sequence (ops and transfers share the decoder's priority scale)."""
    from onnx_sched.brkga import BrkgaParams
    from onnx_sched.passes.device_memory.brkga import solve

    g, p = _problem(30, 5)
    best = solve(p, BrkgaParams(evaluations=2000), seed=1)
    placement, steps = dm.decode_keys(p, best.best_keys)
    assert 0 < placement.sum() < g.n_ops and any(s.kind == "transfer" for s in steps)  # a real split
    assert all(g.tensor_producer[s.item] >= 0 for s in steps if s.kind == "transfer")  # no graph-input transfer
    for k, exact in ((rg.LEVELS, False), (2 * len(steps) + 1, True)):
        dist = rg.gene_distributions(p, rg.solution_action(p, best.best_keys, k), None, k)
        mean_placement, mean_steps = dm.decode_keys(p, dist.alpha / (dist.alpha + dist.beta))
        np.testing.assert_array_equal(mean_placement, placement)
        if exact:
            assert mean_steps == steps


def test_consensus_of_solutions_widens_only_where_they_disagree() -> None:
    pytest.importorskip("torch")
    from onnx_sched.brkga import BrkgaParams
    from onnx_sched.models.training.regal_train import consensus_action
    from onnx_sched.passes.device_memory.brkga import solve

    g, p = _problem(30, 5)
    a, b = (solve(p, BrkgaParams(evaluations=1000), seed=s).best_keys for s in (1, 2))
    np.testing.assert_array_equal(consensus_action(p, [a, a]), rg.solution_action(p, a))
    both = consensus_action(p, [a, b])
    pa, pb = dm.decode_keys(p, a)[0], dm.decode_keys(p, b)[0]
    assert (pa != pb).any() and (pa == pb).any()
    device1_mean, device1_var = both[:, 2], both[:, 3]  # group 1: the affinity for device 1
    assert (device1_var[pa == pb] == 0).all() and (device1_var[pa != pb] > 0).all()
    assert set(device1_mean[pa != pb]) == {2}  # levels 0 and 4 average to the middle


def test_leave_one_out_advantage_removes_what_a_steps_actions_share() -> None:
    """A reward shift common to the step's actions (the problem, the seed's luck) leaves the advantages unchanged;
    the advantages sum to zero, and an action better than the others gets a positive one."""
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.regal_train import RegalTrainConfig, leave_one_out_advantage, train

    reward = torch.tensor([-0.98, -1.02, -0.95, -1.01])
    adv = leave_one_out_advantage(reward)
    torch.testing.assert_close(leave_one_out_advantage(reward + 0.3), adv)
    assert abs(float(adv.sum())) < 1e-6
    assert int(adv.argmax()) == 2 and float(adv[2]) == pytest.approx(-0.95 - (-0.98 - 1.02 - 1.01) / 3)
    with pytest.raises(ValueError, match="at least 2 actions"):
        leave_one_out_advantage(reward[:1])
    with pytest.raises(ValueError, match="advantage must be 'learned' or 'leave-one-out', got 'loo'"):
        train(RegalTrainConfig(advantage="loo"))


def test_dequantisation_formulas() -> None:
    alpha, beta = rg.dequantise_beta(np.array([2, 0, 4]), np.array([1, 0, 4]), k=5)
    np.testing.assert_allclose([alpha[0], beta[0]], [1.0, 1.0])  # standard BRKGA: uniform
    np.testing.assert_allclose([alpha[1], beta[1]], [5 / 6, 25 / 6])  # mu 1/6, var 5/216
    mu, var = 5 / 6, 5 / 6 * 1 / 6 * 5 / 6  # m = 4, v = 4
    np.testing.assert_allclose(alpha[2] / (alpha[2] + beta[2]), mu)
    np.testing.assert_allclose(alpha[2] * beta[2] / ((alpha[2] + beta[2]) ** 2 * (alpha[2] + beta[2] + 1)), var)
    np.testing.assert_allclose(rg.dequantise_crossover(np.array([0, 2, 4]), k=5), [0.5, 0.7, 0.9])


def test_standard_action_is_standard_brkga_except_the_pinned_op() -> None:
    g, p = _problem()
    actions = np.tile([2, 1] * (2 * 2 + 1) + [2], (g.n_ops, 1))
    d = rg.gene_distributions(p, actions, symmetry_op=5)
    pinned = np.zeros(dm.chromosome_size(p), bool)
    pinned[[10, 11]] = True
    assert (d.alpha[~pinned] == 1).all() and (d.beta[~pinned] == 1).all() and (d.rho == 0.7).all()
    assert d.alpha[10] > d.beta[10] and d.alpha[11] < d.beta[11]
    with pytest.raises(ValueError, match="actions must be"):
        rg.gene_distributions(p, actions[:, :-1], 0)


def test_onnx_policy_matches_torch(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.regal_net import PolicyNet, export_policy

    _, p = _problem(30, 1)
    inp = prepare(p, seed=0)
    torch.manual_seed(0)
    net = PolicyNet(n_node_features(2), 2, hidden=8, rounds=2)
    for prm in net.parameters():  # away from the near-constant initial head
        prm.data.normal_(0, 0.5)
    policy = rg.RegalPolicy(export_policy(net, tmp_path / "regal.onnx"))
    with torch.no_grad():
        want = net(*(torch.from_numpy(a) for a in (inp.x, inp.edge_x, inp.src, inp.dst))).numpy()
    got = policy.logits(inp)
    assert got.shape == (p.graph.n_ops, rg.n_heads(2), rg.LEVELS)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_pass_tiny_budget_never_worse_than_host_only() -> None:
    if not rg.CHECKPOINT.is_file():
        pytest.skip("no shipped REGAL checkpoint")
    g, p = _problem(20, 7)
    ctx = PassContext(time_limit=60.0, seed=0, options={"evaluations": 500}, problem=p)
    s = get_pass("regal", "peak-mem-devices")(g, ctx)
    got = dm.walk(p, s.steps).peak
    host = dm.walk(p, [dm.Step("op", j, 0) for j in range(g.n_ops)]).peak
    assert got <= host and s.info["evaluations"] <= 500
    features = rg.load_policy().feature_evaluations  # the feature run's evaluations, then one population of 100
    with pytest.raises(ValueError, match=r"at least \d+ evaluations \(\d+ for its features"):
        get_pass("regal", "peak-mem-devices")(g, PassContext(options={"evaluations": features + 50}, problem=p))


def test_a_feature_run_that_takes_all_the_time_returns_its_best_without_the_policy(monkeypatch) -> None:
    g, p = _problem(30, 5)
    fitness = dm.fitness

    def slow(problem, peaks, transferred=None):  # 2 ms per chromosome: a population takes 0.2 s
        time.sleep(0.002 * len(peaks))
        return fitness(problem, peaks, transferred)

    monkeypatch.setattr(dm, "fitness", slow)
    host = dm.walk(p, [dm.Step("op", j, 0) for j in range(g.n_ops)]).peak
    spent = rg.run_regal(p, None, 5000, seed=0, deadline=Deadline(0.0))
    assert spent.info["action"].startswith("none") and spent.info["generations"] == 0
    assert spent.evaluations == 10  # the first chunk of the feature run's first population, the host-only keys in it
    assert dm.walk(p, dm.decode_keys(p, spent.best_keys)[1]).peak <= host
    short = rg.run_regal(p, None, 5000, seed=0, deadline=Deadline(0.1))  # without the cuts: 5,000 x 2 ms
    assert 10 < short.evaluations < 200 and dm.walk(p, dm.decode_keys(p, short.best_keys)[1]).peak <= host


def test_the_policy_does_not_run_when_its_forward_pass_would_not_fit(monkeypatch) -> None:
    """On a huge graph the network's forward pass takes seconds (1.4 s at 20,872 ops): with less time left than
    its estimate, the feature run's best is the answer and the network is not run."""
    g, p = _problem(30, 5)
    policy = rg.load_policy()
    ran = []
    monkeypatch.setattr(type(policy), "actions", lambda self, *a: ran.append(1) or pytest.fail("policy ran"))
    monkeypatch.setattr(rg, "FORWARD_SECONDS_PER_ELEMENT", 1e3)
    run = rg.run_regal(p, policy, 5000, seed=0, deadline=Deadline(30.0))
    assert run.info["action"].startswith("none") and not ran and run.evaluations == run.info["feature_evaluations"]


def test_missing_checkpoint_is_one_clear_line(monkeypatch, tmp_path) -> None:
    from onnx_sched.passes.device_memory import regal as regal_pass

    monkeypatch.setattr(rg, "CHECKPOINT", tmp_path / "absent.onnx")
    g, p = _problem(10, 0)
    with pytest.raises(ValueError, match="REGAL checkpoint .* missing") as err:
        regal_pass.run(g, PassContext(problem=p))
    assert "\n" not in str(err.value)


def test_pin_follows_the_checkpoint_metadata(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.regal_net import PolicyNet, export_policy

    torch.manual_seed(0)
    net = PolicyNet(n_node_features(2), 2, hidden=8, rounds=2)
    pinned = rg.RegalPolicy(export_policy(net, tmp_path / "pinned.onnx"))
    free_path = export_policy(net, tmp_path / "free.onnx", pin=False)
    assert pinned.pin and not rg.RegalPolicy(free_path).pin
    g, p = _problem(20, 7)
    run = get_pass("regal", "peak-mem-devices")
    s = run(g, PassContext(seed=0, options={"evaluations": 500, "model": str(free_path)}, problem=p))
    assert s.info["pinned"] is False  # the pass's default: as the policy was trained
    s = run(g, PassContext(seed=0, options={"evaluations": 500, "model": str(free_path), "pin": "true"}, problem=p))
    assert s.info["pinned"] is True


def test_feature_prior_follows_the_expected_position() -> None:
    g, p = _problem(40, 2)
    inp = prepare(p, seed=0, pin=False)
    a = rg.feature_prior(inp, 2)
    assert a.shape == (g.n_ops, rg.n_heads(2))
    position = inp.x[:, position_column(2)]
    np.testing.assert_array_equal(a[:, 4], np.rint(position * (rg.LEVELS - 1)))
    assert len(np.unique(a[:, 4])) >= 3  # a per-op decision, not one level for all
    standard = np.tile([2, 1] * 5 + [2], (g.n_ops, 1))
    rest = [h for h in range(rg.n_heads(2)) if h not in (4, rg.n_heads(2) - 1)]
    np.testing.assert_array_equal(a[:, rest], standard[:, rest])
    d = rg.gene_distributions(p, a, None)
    n = g.n_ops
    pri_mean = d.alpha[2 * n:3 * n] / (d.alpha[2 * n:3 * n] + d.beta[2 * n:3 * n])
    late, early = int(np.argmax(position)), int(np.argmin(position))
    assert pri_mean[late] > pri_mean[early]  # the decoder runs higher priorities first
    np.testing.assert_allclose(d.rho[:3 * n], 0.5)


def test_prior_option_runs_without_a_checkpoint(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(rg, "CHECKPOINT", tmp_path / "absent.onnx")
    g, p = _problem(20, 7)
    s = get_pass("regal", "peak-mem-devices")(g, PassContext(seed=0, options={"evaluations": 600, "prior": "true"},
                                                               problem=p))
    host = dm.walk(p, [dm.Step("op", j, 0) for j in range(g.n_ops)]).peak
    assert s.info["action"] == "feature-prior" and dm.walk(p, s.steps).peak <= host


def test_imitation_fits_the_feature_prior() -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.regal_data import make_instance
    from onnx_sched.models.training.regal_net import PolicyNet
    from onnx_sched.models.training.regal_train import _tensors, imitate

    torch.manual_seed(0)
    insts = [make_instance(generate("layered", 30, s), evaluations=500, pin=False, seeds=2) for s in (0, 1)]
    assert all(len(i.standards) == 2 and i.standard == i.standards[0] for i in insts)
    net = PolicyNet(n_node_features(2), 2, hidden=16, rounds=2)

    def priority_match() -> float:
        with torch.no_grad():
            return float(np.mean([(net(*_tensors(i)).argmax(dim=2).numpy()[:, 4]
                                   == rg.feature_prior(i.inputs, 2)[:, 4]).mean() for i in insts]))

    before = priority_match()
    targets = [rg.feature_prior(i.inputs, 2) for i in insts]
    result = imitate(net, insts, targets, 300, 3e-3, np.random.default_rng(0))
    assert result["steps"] == 300 and priority_match() > max(before, 0.6)


def test_a_seeded_imitation_target_starts_from_the_feature_runs_elites(monkeypatch) -> None:
    """``imitation_target="seeded"``: each reference run starts from the feature run's elites (REGAL's own BRKGA
    does), ``"best-known"`` from scratch; either target holds its run's best placement in its means."""
    pytest.importorskip("torch")
    from onnx_sched.brkga import BrkgaParams
    from onnx_sched.models.training import regal_train
    from onnx_sched.models.training.regal_data import make_instance

    inst = make_instance(generate("er", 40, 4), evaluations=500, pin=False)
    p, solve, runs = inst.problem, regal_train.solve, []

    def recording_solve(problem, params, *, seed, initial=None):
        result = solve(problem, params, seed=seed, initial=initial)
        runs.append((initial, result.best_keys))
        return result

    monkeypatch.setattr(regal_train, "solve", recording_solve)
    for target in ("seeded", "best-known"):
        cfg = regal_train.RegalTrainConfig(imitation_target=target, reference_evaluations=300)
        (action,) = regal_train.imitation_targets([inst], cfg, print)
        dist = rg.gene_distributions(p, action, None)
        np.testing.assert_array_equal(dm.decode_keys(p, dist.alpha / (dist.alpha + dist.beta))[0],
                                      dm.decode_keys(p, runs[-1][1])[0])
    (seeded, _), (scratch, _) = runs
    np.testing.assert_array_equal(seeded, inst.inputs.warm.population[:BrkgaParams().elites])
    assert scratch is None
    with pytest.raises(ValueError, match="imitation_target must be 'prior', 'best-known' or 'seeded', got 'x'"):
        regal_train.RegalTrainConfig(imitation_target="x")


def test_each_device_count_has_its_own_checkpoint(monkeypatch, tmp_path) -> None:
    """A 3-device problem loads ``regal_d3.onnx``; without it the pass says how to get one, in one line."""
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.regal_net import PolicyNet, export_policy

    monkeypatch.setattr(rg, "CHECKPOINTS", tmp_path)
    g = generate("er", 20, 7)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU", "NPU"))
    run = get_pass("regal", "peak-mem-devices")
    with pytest.raises(ValueError, match=r"regal_d3\.onnx missing: train it with onnx-sched train regal --devices 3"
                                         r" .*--option prior=true") as err:
        run(g, PassContext(seed=0, options={"evaluations": 500}, problem=p))
    assert "\n" not in str(err.value)
    torch.manual_seed(0)
    export_policy(PolicyNet(n_node_features(3), 3, hidden=8, rounds=2), tmp_path / "regal_d3.onnx", pin=False)
    s = run(g, PassContext(seed=0, options={"evaluations": 500}, problem=p))
    host = dm.walk(p, [dm.Step("op", j, 0) for j in range(g.n_ops)]).peak
    assert s.info["action"] == "mode" and dm.walk(p, s.steps).peak <= host
    two = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    with pytest.raises(ValueError, match="trained for 3 devices, the problem has 2"):
        run(g, PassContext(seed=0, options={"evaluations": 500, "model": str(tmp_path / "regal_d3.onnx")}, problem=two))


def test_the_anchor_holds_reinforce_near_the_policy_it_starts_from(monkeypatch) -> None:
    """With a strong KL anchor (``--anchor``) REINFORCE's policy stays closer to the one it started from than without
    one (same seed, same problems, no imitation: the start is the seeded initial policy)."""
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training import regal_data, regal_train
    from onnx_sched.models.training.regal_net import PolicyNet

    monkeypatch.setattr(regal_data, "TRAIN_CORPUS", ())
    monkeypatch.setattr(regal_data, "VALIDATION_CORPUS", ())
    torch.manual_seed(0)
    start = PolicyNet(n_node_features(2), 2, 32, 4)  # train() seeds torch the same way first
    tensors = regal_train._tensors(regal_data.make_instance(generate("er", 20, 7), evaluations=500, pin=False))

    def drift(anchor: float) -> float:
        cfg = regal_train.RegalTrainConfig(minutes=0.03, evaluations=500, synthetic=4, copies=0, min_ops=10,
                                           max_ops=20, imitation_steps=0, lr=1e-2, anchor=anchor,
                                           validate_every=10_000)
        last = PolicyNet(n_node_features(2), 2, 32, 4)
        last.load_state_dict(regal_train.train(cfg, echo=lambda s: None)["last_policy"])
        with torch.no_grad():
            p, q = (torch.distributions.Categorical(logits=net(*tensors)) for net in (last, start))
            return float(torch.distributions.kl_divergence(p, q).mean())

    free, held = drift(0.0), drift(100.0)
    assert held < 0.01 * free


def test_a_cold_exploration_temperature_samples_only_the_mode_and_leaves_the_policy_as_it_was(monkeypatch) -> None:
    """``--explore-temperature``: REINFORCE samples from softmax(logits / T).  Near T = 0 every sample is the mode, the
    leave-one-out advantages are zero and the policy does not move; at T = 1 the same run moves it."""
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training import regal_data, regal_train

    monkeypatch.setattr(regal_data, "TRAIN_CORPUS", ())
    monkeypatch.setattr(regal_data, "VALIDATION_CORPUS", ())

    def moved(temperature: float) -> float:
        cfg = regal_train.RegalTrainConfig(minutes=0.02, evaluations=500, synthetic=4, copies=0, min_ops=40,
                                           max_ops=60, imitation_steps=0, lr=1e-2, advantage="leave-one-out",
                                           explore_temperature=temperature, validate_every=10_000)
        torch.manual_seed(0)  # train() seeds torch the same way before it builds the policy
        start = regal_train.PolicyNet(n_node_features(2), 2, cfg.hidden, cfg.rounds).state_dict()
        last = regal_train.train(cfg, echo=lambda s: None)["last_policy"]
        return max(float((last[k] - start[k]).abs().max()) for k in start)

    assert moved(1e-4) == 0.0
    assert moved(1.0) > 1e-3
    with pytest.raises(ValueError, match="exploration temperature must be above 0"):
        regal_train.RegalTrainConfig(explore_temperature=0.0)


def test_training_on_three_devices_exports_a_three_device_policy(monkeypatch, tmp_path) -> None:
    pytest.importorskip("torch")
    from onnx_sched.models.training import regal_data, regal_train

    monkeypatch.setattr(regal_data, "TRAIN_CORPUS", ())
    monkeypatch.setattr(regal_data, "VALIDATION_CORPUS", ())
    cfg = regal_train.RegalTrainConfig(minutes=0.01, evaluations=500, synthetic=4, copies=0, min_ops=10, max_ops=20,
                                       samples=2, imitation_steps=5, devices=3)
    result = regal_train.train(cfg, echo=lambda s: None)
    onnx_path, _, _ = regal_train.export(result, tmp_path / "regal_d3")
    policy = rg.RegalPolicy(onnx_path)
    g = generate("layered", 16, 1)
    inputs = prepare(dm.DeviceMemoryProblem.build(g, regal_data.training_devices(3)), seed=0, pin=False)
    assert policy.devices == 3 and policy.actions(inputs).shape == (g.n_ops, rg.n_heads(3))
    with pytest.raises(ValueError, match="2 to 8 devices, got 9"):
        regal_data.training_devices(9)


def test_shipped_three_device_checkpoint_serves_three_devices() -> None:
    path = rg.checkpoint_for(3)
    if not path.is_file():
        pytest.skip("no shipped 3-device REGAL checkpoint")
    assert rg.load_policy(None, 3).devices == 3
    g = generate("layered", 30, 4)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU", "NPU"))
    s = get_pass("regal", "peak-mem-devices")(g, PassContext(seed=0, options={"evaluations": 500}, problem=p))
    host = dm.walk(p, [dm.Step("op", j, 0) for j in range(g.n_ops)]).peak
    assert s.info["action"] == "mode" and dm.walk(p, s.steps).peak <= host


def test_train_regal_defaults_to_the_inference_feature_run() -> None:
    from onnx_sched.cli.train import command
    from onnx_sched.models.inference.regal_features import FEATURE_EVALUATIONS

    option = next(p for p in command.commands["regal"].params if p.name == "feature_evaluations")
    assert option.default == FEATURE_EVALUATIONS  # the CLI keeps its own literal so it imports nothing heavy
