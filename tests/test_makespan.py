"""Makespan model, list scheduling, HEFT / PEFT, CP-SAT, GA, auto and machine files.

Schedules are checked by an independent checker written here (precedence with
transfer delays, resource use at every start time), not only by
:func:`onnx_sched.cost.makespan.validate`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from onnx_sched.cost import makespan as ms
from onnx_sched.graph import Graph
from onnx_sched.machines import identical_devices, load_machines, machine_types, machines_from_dict
from onnx_sched.passes import PassContext, available, get_pass
from onnx_sched.schedule import Schedule
from onnx_sched.synth.attrs import MakespanAttrs, makespan_attrs
from onnx_sched.synth.layered import layered_graph
from onnx_sched.synth.random_dags import er_graph, sbm_graph

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LIST_METHODS = ("list-cp", "list-mopnr", "list-spt")


# ------------------------------------------------------------------ helpers
def check_schedule(problem: ms.MakespanProblem, start: np.ndarray, place: np.ndarray) -> float:
    """Independent validity check; returns the makespan."""
    g, n = problem.graph, problem.n_ops
    dur = problem.durations[np.arange(n), place]
    assert np.isfinite(dur).all(), "op on a unit it cannot use"
    assert (start >= 0).all()
    finish = start + dur
    eps = 1e-9 * max(1.0, finish.max())
    for v in range(n):
        lo, hi = g.op_preds.indptr[v], g.op_preds.indptr[v + 1]
        for k in range(lo, hi):
            u = g.op_preds.indices[k]
            delay = 0.0
            if place[u] != place[v]:
                delay = problem.latency[place[u], place[v]] + problem.edge_bytes[k] * problem.inv_bandwidth[place[u], place[v]]
            assert start[v] >= finish[u] + delay - eps, f"precedence {u}->{v} violated"
    for v in range(n):  # resource use is maximal at some start time
        if dur[v] == 0:
            continue
        t = start[v]
        running = (place == place[v]) & (start <= t + eps) & (finish > t + eps) & (dur > 0)
        assert problem.demand[running].sum() <= problem.capacity[place[v]], f"capacity exceeded at {t}"
    return float(finish.max())


def synth_problem(family: str, n: int, seed: int, capacities=(1, 1, 4)) -> ms.MakespanProblem:
    g = {"layered": layered_graph, "er": er_graph, "sbm": sbm_graph}[family](n, seed)
    return ms.problem_from_attrs(g, makespan_attrs(g, seed, capacities))


def wide_problem(n: int, seed: int, demand_max: int = 1, capacities=(1, 1, 4)) -> ms.MakespanProblem:
    """A sparse random DAG (lots of parallelism) with random integer durations and demands."""
    rng = np.random.default_rng(seed)
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 2.0 / n]
    g = Graph.from_edges(n, edges, output_bytes=rng.integers(4, 400, n) * 4)
    caps = tuple(capacities)
    mt = rng.integers(0, len(caps), n)
    dem = np.minimum(rng.integers(1, demand_max + 1, n), np.asarray(caps)[mt])
    attrs = MakespanAttrs(rng.integers(1, 30, n).astype(np.float64), mt.astype(np.int64), caps, dem.astype(np.int64))
    return ms.problem_from_attrs(g, attrs)


def device_problem(n: int, seed: int, streams=(1, 1, 2), bandwidth: float = 50.0) -> ms.MakespanProblem:
    """Heterogeneous devices with random durations (some ops restricted) and finite links."""
    rng = np.random.default_rng(seed)
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 3.0 / n]
    g = Graph.from_edges(n, edges, output_bytes=rng.integers(1, 100, n) * 4)
    names = [f"D{i}" for i in range(len(streams))]
    machines = machines_from_dict({
        "devices": [{"name": nm, "streams": s} for nm, s in zip(names, streams)],
        "links": [{"from": names[a], "to": names[b], "latency": float(rng.integers(1, 5)), "bandwidth": bandwidth}
                  for a in range(len(names)) for b in range(a + 1, len(names))],
    })
    d = rng.integers(1, 40, (n, len(names))).astype(np.float64)
    d[rng.random((n, len(names))) < 0.2] = np.inf
    d[np.arange(n), rng.integers(0, len(names), n)] = rng.integers(1, 40, n)  # every op runs somewhere
    return ms.makespan_problem(g, machines, d)


def ctx_for(problem: ms.MakespanProblem, time_limit: float = 5.0, **options) -> PassContext:
    return PassContext(time_limit=time_limit, seed=0, problem=problem, options=options)


# ------------------------------------------------------------- list scheduling
@pytest.mark.parametrize("family,n,seed", [("layered", 200, 0), ("er", 150, 1), ("sbm", 150, 2), ("layered", 60, 3)])
def test_list_schedules_are_valid(family: str, n: int, seed: int) -> None:
    problem = synth_problem(family, n, seed)
    g = problem.graph
    for name in LIST_METHODS:
        s = get_pass(name, "makespan")(g, ctx_for(problem))
        span = check_schedule(problem, s.start, s.placement)
        assert span == pytest.approx(s.info["makespan"])
        assert span >= ms.lower_bound(problem) - 1e-9
        assert list(s.order) == sorted(s.order, key=lambda v: (s.start[v], list(s.order).index(v)))
        assert ms.evaluate(problem, s).speedup == pytest.approx(problem.total_work() / span)


def test_list_with_random_priorities_and_demands() -> None:
    rng = np.random.default_rng(7)
    for seed in range(4):
        problem = wide_problem(80, seed, demand_max=3, capacities=(2, 3, 4))
        pr = rng.random((20, problem.n_ops))
        spans = ms.list_makespans(problem, pr)
        for row, span in zip(pr, spans):
            start, place, span1 = ms.run_list(problem, row)
            assert span1 == span
            assert check_schedule(problem, start, place) == pytest.approx(span)


def test_list_scheduling_follows_graham() -> None:
    """Paper 001 figure 1 style: 4 ops, 0 -> {1, 2} -> 3 on two unit-capacity slots of one type."""
    g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[4] * 4)
    attrs = MakespanAttrs(np.array([2.0, 3.0, 5.0, 1.0]), np.zeros(4, np.int64), (1,), np.ones(4, np.int64))
    problem = ms.problem_from_attrs(g, attrs)
    start, _, span = ms.run_list(problem, np.array([4.0, 2.0, 3.0, 1.0]))  # 0 > 2 > 1 > 3
    assert start.tolist() == [0.0, 7.0, 2.0, 10.0] and span == 11.0


def test_evaluate_order_only_schedule() -> None:
    problem = synth_problem("layered", 50, 4)
    order = np.arange(problem.n_ops)
    res = ms.evaluate(problem, Schedule(order=order, method="file"))
    assert check_schedule(problem, res.start, res.placement) == pytest.approx(res.makespan)


def test_invalid_schedule_is_rejected() -> None:
    problem = synth_problem("er", 40, 5)
    s = get_pass("list-cp", "makespan")(problem.graph, ctx_for(problem))
    start = s.start.copy()
    u, v = problem.graph.edges[0]
    start[v] = max(0.0, start[u] - 1.0)
    with pytest.raises(ValueError, match="before its input"):
        ms.validate(problem, start, s.placement)
    g = Graph.from_edges(3, [], output_bytes=[4] * 3)
    flat = ms.problem_from_attrs(g, MakespanAttrs(np.ones(3), np.zeros(3, np.int64), (2,), np.ones(3, np.int64)))
    assert ms.validate(flat, np.array([0.0, 0.0, 1.0]), np.zeros(3, np.int64)) == 2.0
    with pytest.raises(ValueError, match="uses 3 resource units"):
        ms.validate(flat, np.zeros(3), np.zeros(3, np.int64))


# ---------------------------------------------------------------------- CP-SAT
@pytest.mark.parametrize("seed,demand_max", [(0, 1), (1, 1), (2, 2), (3, 3)])
def test_cpsat_proves_optimum_and_list_never_beats_it(seed: int, demand_max: int) -> None:
    n = 20 + 3 * seed
    problem = wide_problem(n, seed, demand_max=demand_max, capacities=(1, 2, 4))
    s = get_pass("cpsat", "makespan")(problem.graph, ctx_for(problem, time_limit=20))
    assert s.optimal and s.info["cpsat_status"] == "OPTIMAL"
    opt = check_schedule(problem, s.start, s.placement)
    assert s.lower_bound == pytest.approx(opt)
    for name in LIST_METHODS + ("heft", "peft") if demand_max == 1 else LIST_METHODS:
        other = get_pass(name, "makespan")(problem.graph, ctx_for(problem))
        assert other.info["makespan"] >= opt - 1e-9
    spans = ms.list_makespans(problem, np.random.default_rng(seed).random((200, n)))
    assert spans.min() >= opt - 1e-9
    assert ms.lower_bound(problem) <= opt + 1e-9


def test_cpsat_models_past_the_symmetry_cap_are_solved_without_looking_for_symmetries(monkeypatch) -> None:
    """Presolve's symmetry search runs seconds past the time limit on large models, so a model past
    ``SYMMETRY_MAX_VARIABLES`` is solved without it, to the same proven optimum on a small one."""
    from onnx_sched import cp_sat

    problem = wide_problem(20, 0, capacities=(1, 2, 4))
    with_symmetry = get_pass("cpsat", "makespan")(problem.graph, ctx_for(problem, time_limit=20))
    levels = []
    real = cp_sat.cp_solver

    def recorded(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        solver = real(*args, **kwargs)
        levels.append(solver.parameters.symmetry_level)
        return solver

    monkeypatch.setattr("onnx_sched.passes.makespan.cpsat.cp_solver", recorded)
    get_pass("cpsat", "makespan")(problem.graph, ctx_for(problem, time_limit=20))
    monkeypatch.setattr(cp_sat, "SYMMETRY_MAX_VARIABLES", 10)
    without = get_pass("cpsat", "makespan")(problem.graph, ctx_for(problem, time_limit=20))
    assert levels == [2, 0]  # CP-SAT's default, then off
    assert with_symmetry.optimal and without.optimal
    assert without.info["makespan"] == pytest.approx(with_symmetry.info["makespan"])


def test_cpsat_on_synthetic_families_small() -> None:
    for family, seed in (("layered", 0), ("er", 1), ("sbm", 2)):
        problem = synth_problem(family, 30, seed)
        s = get_pass("cpsat", "makespan")(problem.graph, ctx_for(problem, time_limit=20))
        assert s.optimal
        lst = get_pass("list-cp", "makespan")(problem.graph, ctx_for(problem))
        assert lst.info["makespan"] >= s.info["makespan"] - 1e-9


def test_cpsat_scales_fractional_durations_safely() -> None:
    problem = wide_problem(25, 9)
    frac = replace(problem, durations=problem.durations * (np.pi / 7))
    s = get_pass("cpsat", "makespan")(frac.graph, ctx_for(frac, time_limit=5))
    check_schedule(frac, s.start, s.placement)
    assert not s.info["exact_model"]
    assert s.lower_bound == pytest.approx(ms.lower_bound(frac))  # no CP bound claimed for a rounded model


# ----------------------------------------------------- heterogeneous devices
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heft_peft_valid_with_transfers(seed: int) -> None:
    problem = device_problem(60, seed)
    assert problem.has_transfers
    for name in ("heft", "peft") + LIST_METHODS:
        s = get_pass(name, "makespan")(problem.graph, ctx_for(problem))
        span = check_schedule(problem, s.start, s.placement)
        res = ms.evaluate(problem, s)
        assert res.makespan == pytest.approx(span)
        assert span >= ms.lower_bound(problem) - 1e-9
        assert len(set(s.placement.tolist())) >= 2  # work is spread over devices


def test_transfer_cost_is_paid_and_charged_once_per_tensor_and_device() -> None:
    # 0 -> {1, 2}: op 0 only on A; 1 and 2 only on B: one tensor moved once to B
    g = Graph.from_edges(3, [(0, 1), (0, 2)], output_bytes=[400, 4, 4])
    machines = machines_from_dict({"devices": [{"name": "A"}, {"name": "B", "streams": 2}],
                                   "links": [{"from": "A", "to": "B", "latency": 2.0, "bandwidth": 100.0}]})
    inf = np.inf
    d = np.array([[1.0, inf], [inf, 3.0], [inf, 3.0]])
    problem = ms.makespan_problem(g, machines, d)
    s = get_pass("heft", "makespan")(g, ctx_for(problem))
    assert s.start.tolist() == [0.0, 7.0, 7.0]  # 1 + 2 + 400 / 100
    res = ms.evaluate(problem, s)
    assert res.makespan == 10.0 and res.transfers == 1 and res.transfer_bytes == 400.0
    # an expensive link keeps a chain on one device even if the other is faster
    g2 = Graph.from_edges(2, [(0, 1)], output_bytes=[10**6, 4])
    p2 = ms.makespan_problem(g2, machines, np.array([[1.0, 1.0], [2.0, 1.0]]))
    for name in ("heft", "peft", "list-cp"):
        s2 = get_pass(name, "makespan")(g2, ctx_for(p2))
        assert s2.placement[0] == s2.placement[1] and s2.info["makespan"] <= 3.0


def test_cpsat_devices_optimal_not_worse_than_heft() -> None:
    problem = device_problem(14, 3, streams=(1, 1), bandwidth=20.0)
    s = get_pass("cpsat", "makespan")(problem.graph, ctx_for(problem, time_limit=20))
    assert s.info["exact_model"] and s.optimal
    opt = check_schedule(problem, s.start, s.placement)
    for name in ("heft", "peft", "list-cp"):
        assert get_pass(name, "makespan")(problem.graph, ctx_for(problem)).info["makespan"] >= opt - 1e-9


# ------------------------------------------------------------- GA and auto
def test_ga_does_not_start_a_generation_that_would_end_past_its_time(monkeypatch) -> None:
    """A generation of a 20,000-op graph takes over a second: the GA stops before one it has no time for."""
    import time

    from onnx_sched.jit import work_clock
    from onnx_sched.passes.makespan import ga

    problem = synth_problem("er", 60, 3)
    real = ms.list_makespans

    def slow(problem, keys):  # noqa: ANN001, ANN202 -- 0.3 s per population, whatever its size
        time.sleep(0.3)
        return real(problem, keys)

    monkeypatch.setattr(ms, "list_makespans", slow)
    t0 = work_clock()  # the GA's clock: a first run's numba compilation is not on it
    _, _, gens = ga.search(problem, 0.75, seed=0, population=10, generations=100, seeds=4)
    assert gens == 2 and work_clock() - t0 < 0.75  # a third would have ended at 0.9 s


def test_ga_and_auto_not_worse_than_list() -> None:
    problem = synth_problem("er", 120, 11)
    cp = get_pass("list-cp", "makespan")(problem.graph, ctx_for(problem)).info["makespan"]
    ga = get_pass("ga", "makespan")(problem.graph, ctx_for(problem, time_limit=2.0, population=40, generations=10))
    assert check_schedule(problem, ga.start, ga.placement) <= cp
    auto = get_pass("auto", "makespan")(problem.graph, ctx_for(problem, time_limit=3.0))
    span = check_schedule(problem, auto.start, auto.placement)
    cands = auto.info["candidates"]
    assert span == min(cands.values()) and span <= cands["list-file"] and span <= cp
    assert {"list-file", "list-cp", "list-mopnr", "list-spt", "heft", "peft"} <= set(cands)


def test_registered_methods() -> None:
    assert {"list-cp", "list-mopnr", "list-spt", "heft", "peft", "cpsat", "ga", "auto"} <= set(available("makespan"))


def test_pass_without_problem_is_one_clear_error() -> None:
    g = layered_graph(10, 0)
    with pytest.raises(ValueError, match="machine description"):
        get_pass("list-cp", "makespan")(g, PassContext())


# ---------------------------------------------------------- machine files
def test_example_machine_files_load() -> None:
    types = load_machines(EXAMPLES / "machines_3types.json")
    assert types.kind == "types" and types.capacities == (1, 1, 4) and types.illustrative
    dev = load_machines(EXAMPLES / "machines_cpu_igpu_dgpu.json")
    assert dev.kind == "devices" and dev.names == ("CPU", "GPU.0", "GPU.1")
    assert len(dev.links) == 6 and dev.links[(1, 0)] == dev.links[(0, 1)]


BAD_FILES = [
    ("[1, 2]", "top level"),
    ("{", "not valid JSON"),
    ('{"machine_types": [{"name": "a", "capacity": 1}], "devices": []}', "exactly one"),
    ('{"machine_types": []}', "non-empty"),
    ('{"machine_types": [{"name": "a", "capacity": 0}]}', "capacity"),
    ('{"machine_types": [{"name": "a"}, {"name": "a"}]}', "duplicate"),
    ('{"machine_types": [{"name": "a", "speed": 3}]}', "unknown keys"),
    ('{"machine_types": [{"name": "a"}], "op_types": {"Conv": "b"}}', "unknown machine type"),
    ('{"devices": [{"name": "a"}, {"name": "b"}]}', "no link"),
    ('{"devices": [{"name": "a"}, {"name": "b"}], "links": [{"from": "a", "to": "c", "latency": 0, "bandwidth": 1}]}',
     "not a device"),
    ('{"devices": [{"name": "a"}, {"name": "b"}], "links": [{"from": "a", "to": "b", "latency": 0, "bandwidth": -1}]}',
     "bandwidth"),
    ('{"devices": [{"name": "a", "peak_flops": "fast"}]}', "peak_flops"),
    ('{"machine_types": [{"name": "a"}], "wat": 1}', "unknown top-level"),
]


@pytest.mark.parametrize("text,match", BAD_FILES)
def test_bad_machine_files_raise_one_value_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        load_machines(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg


def test_missing_machine_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        load_machines(tmp_path / "nope.json")


# ------------------------------------------------------- duration sources
def _costed_graph() -> Graph:
    g = Graph.from_edges(5, [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)], output_bytes=[4000] * 5,
                         op_types=["Conv", "Relu", "MatMul", "Add", "Softmax"])
    return replace(g, op_flops=np.array([2e9, 1e6, 4e9, 1e6, 5e6]), op_bytes=np.array([1e7, 8e6, 2e7, 8e6, 8e6]))


def test_roofline_durations_from_machine_files() -> None:
    g = _costed_graph()
    types = ms.makespan_problem(g, load_machines(EXAMPLES / "machines_3types.json"))
    assert types.source == "roofline" and types.fixed_unit.tolist() == [1, 2, 0, 2, 2]
    unit = types.machines.units[0]
    assert types.durations[2, 0] == pytest.approx(unit.overhead + max(4e9 / unit.peak_flops, 2e7 / unit.mem_bandwidth))
    dev = ms.makespan_problem(g, load_machines(EXAMPLES / "machines_cpu_igpu_dgpu.json"))
    assert np.isfinite(dev.durations).all() and dev.durations[2].argmin() == 2  # big MatMul fastest on the dGPU
    for problem in (types, dev):
        s = get_pass("heft", "makespan")(g, ctx_for(problem))
        check_schedule(problem, s.start, s.placement)


def test_profile_durations(tmp_path: Path) -> None:
    g = _costed_graph()
    prof = {"unit": "ms", "ops": {"n0": {"CPU": 2.0, "GPU.1": 0.5}, "n1": 0.1, "n2": {"GPU.0": 1.0}}}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(prof))
    problem = ms.makespan_problem(g, load_machines(EXAMPLES / "machines_cpu_igpu_dgpu.json"), path)
    assert problem.source == "profile"
    assert problem.durations[0].tolist() == [pytest.approx(2e-3), np.inf, pytest.approx(5e-4)]
    assert problem.durations[1].tolist() == pytest.approx([1e-4] * 3)
    assert np.isinf(problem.durations[2, [0, 2]]).all()
    assert np.isfinite(problem.durations[3:]).all()  # missing ops fall back to the roofline
    path.write_text(json.dumps({"ops": {"n0": {"TPU": 1.0}}}))
    with pytest.raises(ValueError, match="unknown units"):
        ms.makespan_problem(g, load_machines(EXAMPLES / "machines_cpu_igpu_dgpu.json"), path)


def test_synthetic_attrs_need_matching_capacities() -> None:
    g = layered_graph(30, 0)
    with pytest.raises(ValueError, match="capacities"):
        ms.makespan_problem(g, machine_types((1, 2, 4)), makespan_attrs(g, 0))
    problem = ms.makespan_problem(g, load_machines(EXAMPLES / "machines_3types.json"), makespan_attrs(g, 0))
    assert problem.device_names == ("matrix", "conv", "vector")


def test_demand_above_capacity_is_rejected() -> None:
    g = Graph.from_edges(2, [(0, 1)], output_bytes=[4, 4])
    attrs = MakespanAttrs(np.ones(2), np.zeros(2, np.int64), (1,), np.array([1, 2]))
    with pytest.raises(ValueError, match="needs 2 resource units"):
        ms.problem_from_attrs(g, attrs)


def test_gantt_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from onnx_sched.cost.gantt import lanes, plot_gantt

    problem = device_problem(30, 4)
    s = get_pass("heft", "makespan")(problem.graph, ctx_for(problem))
    lane = lanes(problem, s.start, s.placement)
    assert (lane < problem.capacity[s.placement]).all()
    out = tmp_path / "g.png"
    plot_gantt(problem, s, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_device_profile_set_durations() -> None:
    """A profile file of onnx_sched.profiling (format onnx-sched-profiles/1) prices every op per device."""
    path = EXAMPLES / "profiles_cpu_igpu_dgpu.json"
    if not path.exists():
        pytest.skip("no example device profile")
    g = _costed_graph()
    problem = ms.makespan_problem(g, load_machines(EXAMPLES / "machines_cpu_igpu_dgpu.json"), path)
    assert problem.source == "profile" and np.isfinite(problem.durations).all() and (problem.durations > 0).all()
    s = get_pass("peft", "makespan")(g, ctx_for(problem))
    check_schedule(problem, s.start, s.placement)


# ------------------------------------------------------- learned sampler
def test_plackett_luce_log_prob_is_a_distribution() -> None:
    torch = pytest.importorskip("torch")
    import itertools

    from onnx_sched.models.training.train_makespan import plackett_luce_log_prob

    y = torch.tensor([0.3, -1.2, 2.0, 0.5], dtype=torch.float64)
    perms = torch.tensor(list(itertools.permutations(range(4))))
    lp = plackett_luce_log_prob(y, perms)
    assert float(lp.exp().sum()) == pytest.approx(1.0)
    p = torch.softmax(y, 0)  # first pick of order (2, 3, 0, 1)
    rest = torch.softmax(y[[3, 0, 1]], 0)
    rest2 = torch.softmax(y[[0, 1]], 0)
    want = float(p[2] * rest[0] * rest2[0])
    got = float(plackett_luce_log_prob(y, torch.tensor([[2, 3, 0, 1]]))[0].exp())
    assert got == pytest.approx(want)


def test_tiny_training_run_exports_a_working_learned_pass(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from onnx_sched.models.training.train_makespan import TrainConfig, train

    cfg = TrainConfig(out_dir=str(tmp_path), n_ops=30, train_graphs=2, val_graphs=1, samples=16, epochs=1,
                      d_model=16, n_layers=1, ffn_dim=32, threads=1, prior="cp")
    result = train(cfg, echo=lambda *_: None)
    path = Path(result["path"])
    assert path.exists() and len(result["log"]) == 2
    assert result["log"][0]["val_greedy_over_list_cp"] < 1.1  # the cp prior starts near list-cp
    problem = synth_problem("er", 60, 3)
    s = get_pass("learned", "makespan")(problem.graph, ctx_for(problem, model=str(path), samples=32))
    span = check_schedule(problem, s.start, s.placement)
    cp = get_pass("list-cp", "makespan")(problem.graph, ctx_for(problem)).info["makespan"]
    assert span <= cp and s.info["chosen"] in ("greedy", "list-cp", "sample")
    dev = device_problem(25, 1)
    s2 = get_pass("learned", "makespan")(dev.graph, ctx_for(dev, model=str(path), samples=8))
    check_schedule(dev, s2.start, s2.placement)


def test_learned_without_checkpoint_is_one_clear_error(tmp_path: Path) -> None:
    from onnx_sched.errors import OnnxSchedError

    problem = synth_problem("er", 20, 0)
    with pytest.raises(OnnxSchedError, match="not found"):
        get_pass("learned", "makespan")(problem.graph, ctx_for(problem, model=str(tmp_path / "none.onnx")))


def test_shipped_sampler_schedules_real_and_synthetic_graphs() -> None:
    from onnx_sched.passes.makespan.learned import default_model

    if not default_model().exists():
        pytest.skip("no shipped makespan sampler")
    problem = synth_problem("sbm", 120, 5)
    s = get_pass("learned", "makespan")(problem.graph, ctx_for(problem, samples=64))
    span = check_schedule(problem, s.start, s.placement)
    assert span <= get_pass("list-cp", "makespan")(problem.graph, ctx_for(problem)).info["makespan"]
    roof = ms.makespan_problem(_costed_graph(), load_machines(EXAMPLES / "machines_3types.json"))
    s2 = get_pass("learned", "makespan")(roof.graph, ctx_for(roof, samples=4))
    check_schedule(roof, s2.start, s2.placement)


def test_auto_uses_ga_on_large_graphs() -> None:
    problem = synth_problem("er", 320, 2)
    auto = get_pass("auto", "makespan")(problem.graph, ctx_for(problem, time_limit=1.0))
    cands = auto.info["candidates"]
    assert "ga" in cands and "cpsat" not in cands
    assert check_schedule(problem, auto.start, auto.placement) == min(cands.values()) <= cands["list-cp"]


def test_auto_stops_at_the_lower_bound() -> None:
    """A chain: every list schedule meets the critical-path bound, so auto runs no search (no GA on 400 ops) and
    says the result is optimal."""
    n = 400
    g = Graph.from_edges(n, [(i, i + 1) for i in range(n - 1)], output_bytes=[4] * n)
    attrs = MakespanAttrs(np.arange(1, n + 1, dtype=np.float64), np.zeros(n, np.int64), (2,), np.ones(n, np.int64))
    problem = ms.problem_from_attrs(g, attrs)
    auto = get_pass("auto", "makespan")(problem.graph, ctx_for(problem, time_limit=5.0))
    assert "ga" not in auto.info["candidates"] and auto.optimal
    assert auto.info["makespan"] == pytest.approx(ms.lower_bound(problem))


def test_auto_includes_the_learned_sampler_when_its_checkpoint_exists() -> None:
    problem = synth_problem("layered", 120, 4)
    auto = get_pass("auto", "makespan")(problem.graph, ctx_for(problem, time_limit=1.0))
    assert "learned" in auto.info["candidates"]
    assert auto.info["makespan"] <= auto.info["candidates"]["learned"]
    missing = get_pass("auto", "makespan")(problem.graph, ctx_for(problem, time_limit=1.0, model="/nonexistent/m.onnx"))
    assert "learned" not in missing.info["candidates"]
    check_schedule(problem, missing.start, missing.placement)


def test_cpsat_keeps_the_list_schedule_when_its_model_would_not_be_built_in_time(monkeypatch) -> None:
    from onnx_sched.passes.makespan import cpsat

    g = er_graph(40, 1)
    problem = ms.makespan_problem(g, identical_devices(2), np.ones(g.n_ops))
    monkeypatch.setattr(cpsat, "BUILD_SECONDS_PER_TERM", 1.0)  # every model "takes" longer than the limit
    s = get_pass("cpsat", "makespan")(g, PassContext(problem=problem, time_limit=5.0))
    listed = get_pass("list-cp", "makespan")(g, PassContext(problem=problem))
    assert s.info["cpsat_status"].startswith("not built") and s.info["kept_hint"]
    assert s.info["makespan"] == pytest.approx(listed.info["makespan"])
