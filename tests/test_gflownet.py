"""Paper 002: chain schedules, target models, diversity metrics, the GFlowNet sampler and loss, candidate selection."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, chain_schedule, chain_times, chains_of, lanes_of
from onnx_sched.cost.makespan.diversity import chain_edges, diversity
from onnx_sched.cost.makespan.targets import speedups, target_model
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.machines import identical_devices, machines_from_dict
from onnx_sched.models.inference.gflownet import sample_trajectories, uniform_logits
from onnx_sched.models.inference.gflownet_env import ScheduleEnv
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.passes.makespan._priorities import cp_priority
from onnx_sched.synth import generate


def _problem(family: str = "er", n: int = 30, seed: int = 1, lanes: int = 3) -> ms.MakespanProblem:
    g = generate(family, n, seed)
    return ms.makespan_problem(g, identical_devices(lanes), np.random.default_rng(seed).uniform(0, 1, g.n_ops))


def _diamond(durations=(1.0, 2.0, 3.0, 1.0)) -> ms.MakespanProblem:
    g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[100, 100, 100, 100])
    return ms.makespan_problem(g, identical_devices(2), np.asarray(durations))


def test_chain_times_follow_eq2_on_a_diamond() -> None:
    p = _diamond()
    # both branches on their own device, then both on device 0 (branch 2 first)
    start, span = chain_times(p, Chains([[0, 0, 1, 0], [0, 0, 0, 0]], [[0, 1, 2, 3], [0, 2, 1, 3]]))
    assert start[0].tolist() == [0.0, 1.0, 1.0, 4.0] and span[0] == 5.0
    assert start[1].tolist() == [0.0, 4.0, 1.0, 6.0] and span[1] == 7.0


def test_chain_times_reject_invalid_chains() -> None:
    p = _diamond()
    with pytest.raises(ValueError, match="predecessors"):
        chain_times(p, Chains([[0, 0, 0, 0]], [[1, 0, 2, 3]]))
    with pytest.raises(ValueError, match="lane outside"):
        chain_times(p, Chains([[0, 0, 5, 0]], [[0, 1, 2, 3]]))
    for order in ([0, 1, 1, 3], [0, 1, 2, 7]):  # a repeated op, an op that is not there
        with pytest.raises(ValueError, match="not a permutation"):
            chain_times(p, Chains([[0, 0, 0, 0], [0, 0, 0, 0]], [[0, 1, 2, 3], order]))  # the second is bad


def test_chains_of_a_list_schedule_time_the_same() -> None:
    p = _problem()
    sched = get_pass("list-cp", "makespan")(p.graph, PassContext(problem=p))
    start, span = chain_times(p, chains_of(p, sched))
    assert span[0] == pytest.approx(ms.evaluate(p, sched).makespan)
    assert (start[0] <= np.asarray(sched.start) + 1e-9).all()


def test_list_first_free_spreads_a_chain_earliest_finish_keeps_it() -> None:
    """Paper 002's list scheduling (each op to the device that frees first) against earliest finish on a proxy
    without transfer costs: a chain 0 -> 1 -> 2 on two devices finishes at the same time either way, but only
    earliest finish keeps it on one device, so only first-free pays on a bandwidth-limited target."""
    g = Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[100, 100, 100])
    p = ms.makespan_problem(g, identical_devices(2), np.array([1.0, 2.0, 3.0]))
    eft = get_pass("list-cp", "makespan")(g, PassContext(problem=p))
    free = get_pass("list-cp", "makespan")(g, PassContext(problem=p, options={"device_choice": "first-free"}))
    assert list(eft.placement) == [0, 0, 0] and list(free.placement) == [0, 1, 0]
    assert list(eft.start) == list(free.start) == [0.0, 1.0, 3.0]
    bw = target_model("bandwidth").problem(p)
    spans = [chain_times(bw, chains_of(p, s))[1][0] for s in (eft, free)]
    assert spans[1] > spans[0] == 6.0
    with pytest.raises(ValueError, match="device_choice"):
        get_pass("list-cp", "makespan")(g, PassContext(problem=p, options={"device_choice": "random"}))


def test_first_free_list_cp_is_measured_against_the_earliest_finish_baseline() -> None:
    """``optimize --method list-cp --option device_choice=first-free`` is never worse than plain list-cp."""
    from onnx_sched.api import schedule_graph

    p = _problem("er", 40, 3, lanes=4)
    plain = get_pass("list-cp", "makespan")(p.graph, PassContext(problem=p)).info["makespan"]
    ctx = PassContext(problem=p, options={"device_choice": "first-free"})
    free = get_pass("list-cp", "makespan")(p.graph, ctx).info["makespan"]
    _, report = schedule_graph(p.graph, "makespan", "list-cp", ctx)
    assert report["makespan"]["list_cp"] == pytest.approx(plain)
    assert report["makespan"]["output"] == pytest.approx(min(plain, free))


@pytest.mark.parametrize("actions", ["local", "list"])
def test_narrowed_actions_put_each_op_on_a_predecessor_lane_or_one_more(actions: str) -> None:
    """``actions=local`` / ``list``: every sample valid; each op on one of its predecessors' lanes or on the lane
    that was free first / would finish it first when it was added, ties to the lowest index (replayed here with the
    proxy's times); and fewer cross-lane edges than unrestricted."""
    p = _problem("er", 30, 5, lanes=3)
    g = p.graph
    crossings = {}
    for narrowed in (False, True):
        ro = sample_trajectories(p, uniform_logits, 200, seed=1, actions=actions if narrowed else "all")
        chain_times(p, ro.chains)  # raises on an invalid schedule
        lane, order = ro.chains.lane, ro.chains.order
        edges = [(u, v) for v in range(g.n_ops) for u in g.op_preds.row(v)]
        crossings[narrowed] = np.mean([sum(lane[k, u] != lane[k, v] for u, v in edges) for k in range(len(lane))])
        if not narrowed:
            continue
        for k in range(len(lane)):
            free, finish = np.zeros(3), np.zeros(g.n_ops)
            for v in order[k]:
                preds = list(g.op_preds.row(v))
                ready = max([0.0, *(finish[u] for u in preds)])
                key = free if actions == "local" else np.maximum(free, ready) + p.durations[v, 0]
                allowed = {int(lane[k, u]) for u in preds} | {int(np.argmin(key))}
                assert lane[k, v] in allowed
                ln = lane[k, v]
                finish[v] = max(free[ln], ready) + p.durations[v, 0]
                free[ln] = finish[v]
    assert crossings[True] < crossings[False]


def test_finish_actions_put_each_op_on_its_earliest_finishing_lane_nearest_its_inputs() -> None:
    """``actions=finish``: only the op is chosen; its lane is one that would finish it first, among those the one
    holding most of its input bytes (then the lowest index), replayed here with the proxy's times.  Every sample is
    valid, no op waits for a lane when another would finish it sooner, and fewer edges cross than unrestricted."""
    p = _problem("er", 30, 5, lanes=3)
    g = p.graph
    ro = sample_trajectories(p, uniform_logits, 200, seed=1, actions="finish")
    chain_times(p, ro.chains)  # raises on an invalid schedule
    lane, order = ro.chains.lane, ro.chains.order
    preds_of = {v: list(g.op_preds.row(v)) for v in range(g.n_ops)}
    bytes_of = {v: p.edge_bytes[g.op_preds.indptr[v]:g.op_preds.indptr[v + 1]] for v in range(g.n_ops)}
    for k in range(len(lane)):
        free, finish = np.zeros(3), np.zeros(g.n_ops)
        for v in order[k]:
            ready = max([0.0, *(finish[u] for u in preds_of[v])])
            key = np.maximum(free, ready) + p.durations[v, 0]
            tied = np.flatnonzero(key == key.min())
            held = [sum(b for u, b in zip(preds_of[v], bytes_of[v]) if lane[k, u] == ln) for ln in tied]
            assert lane[k, v] == tied[int(np.argmax(held))]
            finish[v] = key[lane[k, v]]
            free[lane[k, v]] = finish[v]
    edges = [(u, v) for v in range(g.n_ops) for u in preds_of[v]]

    def crossings(chains: Chains) -> float:
        return float(np.mean([sum(chains.lane[k, u] != chains.lane[k, v] for u, v in edges)
                              for k in range(len(chains.lane))]))

    assert crossings(ro.chains) < crossings(sample_trajectories(p, uniform_logits, 200, seed=1).chains)


def test_list_actions_can_sample_the_list_schedule() -> None:
    """``actions=list`` keeps list-cp's choice at every step: replaying list-cp's dispatch order (its critical-path
    priority, a topological order) under the narrowed mask finds each of its (op, lane) actions valid, and the
    replay reproduces its makespan (with ``local`` it does not: on this graph list-cp puts some op on a lane that
    neither holds a predecessor nor frees first)."""
    p = _problem("layered", 30, 0, lanes=3)
    listed = chains_of(p, get_pass("list-cp", "makespan")(p.graph, PassContext(problem=p)))
    env = ScheduleEnv(p, 1, actions="list")
    for v in np.argsort(-cp_priority(p), kind="stable"):
        mask = env.observe()[2][0]
        assert mask[v, listed.lane[0, v]], f"op {v} on lane {listed.lane[0, v]} is not a valid list action"
        env.step(np.array([v * env.n_lanes + listed.lane[0, v]]))
    assert env.makespans()[0] == pytest.approx(chain_times(p, listed)[1][0])
    with pytest.raises(ValueError, match="actions must be one of"):
        ScheduleEnv(p, 1, actions="near")


def test_target_models_charge_cross_device_reads_only() -> None:
    p = _diamond()
    same, split = Chains([[0, 0, 0, 0]], [[0, 1, 2, 3]]), Chains([[0, 0, 1, 0]], [[0, 1, 2, 3]])
    for name in ("bandwidth", "latency"):
        t = target_model(name).problem(p)
        assert chain_times(t, same)[1][0] == chain_times(p, same)[1][0] == 7.0  # nothing crosses devices
        assert chain_times(t, split)[1][0] > chain_times(p, split)[1][0]
    # latency-limited: the delay barely depends on the bytes; bandwidth-limited: it does
    assert target_model("latency").problem(p).latency[0, 1] > target_model("bandwidth").problem(p).latency[0, 1]
    noisy = target_model("noisy", seed=3).problem(p)
    assert not np.allclose(noisy.durations, p.durations) and (noisy.durations > 0).all()
    np.testing.assert_allclose(speedups(p, same), [7.0 / 7.0])
    with pytest.raises(ValueError, match="unknown target"):
        target_model("fast")


def test_diversity_metrics_on_hand_made_schedules() -> None:
    order = [[0, 1, 2, 3]] * 3
    c = Chains([[0, 0, 1, 0], [0, 0, 1, 0], [1, 1, 0, 1]], order)  # the third relabels the devices of the first
    edges = chain_edges(c)
    assert edges[0].tolist() == [0 * 4 + 1, 1 * 4 + 3] == edges[2].tolist()
    start = np.array([[0.0, 1.0, 1.0, 4.0]] * 3)
    d = diversity(c, start, n_lanes=2)
    assert d["ged"] == 0.0 and d["d_inv"] == 0.0  # same chain graphs and times
    # d_sen sees the relabelling: pairs (0, 2) and (1, 2) differ in all 4 one-hot rows -> sqrt(8)
    assert d["d_sen"] == pytest.approx(2 * math.sqrt(8) / 3)
    other = Chains([[0, 0, 0, 0]], [[0, 2, 1, 3]])
    both = Chains.concat([c.take(np.array([0])), other])
    d2 = diversity(both, np.array([[0.0, 1.0, 1.0, 4.0], [0.0, 4.0, 1.0, 6.0]]), n_lanes=2)
    # chains {0-1, 1-3} vs {0-2, 2-1, 1-3}: 1 shared edge of 5 -> 3 differing entries / 5 edges
    assert d2["ged"] == pytest.approx(60.0)
    assert d2["d_inv"] == pytest.approx(math.sqrt(3.0**2 + 2.0**2))
    with pytest.raises(ValueError, match="lanes must lie in"):  # a lane past n_lanes has no one-hot row
        diversity(c, start, n_lanes=1)


def test_every_sampled_trajectory_is_a_valid_schedule() -> None:
    p = _problem("layered", 40, 2)
    ro = sample_trajectories(p, uniform_logits, 64, batch=16, seed=0)
    start, span = chain_times(p, ro.chains)  # raises on an invalid chain schedule
    np.testing.assert_allclose(p.total_work() / span, ro.speedup)
    for k in range(0, 64, 13):
        ms.validate(p, start[k], lanes_of(p).unit[ro.chains.lane[k]])
    assert len({ro.chains.order[k].tobytes() for k in range(64)}) > 50  # the uniform policy explores
    assert (ro.log_pf < 0).all() and (ro.log_pb <= 0).all()


def test_a_deadline_shrinks_the_batches_and_spare_time_changes_nothing() -> None:
    p = _problem("layered", 40, 2)
    free = sample_trajectories(p, uniform_logits, 64, batch=16, seed=3)
    spare = sample_trajectories(p, uniform_logits, 64, batch=16, seed=3, deadline=Deadline(3600.0))
    np.testing.assert_array_equal(free.chains.order, spare.chains.order)  # the same draws
    np.testing.assert_array_equal(free.chains.lane, spare.chains.lane)
    # no time: not even one trajectory would end in time, so none is drawn
    late = sample_trajectories(p, uniform_logits, 64, batch=16, seed=3, deadline=Deadline(1e-9))
    assert len(late.speedup) == 0 and late.chains.lane.shape == (0, p.n_ops)


def test_gflownet_pass_without_time_to_sample_returns_the_better_reference() -> None:
    """No trajectory ends in time: the pass still answers, with list-cp or the no-split schedule, and says so."""
    p = _problem("layered", 40, 2)
    s = get_pass("gflownet", "makespan")(p.graph, PassContext(problem=p, time_limit=1e-9))
    assert s.info["candidates_generated"] == 0 and s.info["chosen"] in ("list-cp", "no-split")
    assert s.info["target"]["proxy_best_speedup"] is None
    listed = get_pass("list-cp", "makespan")(p.graph, PassContext(problem=p))
    assert s.info["makespan"] <= listed.info["makespan"] + 1e-9


def test_backward_policy_counts_parents() -> None:
    p = _diamond()
    env = ScheduleEnv(p, 1)
    lanes = 2
    log_pb = [env.step(np.array([op * lanes + ln]))[0] for op, ln in ((0, 0), (1, 0), (2, 1), (3, 0))]
    # after op 0: only op 0 removable; after 1 (lane 0): op 1; after 2 (lane 1): ops 1 and 2; after 3: op 3
    np.testing.assert_allclose(np.exp(-np.asarray(log_pb)), [1, 1, 2, 1])


def test_candidate_selection_prefers_the_target_and_reports_it() -> None:
    p = _problem(lanes=4)
    chains = sample_trajectories(p, uniform_logits, 200, seed=1).chains
    ctx = PassContext(problem=p, options={"target": "bandwidth", "top_k": 20})
    from onnx_sched.passes.makespan._candidates import select

    sched = select(p, chains, ctx, "test")
    tgt = sched.info["target"]
    assert tgt["model"] == "bandwidth" and tgt["speedup"] >= tgt["proxy_best_speedup"]
    assert len(sched.info["candidates"]) == 20
    best = max(max(c["target_speedup"] for c in sched.info["candidates"]), tgt["no-split_speedup"],
               tgt["list-cp_speedup"])
    assert best == pytest.approx(tgt["speedup"])  # the best candidate, or a reference when it is better
    assert tgt["speedup"] >= tgt["list-cp_speedup"] and tgt["speedup"] >= tgt["no-split_speedup"]
    proxies = [c["proxy_speedup"] for c in sched.info["candidates"]]
    assert proxies == sorted(proxies, reverse=True)
    again = chain_schedule(p, sched.info["lane"], sched.order, "again")
    assert again.info["makespan"] == pytest.approx(sched.info["makespan"])
    assert set(sched.info["diversity"]) == {"ged", "d_inv", "d_sen"}


def test_a_target_keeps_the_model_unsplit_when_every_split_is_slower_there() -> None:
    """On the bandwidth target a split pays for every tensor that crosses devices: where list-cp's split is
    slower there than the model not split, a method whose schedule loses there too (here list-cp itself and
    HEFT) gets the unsplit model, the report says the input was kept, and its ``list_cp`` makespan is still
    list-cp's on the proxy."""
    from onnx_sched.api import schedule_graph
    from onnx_sched.passes.makespan._candidates import first_lane, target_makespan

    p = _problem("layered", 30, 3, lanes=2)
    ctx = PassContext(problem=p, options={"target": "bandwidth"})
    list_cp = get_pass("list-cp", "makespan")(p.graph, ctx)
    whole = first_lane(p)
    unsplit = chain_schedule(p, whole.lane[0], whole.order[0], "whole")
    assert len(set(list_cp.placement.tolist())) > 1 and len(set(unsplit.placement.tolist())) == 1
    assert target_makespan(p, list_cp, ctx) > target_makespan(p, unsplit, ctx)  # the split costs more than it gains
    for method in ("list-cp", "heft"):
        schedule, report = schedule_graph(p.graph, "makespan", method, PassContext(problem=p,
                                                                                   options={"target": "bandwidth"}))
        assert schedule.method == "no-split" and report["kept_input_order"]
        assert len(set(schedule.placement.tolist())) == 1
        assert report["makespan"]["list_cp"] == pytest.approx(ms.evaluate(p, list_cp).makespan)
        assert report["makespan"]["output"] == pytest.approx(ms.evaluate(p, unsplit).makespan)
    on_proxy, _ = schedule_graph(p.graph, "makespan", "list-cp", PassContext(problem=p))
    assert on_proxy.method != "no-split"  # the proxy charges nothing for crossing: list-cp stays


def test_brkga_and_learned_candidates_on_every_target() -> None:
    p = _problem(lanes=4)
    for method, extra in (("brkga", {"evaluations": 500}), ("learned", {"candidates": 64})):
        for target in ("proxy", "noisy", "latency"):
            ctx = PassContext(problem=p, options={"target": target, "top_k": 10, **extra})
            sched = get_pass(method, "makespan")(p.graph, ctx)
            assert sched.info["target"]["model"] == target
            assert sched.info["target"]["speedup"] >= sched.info["target"]["proxy_best_speedup"]


def test_loss_gradient_equals_autograd_of_eq8() -> None:
    """The chunked replay gives exactly the gradient of the log-partition variance loss (eq. 7-8)."""
    torch = pytest.importorskip("torch")
    from onnx_sched.models.inference.features import relation_matrix
    from onnx_sched.models.inference.gflownet_env import env_arrays
    from onnx_sched.models.training import gflownet_train as gt
    from onnx_sched.models.training.gflownet_net import GFlowNetPolicy, policy_config

    torch.manual_seed(0)
    p = _problem("er", 8, 4, lanes=2)
    model = GFlowNetPolicy(policy_config(d_model=16, n_layers=1, head_dim=4, ffn_dim=16))
    cfg = gt.TrainConfig(batch=6, replay_chunk=7)
    sigma = 0.3
    stats, ro = gt.backward(model, p, sigma, cfg, seed=5)
    replay = [q.grad.clone() for q in model.parameters() if q.grad is not None]
    model.zero_grad()
    # direct: one autograd graph through every step
    x = torch.from_numpy(env_arrays(p).static)
    rel = torch.from_numpy(relation_matrix(p.graph))
    log_pf = torch.zeros(6)
    for node, pair, mask, action in ro.steps:
        logits = model(x, rel, torch.from_numpy(node), torch.from_numpy(pair), torch.full((1, 1), math.log(sigma)))
        logp = torch.log_softmax(logits.reshape(6, -1).masked_fill(~torch.from_numpy(mask.reshape(6, -1)), -math.inf), 1)
        log_pf = log_pf + logp.gather(1, torch.from_numpy(action)[:, None]).squeeze(1)
    np.testing.assert_allclose(log_pf.detach().numpy(), ro.log_pf, rtol=1e-4, atol=1e-4)
    zeta = torch.from_numpy((ro.speedup - 2) / sigma + ro.log_pb) - log_pf.double()
    loss = ((zeta - zeta.mean()) ** 2).mean()
    assert float(loss) == pytest.approx(stats["loss"], rel=1e-4)
    loss.backward()
    direct = [q.grad for q in model.parameters() if q.grad is not None]
    assert len(direct) == len(replay)
    for a, b in zip(replay, direct):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-5)


def test_a_few_updates_train_and_export(tmp_path) -> None:
    """Training runs end to end (both losses), writes a resumable checkpoint and an ONNX policy ORT samples from."""
    pytest.importorskip("torch")
    from onnx_sched.models.inference.gflownet import GFlowNetModel
    from onnx_sched.models.training import gflownet_train as gt

    problems = gt.synthetic_problems(("er", "layered"), 12, 2, seed=0, lanes=2)
    for loss in ("variance", "tb"):
        cfg = gt.TrainConfig(updates=3, batch=8, d_model=16, n_layers=1, head_dim=4, ffn_dim=16, loss=loss,
                             log_every=100)
        out = str(tmp_path / f"gfn_{loss}")
        result = gt.train(cfg, problems, out, echo=lambda *_: None)
        assert result["updates"] == 3 and all(np.isfinite(r["loss"]) for r in result["log"])
    resumed = gt.train(gt.TrainConfig(updates=4, batch=8, d_model=16, n_layers=1, head_dim=4, ffn_dim=16,
                                      log_every=100), problems, str(tmp_path / "gfn_variance"), echo=lambda *_: None,
                       resume=True)
    assert resumed["updates"] == 4 and len(resumed["log"]) == 4
    model = GFlowNetModel.load(tmp_path / "gfn_variance.onnx")
    p = problems[0]
    ro = sample_trajectories(p, model.step_fn(p, math.log(0.005)), 10, seed=0)
    chain_times(p, ro.chains)
    ctx = PassContext(problem=p, options={"model": str(tmp_path / "gfn_variance.onnx"), "candidates": 20,
                                          "target": "latency", "top_k": 5})
    sched = get_pass("gflownet", "makespan")(p.graph, ctx)
    assert sched.info["candidates_generated"] == 20 and len(sched.info["candidates"]) <= 5


def test_training_with_local_actions_records_them_and_the_pass_samples_with_them(tmp_path) -> None:
    """``actions=local``: one parent per state (log P_B = 0), the export says so, and the pass then narrows its
    actions by default (every op on a predecessor's lane or the first free one: fewer crossings than all actions)."""
    pytest.importorskip("torch")
    from onnx_sched.models.inference.gflownet import GFlowNetModel
    from onnx_sched.models.training import gflownet_train as gt

    problems = gt.synthetic_problems(("er",), 14, 1, seed=0, lanes=3)
    p = problems[0]
    assert (sample_trajectories(p, uniform_logits, 8, seed=0, actions="local").log_pb == 0).all()
    assert (sample_trajectories(p, uniform_logits, 8, seed=0).log_pb < 0).all()
    cfg = gt.TrainConfig(updates=2, batch=8, d_model=16, n_layers=1, head_dim=4, ffn_dim=16, log_every=100,
                         actions="local")
    out = str(tmp_path / "gfn_local")
    gt.train(cfg, problems, out, echo=lambda *_: None)
    model = GFlowNetModel.load(f"{out}.onnx")
    assert model.actions == "local"
    ctx = PassContext(problem=p, options={"model": f"{out}.onnx", "candidates": 20})
    assert get_pass("gflownet", "makespan")(p.graph, ctx).info["actions"] == "local"
    with pytest.raises(ValueError, match="actions"):
        gt.TrainConfig(actions="near")


@pytest.mark.parametrize("actions", ["local", "list", "finish"])
def test_shipped_narrowed_checkpoints_sample_with_their_actions(actions: str) -> None:
    """``gflownet_makespan_{local,list,finish}.onnx`` (no torch): trained with narrowed actions, the pass samples with
    them."""
    from onnx_sched.models import CHECKPOINTS
    from onnx_sched.models.inference.gflownet import GFlowNetModel

    path = CHECKPOINTS / f"gflownet_makespan_{actions}.onnx"
    assert GFlowNetModel.load(path).actions == actions
    assert GFlowNetModel.load(None).actions == "all"  # the default checkpoint: paper 002's action set
    p = _problem("layered", 30, 2, lanes=4)
    sched = get_pass("gflownet", "makespan")(p.graph, PassContext(problem=p, options={
        "model": str(path), "candidates": 100, "target": "bandwidth", "top_k": 10}))
    assert sched.info["actions"] == actions and sched.info["candidates_generated"] == 100
    assert ms.evaluate(p, sched).makespan == pytest.approx(sched.info["makespan"])


def test_devices_machine_file_problems_have_one_lane_per_stream() -> None:
    m = machines_from_dict({"devices": [{"name": "A", "streams": 2}, {"name": "B"}],
                            "links": [{"from": "A", "to": "B", "latency": 0.0, "bandwidth": 1e9}]})
    g = generate("er", 10, 0)
    p = ms.makespan_problem(g, m, np.ones(g.n_ops))
    assert lanes_of(p).unit.tolist() == [0, 0, 1]


def test_ppo_update_changes_the_policy() -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training import gflownet_train as gt
    from onnx_sched.models.training import ppo_scheduler as ppo
    from onnx_sched.models.training.gflownet_net import GFlowNetPolicy, policy_config

    torch.manual_seed(0)
    p = gt.synthetic_problems(("er",), 10, 1, seed=0, lanes=2)[0]
    cfg = ppo.PPOConfig(batch=8, epochs=2, d_model=16, n_layers=1, head_dim=4, ffn_dim=16)
    model = GFlowNetPolicy(policy_config(cfg.d_model, cfg.n_layers, cfg.heads_per_group, cfg.head_dim, cfg.ffn_dim))
    before = [q.detach().clone() for q in model.parameters()]
    stats = ppo.ppo_update(model, torch.optim.Adam(model.parameters(), lr=1e-2), p, cfg, entropy_coef=0.01, seed=0)
    assert 0 < stats["mean_speedup"] <= stats["max_speedup"] <= 2.0 + 1e-9  # at most the number of lanes
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _run_cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "onnx_sched.cli.__main__", *args], capture_output=True, text=True,
                          timeout=300)


def test_optimize_gflownet_on_a_real_model_reports_target_and_diversity(tmp_path) -> None:
    import json

    import onnx
    from conftest import CORPUS, assert_bitwise_equal, run_ort

    src = CORPUS / "onnx" / "light_inception_v1.onnx"
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    res = _run_cli("optimize", str(src), "-o", str(out), "--objective", "makespan", "--machines",
                   str(ROOT / "examples" / "machines_cpu_igpu_dgpu.json"), "--method", "gflownet", "--candidates",
                   "100", "--top-k", "10", "--target", "latency", "--report", str(report))
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["target"]["model"] == "latency" and r["target"]["speedup"] >= r["target"]["proxy_best_speedup"]
    assert set(r["diversity"]) == {"ged", "d_inv", "d_sen"} and 1 <= len(r["candidates"]) <= 10
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    assert_bitwise_equal(run_ort(src), run_ort(onnx.load(str(out))))
    bad = _run_cli("optimize", str(src), "-o", str(tmp_path / "x.onnx"), "--objective", "makespan", "--machines",
                   str(ROOT / "examples" / "machines_cpu_igpu_dgpu.json"), "--method", "gflownet", "--candidates", "0")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "candidates" in bad.stderr
    assert not (tmp_path / "x.onnx").exists()


def test_measured_target_runs_candidates_on_two_pinned_cores(tmp_path) -> None:
    """``--target measured``: real split-executor runs choose; never worse than list-cp on the same runs."""
    import json

    import onnx
    from conftest import assert_bitwise_equal, branchy_model, run_ort

    src = tmp_path / "m.onnx"
    onnx.save(branchy_model(branches=2, n=64), str(src))
    machines = tmp_path / "two_cores.json"
    machines.write_text(json.dumps({"devices": [{"name": "CPU", "peak_flops": 1e10, "mem_bandwidth": 1e10},
                                                {"name": "CPUB", "peak_flops": 1e10, "mem_bandwidth": 1e10}],
                                    "links": [{"from": "CPU", "to": "CPUB", "latency": 0, "bandwidth": 1e10}]}))
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    res = _run_cli("optimize", str(src), "-o", str(out), "--objective", "makespan", "--machines", str(machines),
                   "--method", "brkga", "--option", "evaluations=300", "--top-k", "4", "--target", "measured",
                   "--report", str(report))
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["target"]["model"] == "measured" and r["target"]["speedup"] > 0
    assert r["target"]["speedup"] >= r["target"]["proxy_best_speedup"]
    assert 1 <= r["details"]["measured_candidates"] == len(r["candidates"]) <= 4
    assert_bitwise_equal(run_ort(src), run_ort(onnx.load(str(out))))


def test_latency_objective_accepts_every_target(tmp_path) -> None:
    import json

    import onnx
    from conftest import branchy_model

    src = tmp_path / "m.onnx"
    onnx.save(branchy_model(branches=2, n=64), str(src))
    report = tmp_path / "r.json"
    common = ("optimize", str(src), "-o", str(tmp_path / "o.onnx"), "--objective", "latency", "--profiles",
              str(ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"), "--devices", "CPU,GPU.1", "--method", "mincut")
    res = _run_cli(*common, "--target", "measured", "--report", str(report))
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["target"]["model"] == "measured" and r["target"]["speedup"] > 0
    for target in ("bandwidth", "noisy"):
        ok = _run_cli(*common, "--target", target, "--report", str(report))
        assert ok.returncode == 0, ok.stderr
        r = json.loads(report.read_text())
        assert r["target"]["model"] == target and r["target"]["speedup"] > 0


def test_train_gflownet_command_writes_a_policy_the_pass_loads(tmp_path) -> None:
    pytest.importorskip("torch")
    stem = tmp_path / "new_folder" / "gfn"  # the folder is made
    res = _run_cli("train", "gflownet", "--graphs", "2", "--ops", "10", "--updates", "2", "--batch", "8",
                   "--export", str(stem))
    assert res.returncode == 0, res.stderr
    assert (stem.parent / "gfn.onnx").is_file() and (stem.parent / "gfn_head.onnx").is_file()
    bad = _run_cli("train", "gflownet", "--data", "corpus", "--export", str(stem))
    assert bad.returncode != 0 and "--corpus" in bad.stderr


def test_no_trainer_exports_over_the_shipped_checkpoints_by_default() -> None:
    """Trying a trainer in the repository must not replace what ships: default exports go under runs/."""
    from onnx_sched.cli.train import command

    for name, sub in command.commands.items():
        for param in sub.params:
            if param.name in ("export_stem", "out_dir"):
                assert not str(param.default).startswith("models/"), (name, param.default)
