"""Multi-device peak memory (paper 003): the memory model with transfers on hand-made graphs,
its agreement with the single-device model, decoding, BRKGA and the passes."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import CORPUS

from onnx_sched.brkga import BrkgaParams, brkga
from onnx_sched.cost import device_memory as dm
from onnx_sched.cost.memory import peak_memory
from onnx_sched.deadline import Deadline
from onnx_sched.devices import parse_memory_limits
from onnx_sched.graph import Graph
from onnx_sched.objectives import build_problem, get_objective
from onnx_sched.passes import PassContext, available, get_pass
from onnx_sched.synth.random_dags import er_graph

CPU, GPU = 0, 1


def chain() -> Graph:
    """0 (8 B) -> 1 (4 B) -> 2 (2 B, graph output)."""
    return Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[8, 4, 2], sinks_are_outputs=True)


def test_a_transfer_holds_the_tensor_on_both_devices_until_its_readers_ran() -> None:
    p = dm.DeviceMemoryProblem.build(chain(), ("CPU", "GPU"))
    steps = (dm.Step("op", 0, CPU), dm.Step("transfer", 0, GPU, CPU), dm.Step("op", 1, GPU),
             dm.Step("transfer", 1, CPU, GPU), dm.Step("op", 2, CPU))
    w = dm.walk(p, steps)
    # CPU: t0 (8) produced; freed when its last reader there (the transfer) ran; t1 arrives (4); t2 (2) kept
    assert w.live[:, CPU].tolist() == [8, 0, 0, 4, 2]
    # GPU: t0 arrives (8), op 1 adds t1 (4) -> 12, t0 dies; t1 leaves with its transfer
    assert w.live[:, GPU].tolist() == [0, 8, 4, 0, 0]
    assert w.per_device_peak.tolist() == [8, 12]
    # while a step runs: op 1 holds its input and output at once (12 on the GPU); a transfer's source keeps the
    # tensor until the copy is done (8 on the CPU at step 1, 4 on the GPU at step 3)
    assert w.during[:, CPU].tolist() == [8, 8, 0, 4, 6]
    assert w.during[:, GPU].tolist() == [0, 8, 12, 4, 0]


def test_a_graph_input_stays_on_the_host_and_its_copy_dies_after_its_readers() -> None:
    # graph input x (4 floats = 16 B) read by a Relu on the GPU; its output (16 B) is the graph output
    from onnx import TensorProto as T
    from onnx import helper as h

    from onnx_sched.importers.onnx import import_onnx

    model = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                                      [h.make_tensor_value_info("x", T.FLOAT, [4])],
                                      [h.make_tensor_value_info("y", T.FLOAT, [4])]),
                         opset_imports=[h.make_opsetid("", 17)], ir_version=10)
    p = dm.DeviceMemoryProblem.build(import_onnx(model).graph, ("CPU", "GPU"))
    x = int(np.flatnonzero(p.is_input)[0])
    w = dm.walk(p, (dm.Step("transfer", x, GPU, CPU), dm.Step("op", 0, GPU)))
    assert w.live.tolist() == [[16, 16], [16, 16]]  # after the Relu: x's copy gone, y kept on the GPU
    assert w.per_device_peak.tolist() == [16, 32]


def test_invalid_schedules_are_rejected_with_the_step() -> None:
    p = dm.DeviceMemoryProblem.build(chain(), ("CPU", "GPU"))
    with pytest.raises(ValueError, match="step 1"):  # op 1 on the GPU before its input got there
        dm.walk(p, (dm.Step("op", 0, CPU), dm.Step("op", 1, GPU), dm.Step("op", 2, GPU)))
    with pytest.raises(ValueError, match="exactly once"):
        dm.walk(p, (dm.Step("op", 0, CPU), dm.Step("op", 1, CPU)))
    with pytest.raises(ValueError, match="op_priority must give each of the 3 ops a priority"):
        dm.decode(p, np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="transfer_priority must have"):
        dm.decode(p, np.zeros(3), np.zeros(3), np.zeros(1))
    ops = (dm.Step("op", 0, CPU), dm.Step("op", 1, CPU), dm.Step("op", 2, CPU))
    for bad in (dm.Step("transfer", -1, GPU, CPU), dm.Step("transfer", 3, GPU, CPU), dm.Step("transfer", 0, GPU, -1),
                dm.Step("transfer", 0, GPU, 2)):  # no tensor -1 or 3, no device -1 or 2
        with pytest.raises(ValueError, match=r"step 1 \(transfer .*\): a transfer must move a tensor in 0..2 from a "
                                             r"device in 0..1"):
            dm.walk(p, ops[:1] + (bad,) + ops[1:])
    with pytest.raises(ValueError, match="chromosome must have"):
        dm.decode_op_order(p, np.zeros(3))


@pytest.mark.parametrize("seed", range(6))
def test_one_device_gives_the_single_device_model(seed: int) -> None:
    g = er_graph(60, 100_000 + seed)
    order = np.random.default_rng(seed).permutation(g.n_ops)
    from onnx_sched.dag import kahn_order

    order = kahn_order(g, priority=order.astype(float))
    p = dm.DeviceMemoryProblem.build(g, ("CPU",))
    steps = tuple(dm.Step("op", int(j), 0) for j in order)
    assert dm.walk(p, steps).peak == peak_memory(g, order)


@pytest.mark.parametrize("devices", [2, 3])
def test_every_chromosome_decodes_to_a_valid_schedule_scored_alike(devices: int) -> None:
    g = er_graph(50, 100_007)
    p = dm.DeviceMemoryProblem.build(g, tuple(f"D{i}" for i in range(devices)))
    keys = np.random.default_rng(0).random((40, dm.chromosome_size(p)))
    batch = dm.evaluate_keys(p, keys)
    bound = dm.lower_bound(p)
    for row, peaks in zip(keys, batch):
        placement, steps = dm.decode_keys(p, row)
        walked = dm.walk(p, steps)  # raises if invalid
        assert walked.per_device_peak.tolist() == peaks.tolist()
        assert [s.device for s in steps if s.kind == "op"] == placement[[s.item for s in steps if s.kind == "op"]].tolist()
        assert walked.peak >= bound


def test_memory_limits_make_overflows_infeasible() -> None:
    p = dm.DeviceMemoryProblem.build(chain(), ("CPU", "GPU"), {"GPU": 10})
    fit = dm.fitness(p, np.array([[8, 12], [14, 0], [9, 10]]))  # 14 B: every tensor at once, the most possible
    assert fit[2] == 10 and fit[1] == 14  # feasible: the largest peak
    assert fit[0] > fit[1]  # 2 B over the GPU's 10 B ranks below every feasible solution
    with pytest.raises(ValueError, match="unknown device 'NPU'"):
        dm.DeviceMemoryProblem.build(chain(), ("CPU", "GPU"), {"NPU": 1})
    assert parse_memory_limits(["GPU=4GiB"]) == {"GPU": 4 * 2**30}
    with pytest.raises(ValueError, match="DEVICE=SIZE"):
        parse_memory_limits(["GPU:4GiB"])


def _er_fitness() -> tuple[dm.DeviceMemoryProblem, object]:
    """A 40-op random graph on two devices and BRKGA's fitness of its chromosomes."""
    p = dm.DeviceMemoryProblem.build(er_graph(40, 100_011), ("CPU", "GPU"))
    return p, lambda keys: dm.fitness(p, dm.evaluate_keys(p, keys))


def test_brkga_is_deterministic_by_seed_and_keeps_its_budget() -> None:
    p, fit = _er_fitness()
    params = BrkgaParams(evaluations=1000)
    a = brkga(fit, dm.chromosome_size(p), params, seed=3)
    b = brkga(fit, dm.chromosome_size(p), params, seed=3)
    assert a.best_fitness == b.best_fitness and np.array_equal(a.best_keys, b.best_keys)
    assert a.evaluations <= 1000 and a.evaluations == 100 + 90 * a.generations
    assert [f for _, f in a.history] == sorted((f for _, f in a.history), reverse=True)  # elitism: never worse


def test_brkga_stops_inside_its_first_population_at_the_deadline_and_keeps_the_known_good_keys() -> None:
    n, target = 12, np.linspace(0, 1, 12)

    def slow(keys):  # 20 ms per chromosome: a population takes 2 s, past the 0.3 s limit
        time.sleep(0.02 * len(keys))
        return np.abs(keys - target).sum(axis=1)

    good = target.copy()
    result = brkga(slow, n, BrkgaParams(), seed=0, initial=good, deadline=Deadline(0.3))
    assert 10 <= result.evaluations < 100 and result.generations == 0
    assert len(result.population) == result.evaluations == len(result.fitness)
    assert result.best_fitness == 0.0 and np.array_equal(result.best_keys, good)


def test_brkga_first_population_chunks_at_most_double_after_fast_known_good_keys() -> None:
    """Known good chromosomes can score far faster than random ones (one device: no transfers); sizing the next
    chunk by their speed alone scored the whole rest of the population, seconds past the deadline."""
    n, target = 12, np.linspace(0, 1, 12)
    good = np.repeat(target[None, :], 10, axis=0)

    def fast_on_good(keys):  # the known good keys cost nothing, any other 20 ms
        time.sleep(0.02 * int((np.abs(keys - target).sum(axis=1) > 0).sum()))
        return np.abs(keys - target).sum(axis=1)

    result = brkga(fast_on_good, n, BrkgaParams(), seed=0, initial=good, deadline=Deadline(0.3))
    assert result.evaluations == 10 + 20 and result.generations == 0  # the seeds, then twice as many


def test_brkga_draws_only_the_first_population_it_has_time_to_score() -> None:
    """Drawing a population of a huge graph takes as long as scoring it (0.9 s for 100 chromosomes of a 20,000-op
    graph): past the deadline the rest of the first population is not drawn either."""
    from onnx_sched.brkga import GeneDistributions

    drawn = []

    class Counted(GeneDistributions):
        def sample(self, rng, count):  # noqa: ANN001, ANN202
            drawn.append(count)
            return super().sample(rng, count)

    def slow(keys):  # 20 ms per chromosome: a population takes 2 s, past the 0.3 s limit
        time.sleep(0.02 * len(keys))
        return keys.sum(axis=1)

    n = 12
    dist = Counted(alpha=np.ones(n), beta=np.ones(n), rho=np.full(n, 0.7))
    result = brkga(slow, n, BrkgaParams(), dist, seed=0, deadline=Deadline(0.3))
    assert 10 <= result.evaluations < 100 and sum(drawn) == result.evaluations


def test_brkga_with_time_to_spare_is_the_run_without_a_deadline_and_reserve_ends_it_earlier() -> None:
    p, fit = _er_fitness()
    params = BrkgaParams(evaluations=1000)
    free = brkga(fit, dm.chromosome_size(p), params, seed=3)
    timed = brkga(fit, dm.chromosome_size(p), params, seed=3, deadline=Deadline(600))
    assert np.array_equal(free.population, timed.population) and free.evaluations == timed.evaluations

    def slow(keys):  # 2 ms per chromosome: 0.18 s per generation
        time.sleep(0.002 * len(keys))
        return fit(keys)

    # 1.5 s: several generations; reserving 500 evaluations (about a second) after the run leaves room for fewer
    plain = brkga(slow, dm.chromosome_size(p), params, seed=3, deadline=Deadline(1.5))
    reserved = brkga(slow, dm.chromosome_size(p), params, seed=3, deadline=Deadline(1.5), reserve=500)
    assert 0 < reserved.generations < plain.generations


def test_the_climb_does_not_start_a_round_that_would_end_past_its_deadline(monkeypatch) -> None:
    """A round of 50 moves over a 14,237-op graph takes 0.36 s: the climb stops before one it has no time for."""
    from onnx_sched.jit import work_clock
    from onnx_sched.passes.device_memory import local_search

    p, _ = _er_fitness()
    real = local_search.score_keys

    def slow(problem, keys, fewer_transfers=False):  # noqa: ANN001, ANN202 -- 0.3 s per round
        time.sleep(0.3)
        return real(problem, keys, fewer_transfers)

    monkeypatch.setattr(local_search, "score_keys", slow)
    start = np.random.default_rng(0).random(dm.chromosome_size(p))
    t0 = work_clock()  # the deadline's clock: a first run's numba compilation is not on it
    _, _, used = local_search.climb(p, start, 10_000, 5, np.random.default_rng(0), Deadline(1.05))
    assert used == 1 + 5 * 2 and work_clock() - t0 < 1.05  # the start, two rounds; a third would end at 1.2 s


def test_a_search_at_the_lower_bound_stops_once_the_bytes_moved_settle() -> None:
    """``Settle`` at the lower bound (what ``auto`` passes): BRKGA and the climb stop after ``patience`` rounds
    without improvement once the peak is proven, and run on while it is not."""
    from onnx_sched.brkga import Settle
    from onnx_sched.passes.device_memory._common import at_lower_bound, score_keys
    from onnx_sched.passes.device_memory.local_search import climb, peak_or_bytes

    g = er_graph(40, 100_011)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))

    def fit(keys):
        return score_keys(p, keys, fewer_transfers=True)

    params = BrkgaParams(evaluations=20_000)
    free = brkga(fit, dm.chromosome_size(p), params, seed=3)
    settled = brkga(fit, dm.chromosome_size(p), params, seed=3, settle=at_lower_bound(p, 5))
    assert free.evaluations > 19_000 and int(free.best_fitness) == dm.lower_bound(p)  # this graph meets its bound
    flat = [f for _, f in settled.history][-6:]
    assert settled.evaluations < free.evaluations and len(set(flat)) == 1 and int(flat[0]) == dm.lower_bound(p)
    never = brkga(fit, dm.chromosome_size(p), params, seed=3, settle=Settle(at=dm.lower_bound(p) - 1, patience=5))
    assert never.evaluations == free.evaluations  # not at the bound: the budget decides
    rng = np.random.default_rng(0)
    keys, best, used = climb(p, settled.best_keys, 10_000, 20, rng, fewer_transfers=True, propose=peak_or_bytes,
                             settle=at_lower_bound(p, 5))
    assert used < 10_000 and best <= settled.best_fitness


def test_peak_mem_over_two_devices_is_the_multi_device_objective() -> None:
    g = er_graph(30, 100_013)
    assert isinstance(build_problem("peak-mem", g, devices=("CPU", "GPU")), dm.DeviceMemoryProblem)
    assert build_problem("peak-mem", g, devices=("CPU",)) is None  # one device: today's problem
    assert set(available("peak-mem-devices")) >= {"auto", "brkga", "local-search", "partition-dfs", "cpsat"}


@pytest.mark.parametrize("method", ["auto", "brkga", "tuned-brkga", "local-search", "partition-dfs", "cpsat"])
def test_passes_never_lose_to_the_host_only_input_order(method: str) -> None:
    from onnx_sched.api import schedule_graph

    g = er_graph(60, 100_017)
    problem = build_problem("peak-mem", g, devices=("CPU", "GPU"))
    ctx = PassContext(time_limit=2.0, problem=problem, options={"evaluations": 600})
    schedule, report = schedule_graph(g, "peak-mem-devices", method, ctx)
    objective = get_objective("peak-mem-devices")
    assert report["peak_bytes"]["output"] <= report["peak_bytes"]["input"]
    assert report["peak_bytes"]["output"] == max(report["per_device_peak_bytes"].values())
    assert objective.evaluate(g, ctx, schedule) == report["peak_bytes"]["output"]
    steps = report["schedule"]
    assert sum("op" in s for s in steps) == g.n_ops and sum("transfer" in s for s in steps) == report["transfers"]
    assert report["peak_bytes"]["lower_bound"] <= report["peak_bytes"]["output"]
    get_pass(method, "peak-mem-devices")  # registered under the objective's name


def test_cli_splits_a_corpus_model_over_two_devices(tmp_path) -> None:
    """The command writes a model ORT runs with the input's outputs, device metadata on every node,
    and a report whose schedule re-evaluates to its per-device peaks."""
    import json

    import onnx
    from click.testing import CliRunner

    from onnx_sched.bench.outputs import compare_outputs
    from onnx_sched.cli import main
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.objectives.peak_mem_devices import steps_from_json

    src = CORPUS / "onnx" / "light_squeezenet.onnx"
    out, rep = tmp_path / "split.onnx", tmp_path / "r.json"
    res = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out), "--devices", "CPU,GPU", "--time-limit", "4",
                                    "--memory-limit", "GPU=8MiB", "--report", str(rep)])
    assert res.exit_code == 0, res.output
    report = json.loads(rep.read_text())
    assert report["objective"] == "peak-mem-devices" and report["devices"] == ["CPU", "GPU"]
    assert report["peak_bytes"]["output"] <= report["peak_bytes"]["input"]
    assert report["memory_limits"] == {"GPU": 8 * 2**20} and report["feasible"] is True
    problem = dm.DeviceMemoryProblem.build(import_onnx(src).graph, ("CPU", "GPU"))
    walked = dm.walk(problem, steps_from_json(problem, report["schedule"]))
    assert dict(zip(problem.devices, walked.per_device_peak.tolist())) == report["per_device_peak_bytes"]
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    devices = {p.value for n in model.graph.node for p in n.metadata_props if p.key == "pkg.onnx_sched.device"}
    assert devices <= {"CPU", "GPU"} and devices
    # the written model alone holds the whole schedule: its node order, devices and recorded transfers
    from onnx_sched.bench.runtimes.device_plan import load_schedule

    alone = load_schedule(out)
    assert alone.steps == steps_from_json(alone.problem, report["schedule"])
    res = CliRunner().invoke(main, ["inspect", str(out), "--report", str(tmp_path / "i.json")])
    assert res.exit_code == 0, res.output
    placed = json.loads((tmp_path / "i.json").read_text())["placement"]
    assert placed["per_device_peak_bytes"] == report["per_device_peak_bytes"]
    assert placed["transfer_timing"] == "recorded" and placed["transfers"] == report["transfers"]
    import onnxruntime as ort

    from onnx_sched.bench.measure import random_inputs

    feed = random_inputs(str(src), seed=0)
    a = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feed)
    b = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feed)
    names = [o.name for o in model.graph.output]
    assert compare_outputs(dict(zip(names, a)), dict(zip(names, b)))[0]


def test_recorded_transfer_positions_give_back_the_schedule_that_the_node_order_alone_cannot() -> None:
    """A transfer run late keeps a tensor off the GPU while other work is there; the written model's node order and
    devices alone would run it as early as possible.  ``transfer_positions`` (what the export records) and
    ``steps_in_file_order`` give back the schedule; a record that no longer fits falls back to as early as possible."""
    from onnx_sched.objectives.peak_mem_devices import (
        placed_steps,
        schedule_json,
        steps_in_file_order,
        transfer_positions,
    )

    # op 0 (CPU, 100 B) is read by op 3; op 1 (80 B) is read by op 2 (1 B), read by op 3 (1 B, the output); 1-3 on GPU
    g = Graph.from_edges(4, [(0, 3), (1, 2), (2, 3)], output_bytes=[100, 80, 1, 1], sinks_are_outputs=True)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    placement = np.array([CPU, GPU, GPU, GPU])
    late = (dm.Step("op", 0, CPU), dm.Step("op", 1, GPU), dm.Step("op", 2, GPU), dm.Step("transfer", 0, GPU, CPU),
            dm.Step("op", 3, GPU))
    recorded = transfer_positions(schedule_json(p, late))
    assert recorded == [[g.tensor_names[0], "CPU", "GPU", 3]]
    assert steps_in_file_order(p, placement, recorded) == late
    assert placed_steps(p, placement, recorded) == (late, True)
    early = steps_in_file_order(p, placement)
    assert early[1] == dm.Step("transfer", 0, GPU, CPU)
    assert dm.walk(p, late).per_device_peak.tolist() == [100, 102]
    assert dm.walk(p, early).per_device_peak.tolist() == [100, 181]
    before_its_producer = [[g.tensor_names[2], "GPU", "CPU", 0]]  # e.g. nodes reordered after the export
    assert placed_steps(p, placement, before_its_producer) == (early, False)
    assert placed_steps(p, placement, [["no such tensor", "CPU", "GPU", 1]]) == (early, False)
    with pytest.raises(ValueError, match="does not fit this graph"):
        steps_in_file_order(p, placement, [[g.tensor_names[0], "CPU", "GPU", -1]])  # not the last slot


def test_cli_rejects_a_memory_limit_without_devices(tmp_path) -> None:
    from click.testing import CliRunner

    from onnx_sched.cli import main

    res = CliRunner().invoke(main, ["optimize", str(CORPUS / "onnx" / "light_squeezenet.onnx"), "-o", str(tmp_path / "o.onnx"),
                                    "--memory-limit", "GPU=1GiB"])
    assert res.exit_code != 0 and "two or more devices" in res.output
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("seed", range(3))
def test_cpsat_proves_the_optimum_that_enumeration_finds(seed: int) -> None:
    """Every placement x every op order x transfers as early / as late as possible, on 5 ops:
    CP-SAT's proven optimum is never above the best of them (it may place transfers in between)."""
    import itertools

    import networkx as nx

    g = er_graph(5, 100_300 + seed)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    best = None
    for placement in itertools.product(range(2), repeat=g.n_ops):
        for order in nx.all_topological_sorts(g.to_networkx()):
            priority = np.empty(g.n_ops)
            priority[list(order)] = -np.arange(g.n_ops)
            for when in (np.inf, -np.inf):
                steps = dm.decode(p, np.array(placement), priority, np.full(p.n_transfer_slots * 2, when))
                peak = dm.walk(p, steps).peak
                best = peak if best is None else min(best, peak)
    schedule = get_pass("cpsat", "peak-mem-devices")(g, PassContext(time_limit=20, problem=p))
    assert schedule.optimal
    assert dm.walk(p, schedule.steps).peak <= best
    assert schedule.lower_bound == dm.walk(p, schedule.steps).peak


def test_fewer_transfers_only_break_ties_of_equal_peak() -> None:
    p = dm.DeviceMemoryProblem.build(chain(), ("CPU", "GPU"))
    peaks = np.array([[8, 12], [8, 12], [8, 11]])
    fit = dm.fitness(p, peaks, transferred=np.array([12, 4, 14]))
    assert fit[1] < fit[0]  # same peak, fewer bytes moved
    assert fit[2] < fit[1]  # a byte less of peak beats any saving in transfers
    g = er_graph(40, 100_019)
    q = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    keys = np.random.default_rng(1).random((20, dm.chromosome_size(q)))
    peaks, moved = dm.evaluate_keys(q, keys, transferred=True)
    for row, want in zip(keys, moved):
        _, steps = dm.decode_keys(q, row)
        assert want == sum(int(q.arrays.size[s.item]) for s in steps if s.kind == "transfer")


@pytest.mark.parametrize(("devices", "tuned_for"), [(("CPU", "GPU"), 2), (("CPU", "GPU", "NPU"), 3),
                                                   (("CPU", "GPU", "NPU", "GPU2"), 2)])
def test_tuned_brkga_takes_the_setting_tuned_for_the_device_count(devices: tuple[str, ...], tuned_for: int) -> None:
    """2 and 3 devices each have their own grid search; a count never tuned takes the two-device setting, and the
    report says which."""
    import json

    from onnx_sched.passes.device_memory.tuned_brkga import setting_file

    g = er_graph(30, 100_029)
    p = dm.DeviceMemoryProblem.build(g, devices)
    s = get_pass("tuned-brkga", "peak-mem-devices")(g, PassContext(seed=0, problem=p, options={"evaluations": 800}))
    best = json.loads(setting_file(tuned_for).read_text())["best"]
    assert s.info["tuned_for_devices"] == tuned_for
    assert s.info["setting"] == {k: best[k] for k in s.info["setting"]}


@pytest.mark.parametrize("method", ["brkga", "tuned-brkga"])
def test_tidy_moves_fewer_bytes_at_the_same_peak(method: str) -> None:
    """After the search, ``tidy`` climbs on (peak, bytes moved): the peak stays, the bytes drop; ``tidy=0`` is the
    paper's method as it is."""
    g = er_graph(60, 100_023)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU", "NPU"))
    run = get_pass(method, "peak-mem-devices")

    def split(tidy: int) -> tuple[int, int, dict]:
        s = run(g, PassContext(seed=0, problem=p, options={"evaluations": 1000, "tidy": tidy}))
        moved = sum(int(p.arrays.size[x.item]) for x in s.steps if x.kind == "transfer")
        return dm.walk(p, s.steps).peak, moved, s.info

    peak0, moved0, info0 = split(0)
    peak, moved, info = split(3000)
    assert info0["tidy_evaluations"] == 0 and 0 < info["tidy_evaluations"] <= 3000
    assert info["evaluations"] == info0["evaluations"]  # the search itself is the same run
    assert peak <= peak0 and moved < moved0


def test_tidy_skips_its_brkga_when_the_time_left_would_not_cover_its_start_keys(monkeypatch) -> None:
    """Building the start keys decodes each partition step by step (0.7 s at 20,000 ops): with less time left
    than twice its estimate, ``tidy`` goes straight to its climb."""
    from onnx_sched.passes.device_memory import local_search

    g = er_graph(60, 100_023)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    keys = local_search.start_keys(p, 0)[0]
    built = []
    monkeypatch.setattr(local_search, "start_keys", lambda *a: built.append(1) or np.zeros((0, len(keys))))
    monkeypatch.setattr(local_search, "START_KEYS_SECONDS_PER_OP", 1.0)  # 120 s "needed"
    tidied, used = local_search.tidy_transfers(p, keys, PassContext(seed=0, problem=p), Deadline(5.0))
    assert not built and used > 0
    assert dm.fitness(p, dm.evaluate_keys(p, tidied[None]))[0] <= dm.fitness(p, dm.evaluate_keys(p, keys[None]))[0]


def test_a_split_that_one_device_matches_in_the_same_order_becomes_that_device(tmp_path) -> None:
    """0 on CPU, 1 on GPU, 2 on CPU ships 12 B for the peak one device has (12 B): prefer_one_device takes one
    device; a real split (lower peak than either device alone in its order) stays as it is."""
    import onnx
    from conftest import branchy_model

    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.passes.device_memory._common import keys_for
    from onnx_sched.passes.device_memory.local_search import prefer_one_device

    p = dm.DeviceMemoryProblem.build(chain(), ("CPU", "GPU"))
    split = keys_for(p, np.array([CPU, GPU, CPU]), np.arange(3))
    assert dm.evaluate_keys(p, split, transferred=True)[1][0] == 12
    placement, steps = dm.decode_keys(p, prefer_one_device(p, split))
    assert len(set(placement.tolist())) == 1 and all(s.kind == "op" for s in steps) and dm.walk(p, steps).peak == 12

    onnx.save(branchy_model(4), tmp_path / "branchy.onnx")
    g = import_onnx(tmp_path / "branchy.onnx").graph
    q = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU"))
    found = get_pass("brkga", "peak-mem-devices")(g, PassContext(seed=0, problem=q, options={"evaluations": 2000,
                                                                                             "tidy": 0}))
    keys = keys_for(q, dm.placement_of(g.n_ops, found.steps), dm.op_order(found.steps))
    alone = [dm.walk(q, dm.decode_keys(q, keys_for(q, np.full(g.n_ops, d), dm.op_order(found.steps)))[1]).peak
             for d in (CPU, GPU)]
    assert dm.walk(q, found.steps).peak < min(alone)  # a real split
    np.testing.assert_array_equal(prefer_one_device(q, keys), keys)


def test_a_tidy_chain_move_takes_the_chain_on_the_ops_device_and_stops_at_a_branch_or_device() -> None:
    from onnx_sched.passes.device_memory.local_search import _chain

    g = Graph.from_edges(7, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (2, 6)], output_bytes=[1] * 7)
    place = np.array([0, 0, 0, 0, 1, 1, 0])
    groups = [sorted(_chain(g, 3, place, np.random.default_rng(s))) for s in range(40)]
    assert all(grp in ([3], [2, 3], [1, 2, 3], [0, 1, 2, 3]) for grp in groups)  # back to the source, never 4 (GPU)
    assert [0, 1, 2, 3] in groups
    # forward from 1: 2 has two consumers, so the chain ends there
    assert all(set(_chain(g, 1, place, np.random.default_rng(s))) <= {0, 1, 2} for s in range(40))


def test_a_tidy_segment_move_puts_a_run_of_consecutive_scheduled_ops_on_one_device() -> None:
    """Each candidate differs from the start only in the affinities of ops that run one after another in its
    schedule, and those ops end on one device: a block with branches moves as a whole."""
    from onnx_sched.passes.device_memory._common import keys_for
    from onnx_sched.passes.device_memory.local_search import _segment

    g = er_graph(40, 100_031)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU", "NPU"))
    rng = np.random.default_rng(0)
    start = keys_for(p, rng.integers(0, 3, g.n_ops), np.arange(g.n_ops))
    order = dm.op_order(dm.decode_keys(p, start)[1]).tolist()
    before = dm.decode_keys(p, start)[0]
    lengths = set()
    for cand in _segment(p, start, 200, rng):
        changed = np.flatnonzero(cand != start)
        assert (changed < g.n_ops * 3).all()  # affinities only: priorities and transfer genes stay
        if not len(changed):
            continue
        placement = dm.decode_keys(p, cand)[0]
        moved = sorted({order.index(op) for op in changed // 3})
        run = order[moved[0]:moved[-1] + 1]  # the ops scheduled from the first moved one to the last
        assert len(set(placement[run].tolist())) == 1  # all on one device
        assert (placement[np.setdiff1d(np.arange(g.n_ops), run)] == before[np.setdiff1d(np.arange(g.n_ops), run)]).all()
        lengths.add(len(run))
    assert max(lengths) > 8


def test_an_infeasible_split_says_which_device_is_over_and_by_how_much(tmp_path) -> None:
    import json

    import onnx
    from click.testing import CliRunner
    from conftest import branchy_model

    from onnx_sched.cli import main

    src = tmp_path / "m.onnx"
    onnx.save(branchy_model(branches=2, n=64), str(src))
    rep = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["optimize", str(src), "-o", str(tmp_path / "o.onnx"), "--devices", "CPU,GPU",
                                    "--memory-limit", "CPU=1KiB", "--memory-limit", "GPU=1KiB", "--report", str(rep),
                                    "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    report = json.loads(rep.read_text())
    assert report["feasible"] is False
    assert any(n.startswith("no placement found fits the memory limits") for n in report["notes"])
    written = onnx.load(str(tmp_path / "o.onnx"))
    assert {p.key: p.value for p in written.metadata_props}["onnx_sched.memory_limits_met"] == "false"
    over = [f"{d} by" for d, b in report["over_limit_bytes"].items() if b > 0]
    text = " ".join(res.output.split())
    assert over and all(o in text for o in over) and "{" not in text.split("over:")[1].split(")")[0]


def test_the_table_shows_the_limits_and_whether_the_input_fits_them() -> None:
    from onnx_sched.objectives.peak_mem_devices import PeakMemoryDevices

    report = {"peak_bytes": {"input": 3 * 2**20, "output": 2 * 2**20, "lower_bound": 2**20}, "devices": ["CPU", "GPU"],
              "per_device_peak_bytes": {"CPU": 2 * 2**20, "GPU": 2**20}, "ops_per_device": {"CPU": 3, "GPU": 2},
              "transfers": 1, "transferred_bytes": 2**20, "memory_limits": {"CPU": 2 * 2**20}, "feasible": True,
              "over_limit_bytes": {}, "kept_input_order": False, "method_used": "brkga", "seconds": 0.1,
              "model": "m", "ops": 5}
    rows = {label: cells for label, *cells in PeakMemoryDevices().table(report).rows}
    assert rows["Memory limits"] == ["CPU 2.00 MiB", "CPU 2.00 MiB"]
    assert rows["Fits the limits"] == ["no", "yes"]  # the input runs everything on the CPU: 3 MiB
    rows = {label: cells for label, *cells in PeakMemoryDevices().table({**report, "memory_limits": {"GPU": 1}}).rows}
    assert rows["Fits the limits"][0] == "yes"  # a limit on another device only: the input leaves it empty


def test_the_most_held_while_a_step_runs_reaches_each_device_peak() -> None:
    g = er_graph(60, seed=3, p=0.08)
    p = dm.DeviceMemoryProblem.build(g, ("CPU", "GPU", "NPU"))
    rng = np.random.default_rng(0)
    w = dm.walk(p, dm.decode(p, rng.integers(0, 3, g.n_ops), rng.random(g.n_ops)))
    assert w.during.max(axis=0).tolist() == w.per_device_peak.tolist()
    assert (w.during >= w.live).all() and (w.during.max(axis=0) > w.live.max(axis=0)).any()


@pytest.mark.parametrize("tied", [False, True])
def test_a_wide_ready_set_is_decoded_in_priority_order_like_a_heap(tied: bool) -> None:
    """On a wide graph dozens of ops are ready at once, so the decoder's ready set outgrows its binary heap into
    the bucket queue (``QUEUE_FROM``); the op order must still be Kahn's order with the highest priority first and
    ties to the smaller op, as ``heapq`` gives it."""
    import heapq

    from onnx_sched.cost.device_memory_kernels import QUEUE_FROM
    from onnx_sched.synth.random_dags import ws_graph

    g = ws_graph(400, 5)
    p = dm.DeviceMemoryProblem.build(g, ("CPU",))
    keys = np.random.default_rng(1).random(dm.chromosome_size(p))
    if tied:
        keys = np.round(keys * 4) / 4
    prio = keys[g.n_ops: 2 * g.n_ops]
    indptr, preds = g.op_preds.indptr, g.op_preds.indices
    waits = np.diff(indptr).copy()
    succs = [[] for _ in range(g.n_ops)]
    for v in range(g.n_ops):
        for u in preds[indptr[v]:indptr[v + 1]]:
            succs[u].append(v)
    ready = [(-prio[v], v) for v in range(g.n_ops) if waits[v] == 0]
    heapq.heapify(ready)
    want, widest = [], len(ready)
    while ready:
        _, u = heapq.heappop(ready)
        want.append(u)
        for v in succs[u]:
            waits[v] -= 1
            if waits[v] == 0:
                heapq.heappush(ready, (-prio[v], v))
        widest = max(widest, len(ready))
    assert widest > QUEUE_FROM  # the bucket queue took over
    assert dm.decode_op_order(p, keys).tolist() == want
