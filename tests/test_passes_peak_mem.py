"""Peak-memory ordering passes: known optima, validity, exactness against brute force."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnx_sched.cost.memory import peak_memory
from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.dag import is_topological_order
from onnx_sched.graph import Csr, Graph, TensorKind
from onnx_sched.passes import PassContext, available, get_pass
from onnx_sched.passes.order.beam import beam_search
from onnx_sched.passes.order.exact import single_node_cuts, solve_exact

PEAK_METHODS = ["file", "bfs", "dfs", "xla_dfs", "greedy", "random", "beam", "exact", "cpsat", "auto"]
SEARCHES = ["exact", "cpsat", "auto"]  # methods that must find the optimum of tiny graphs


def run(method: str, g: Graph, *, inplace: bool = False, time_limit: float = 5.0, **options):
    return get_pass(method, "peak-mem")(g, PassContext(time_limit=time_limit, inplace=inplace, options=options))


def brute_force(g: Graph, inplace: bool = False) -> int:
    return min(peak_memory(g, list(o), inplace) for o in nx.all_topological_sorts(g.to_networkx()))


def random_dag(n: int, seed: int, p: float = 0.3, *, shuffle: bool = False, types: bool = False) -> Graph:
    rng = np.random.default_rng(seed)
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p]
    if shuffle:
        perm = rng.permutation(n)
        edges = [(int(perm[u]), int(perm[v])) for u, v in edges]
    op_types = [str(rng.choice(["Relu", "Conv", "Add"])) for _ in range(n)] if types else None
    return Graph.from_edges(
        n, edges, output_bytes=rng.choice([1, 2, 4, 8], n), param_bytes=rng.integers(0, 3, n),
        sinks_are_outputs=bool(seed % 2), op_types=op_types,
    )


# --------------------------------------------------------------- hand-made graphs
def fork_join() -> Graph:
    """0 -> 1 -> 2 -> 5 and 0 -> 3 -> 4 -> 5; 1 and 3 write 10 bytes, the rest 1.
    Finishing one branch before starting the other peaks at 12; interleaving the two
    big ops peaks at 21."""
    return Graph.from_edges(6, [(0, 1), (1, 2), (2, 5), (0, 3), (3, 4), (4, 5)], output_bytes=[1, 10, 1, 10, 1, 1])


def multi_consumer() -> Graph:
    """Op 0 writes 8 bytes read by 1, 2, 3 (1 byte each); 4 joins them and op 5 (6 bytes).
    Running 5 first keeps its 6 bytes through 0..3 (6 + 8 + 3 = 17); the optimum (11)
    runs 0..3 first, and op 3 must hold t0 and all three small outputs at once."""
    return Graph.from_edges(
        6, [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4), (5, 4)], output_bytes=[8, 1, 1, 1, 1, 6]
    )


def multi_output() -> Graph:
    """Graph input x (3 B) -> op0 -> (a 4 B, b 4 B); op1: a, w -> c; op2: b -> d; op3: c, d -> y (output).
    The weight w (100 B) is not activation memory.  Peak = 3 + 8 + 1 = 12 whatever the order."""
    names = ("x", "a", "b", "w", "c", "d", "y")
    kinds = [TensorKind.INPUT, TensorKind.ACTIVATION, TensorKind.ACTIVATION, TensorKind.WEIGHT,
             TensorKind.ACTIVATION, TensorKind.ACTIVATION, TensorKind.OUTPUT]
    return Graph(
        name="multi_output",
        op_names=("split", "f", "g", "join"),
        op_types=("Split", "MatMul", "Conv", "Concat"),
        op_inputs=Csr.from_lists([[0], [1, 3], [2], [4, 5]]),
        op_outputs=Csr.from_lists([[1, 2], [4], [5], [6]]),
        tensor_names=names,
        tensor_bytes=np.array([3, 4, 4, 100, 1, 1, 2]),
        tensor_kind=np.array(kinds, dtype=np.int8),
        tensor_producer=np.array([-1, 0, 0, -1, 1, 2, 3]),
    )


def with_params() -> Graph:
    """Chains 0 -> 1 and 2 -> 3; op 1 needs 10 transient bytes (eq. 15).  Running it while
    t2 (5 B) is live peaks at 21; the optimum 16 keeps the chains apart."""
    return Graph.from_edges(4, [(0, 1), (2, 3)], output_bytes=[5, 1, 5, 1], param_bytes=[0, 10, 0, 0])


def inplace_fork() -> Graph:
    """0 (Conv, 4 B) feeds 1 (Relu, 4 B) and 2 (Conv, 1 B); 3 (Clip, 4 B, min from 2) joins them.
    With in-place reuse the Relu must run after the other reader of t0 (peak 5);
    without it every order peaks at 9."""
    return Graph.from_edges(
        4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[4, 4, 1, 4], op_types=["Conv", "Relu", "Conv", "Clip"]
    )


HAND_MADE = [
    # graph, inplace, optimal peak, a worse order and its peak
    (fork_join, False, 12, [0, 1, 3, 2, 4, 5], 21),
    (multi_consumer, False, 11, [5, 0, 1, 2, 3, 4], 17),
    (multi_output, False, 12, [0, 2, 1, 3], 12),
    (with_params, False, 16, [2, 0, 1, 3], 21),
    (inplace_fork, True, 5, [0, 1, 2, 3], 9),
    (inplace_fork, False, 9, [0, 1, 2, 3], 9),
]


@pytest.mark.parametrize(("make", "inplace", "opt", "worse", "worse_peak"), HAND_MADE)
def test_hand_made_optima(make, inplace, opt, worse, worse_peak):
    g = make()
    assert peak_memory(g, worse, inplace) == worse_peak
    assert brute_force(g, inplace) == opt
    for method in SEARCHES + ["beam"]:
        s = run(method, g, inplace=inplace)
        assert s.info["peak_bytes"] == opt, method
        assert s.info["inplace"] is inplace
        assert is_topological_order(g, s.order)
    exact = run("exact", g, inplace=inplace)
    assert exact.optimal and exact.lower_bound == opt


def test_bfs_interleaves_and_dfs_does_not_on_fork_join():
    g = fork_join()
    assert run("bfs", g).info["peak_bytes"] == 21
    assert run("dfs", g).info["peak_bytes"] == 12


def test_weights_are_not_activation_memory_and_outputs_stay_live():
    g = multi_output()
    s = run("greedy", g)
    assert s.info["peak_bytes"] == 12
    assert lower_bound(g) == 11  # op0 needs x + a + b; no order reaches it
    assert not run("greedy", g).optimal
    assert run("exact", g).optimal


# ------------------------------------------------------------------ validity
@pytest.mark.parametrize("method", PEAK_METHODS)
@pytest.mark.parametrize("inplace", [False, True])
def test_every_pass_returns_a_valid_order(method, inplace):
    for seed in range(4):
        g = random_dag(40, seed, p=0.08, shuffle=method != "file", types=True)
        s = run(method, g, inplace=inplace, time_limit=0.3, beam_width=64, samples=20, max_ops=40)
        assert is_topological_order(g, s.order), (method, seed)
        assert s.method == method
        assert s.info["peak_bytes"] == peak_memory(g, s.order, inplace)
        assert s.lower_bound is not None and lower_bound(g, inplace) <= s.lower_bound <= s.info["peak_bytes"]


def test_all_methods_registered():
    assert set(PEAK_METHODS) <= set(available("peak-mem"))


def test_file_pass_rejects_a_non_topological_file_order():
    g = Graph.from_edges(2, [(1, 0)], output_bytes=[1, 1])
    with pytest.raises(ValueError, match="before its input producer"):
        run("file", g)


def test_random_pass_is_seeded():
    g = random_dag(60, 3, p=0.05)
    ctx = lambda seed: PassContext(time_limit=5, seed=seed, options={"samples": 10})  # noqa: E731
    fn = get_pass("random", "peak-mem")
    assert np.array_equal(fn(g, ctx(1)).order, fn(g, ctx(1)).order)
    assert fn(g, ctx(1)).info["samples"] == 10


def test_beam_without_time_still_completes():
    g = random_dag(80, 5, p=0.05)
    s = run("beam", g, time_limit=0.0, beam_width=1000)
    assert is_topological_order(g, s.order)


def test_exact_without_time_returns_incumbent_with_a_valid_bound():
    g = random_dag(60, 7, p=0.05)
    res = solve_exact(g, inplace=False, time_limit=0.0)
    assert is_topological_order(g, res.order)
    assert lower_bound(g) <= res.lower_bound <= res.peak == peak_memory(g, res.order)


def test_exact_and_auto_prove_with_the_min_cut_bound_before_searching():
    """0 -> 1 -> 3 -> 4, 0 -> 2 -> 4: the must-live bound is 27 but while op 3 runs either 0's or 2's
    output is live, so no order beats 31 (the min cut) -- which the incumbent reaches: both passes
    prove it without a search (no segment searched), and report the cut as the bound."""
    g = Graph.from_edges(5, [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4)], output_bytes=[8, 5, 6, 20, 1])
    assert lower_bound(g) == 27
    res = solve_exact(g, inplace=False, time_limit=5.0)
    assert res.optimal and res.peak == res.lower_bound == 31
    assert res.info["graph_lower_bound"] == 31 and res.info.get("searched_segments", 0) == 0
    s = run("auto", g, time_limit=5.0)
    assert s.optimal and s.lower_bound == 31 == peak_memory(g, s.order)
    assert s.info["cut_bound"]["bytes"] == 31 and "exact" not in s.info


def test_single_node_cuts_split_a_chain_of_diamonds():
    # 0 -> {1, 2} -> 3 -> {4, 5} -> 6: ops 0, 3 and 6 lie on every path
    g = Graph.from_edges(7, [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5), (4, 6), (5, 6)], output_bytes=[1] * 7)
    assert single_node_cuts(g).tolist() == [0, 3, 6]


def test_exact_solves_segments_independently():
    # three fork/joins in a row: each segment has its own optimum; the peak is the max
    blocks = 3
    edges, sizes = [], []
    for b in range(blocks):
        o = 5 * b
        if b:
            edges.append((o - 1, o))
        edges += [(o, o + 1), (o + 1, o + 2), (o, o + 3), (o + 3, o + 4), (o + 2, o + 4)]
        sizes += [1, 10 + b, 1, 10 + b, 1]
    g = Graph.from_edges(5 * blocks, edges, output_bytes=sizes)
    interleaved = [o + k for o in range(0, 5 * blocks, 5) for k in (0, 1, 3, 2, 4)]
    assert peak_memory(g, interleaved) > brute_force(g)
    res = solve_exact(g, inplace=False, time_limit=10.0, incumbent=np.array(interleaved))
    assert res.optimal and res.info["segments"] >= blocks
    assert res.peak == brute_force(g)


# ------------------------------------------------------------- auto portfolio
def test_auto_keeps_the_file_order_when_nothing_beats_it():
    g = Graph.from_edges(5, [(i, i + 1) for i in range(4)], output_bytes=[3, 1, 4, 1, 5])
    s = run("auto", g)
    assert s.info["kept_input_order"] is True
    assert s.order.tolist() == list(range(5)) and s.optimal


@pytest.mark.parametrize("seed", range(4))
def test_auto_never_worse_than_file_order(seed):
    g = random_dag(30, seed, p=0.15, types=True)
    for inplace in (False, True):
        s = run("auto", g, inplace=inplace, time_limit=1.0)
        assert s.info["peak_bytes"] <= peak_memory(g, np.arange(g.n_ops), inplace)
        if s.optimal:
            assert s.lower_bound == s.info["peak_bytes"]


# ------------------------------------------------ exactness against brute force
@st.composite
def small_dags(draw):
    n = draw(st.integers(1, 9))
    pairs = list(itertools.combinations(range(n), 2))
    density = draw(st.sampled_from([0.25, 0.4, 0.6]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    edges = [pq for pq in pairs if rng.random() < density]
    perm = rng.permutation(n)
    edges = [(int(perm[u]), int(perm[v])) for u, v in edges]
    sizes = draw(st.lists(st.sampled_from([0, 1, 2, 4, 8]), min_size=n, max_size=n))
    params = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    types = draw(st.lists(st.sampled_from(["Relu", "Add", "Conv"]), min_size=n, max_size=n))
    return Graph.from_edges(
        n, edges, output_bytes=sizes, param_bytes=params, op_types=types, sinks_are_outputs=draw(st.booleans())
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=small_dags(), inplace=st.booleans())
def test_exact_equals_brute_force(g, inplace):
    best = brute_force(g, inplace)
    orders = list(nx.all_topological_sorts(g.to_networkx()))
    worst = max(orders, key=lambda o: peak_memory(g, list(o), inplace))
    res = solve_exact(g, inplace=inplace, time_limit=30.0, incumbent=np.array(worst))
    assert res.optimal and res.peak == best == res.lower_bound
    assert peak_memory(g, res.order, inplace) == best
    wide, _ = beam_search(g, 10**5, inplace=inplace)  # wider than any layer here: exact
    assert peak_memory(g, wide, inplace) == best


def greedy_by_definition(g: Graph, inplace: bool, prefix: tuple[int, ...] = ()) -> list[int]:
    """The greedy rule spelled out: each step scores every ready op by (memory after it, -bytes it frees, its
    step's peak, id) and runs the smallest; the ops of ``prefix`` run first."""
    from onnx_sched.cost.memory import memory_arrays, peek_kernel, step_kernel

    a = memory_arrays(g, inplace)
    args = (a.in_ptr, a.in_idx, a.out_ptr, a.out_idx, a.size, a.n_consumers, a.keep, a.param, a.inplace_ptr,
            a.inplace_idx)
    remaining, live, done, order = a.n_consumers.copy(), a.base, set(), []
    preds = [set(g.op_preds.row(v).tolist()) for v in range(g.n_ops)]
    while len(order) < g.n_ops:
        ready = [v for v in range(g.n_ops) if v not in done and preds[v] <= done]
        keys = {}
        for v in ready:
            m_t, after, freed = peek_kernel(v, remaining, live, *args)
            keys[v] = (after, -freed, m_t, v)
        v = prefix[len(order)] if len(order) < len(prefix) else min(ready, key=keys.__getitem__)
        assert v in ready
        _, live = step_kernel(v, remaining, live, *args)
        done.add(v)
        order.append(v)
    return order


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize(("n", "p"), [(12, 0.3), (30, 0.1), (40, 0.05)])
def test_greedy_runs_the_ready_op_its_rule_ranks_first(n, p, inplace):
    """The kernel keeps ready ops in a heap re-keyed when an input is left with one reader: the same order as
    scoring every ready op at every step."""
    from onnx_sched.passes.order.greedy import greedy_order

    for seed in range(20):
        g = random_dag(n, seed, p, shuffle=True, types=True)
        assert greedy_order(g, inplace).tolist() == greedy_by_definition(g, inplace), seed


@pytest.mark.parametrize("inplace", [False, True])
def test_greedy_finishes_a_given_prefix_by_its_rule(inplace):
    """``prefix`` ops run first, in their order (the heap entries of those ops go stale); the rule then
    completes the order from that state."""
    from onnx_sched.passes.order.greedy import greedy_order

    changed = 0
    for seed in range(20):
        g = random_dag(30, seed, 0.1, shuffle=True, types=True)
        rng = np.random.default_rng(seed)
        start = list(nx.lexicographical_topological_sort(g.to_networkx(), key=lambda v: rng.random()))
        prefix = tuple(start[: int(rng.integers(1, 20))])
        order = greedy_order(g, inplace, prefix=np.array(prefix))
        assert order.tolist()[: len(prefix)] == list(prefix)
        assert order.tolist() == greedy_by_definition(g, inplace, prefix), seed
        changed += order.tolist() != greedy_order(g, inplace).tolist()
    assert changed >= 10  # random prefixes are not the rule's own start


@pytest.mark.parametrize("inplace", [False, True])
def test_a_beam_out_of_time_at_width_one_is_finished_by_the_greedy_rule(inplace):
    """With no time left the width drops to 1 and then the search stops: its best state's ops so far are
    completed by ``greedy``, so the order is complete and valid, and no better than the cutoff it must beat is
    never returned."""
    from onnx_sched.passes.order.greedy import greedy_order

    for seed in range(6):
        g = random_dag(40, seed, 0.1, shuffle=True, types=True)
        order, res = beam_search(g, 1, inplace=inplace, time_limit=0.0, contract=False)
        assert not res.complete and res.shrunk and 0 < len(res.order) < g.n_ops
        assert order.tolist() == greedy_order(g, inplace, prefix=res.order).tolist()
        assert is_topological_order(g, order)
        peak = peak_memory(g, order, inplace)
        assert beam_search(g, 1, inplace=inplace, time_limit=0.0, contract=False, cutoff=peak)[0] is None
        again, _ = beam_search(g, 1, inplace=inplace, time_limit=0.0, contract=False, cutoff=peak + 1)
        assert again.tolist() == order.tolist()
    fan = Graph.from_edges(4, [(0, 1), (0, 2), (0, 3)], output_bytes=[10, 50, 50, 50])  # 0 -> {1, 2, 3}
    for cutoff in (11, 56):  # every state pruned by the cutoff just as the time runs out: no order, no error
        assert beam_search(fan, 1, inplace=inplace, time_limit=0.0, contract=False, cutoff=cutoff)[0] is None
    sched = run("beam", g, inplace=inplace, time_limit=0.0, beam_width=1)
    assert sched.info["greedy_finish_after_steps"] > 0
    assert "greedy_finish_after_steps" not in run("beam", g, inplace=inplace, beam_width=4).info


@pytest.mark.parametrize("inplace", [False, True])
def test_beam_tables_that_refer_to_a_tensors_readers_match_copied_ones(inplace, monkeypatch):
    """A group past ``COPIED_PAIRS_MAX`` reader pairs refers to its tensor's own pairs instead of a copy without
    the op's bit: with every group referring, beams keep the same states and the search's peak is the order's."""
    from onnx_sched.passes.order import _kernels

    graphs = [random_dag(n, seed, p, shuffle=True, types=True)
              for seed in range(6) for n, p in ((40, 0.15), (90, 0.05))]
    copied = [beam_search(g, 50, inplace=inplace) for g in graphs]
    _kernels._kernel_graph_cached.cache_clear()
    monkeypatch.setattr(_kernels, "COPIED_PAIRS_MAX", -1)
    for g, (order, res) in zip(graphs, copied, strict=True):
        again, res2 = beam_search(g, 50, inplace=inplace)
        assert again.tolist() == order.tolist() and res2.peak == res.peak == peak_memory(g, list(again), inplace)
    _kernels._kernel_graph_cached.cache_clear()


@pytest.mark.parametrize("seed", range(3))
def test_wide_beam_equals_exact_on_small_graphs(seed):
    g = random_dag(16, seed, p=0.2, types=True)
    res = solve_exact(g, inplace=True, time_limit=30.0)
    assert res.optimal
    assert run("beam", g, inplace=True, beam_width=100_000).info["peak_bytes"] == res.peak


def test_beam_with_a_cutoff_only_returns_better_orders():
    g = fork_join()
    order, _ = beam_search(g, 4, inplace=False, cutoff=12)  # 12 is optimal: nothing beats it
    assert order is None
    order, _ = beam_search(g, 4, inplace=False, cutoff=13)
    assert order is not None and peak_memory(g, order) == 12


def test_empty_graph():
    g = Graph.from_edges(0, [], output_bytes=[])
    for method in PEAK_METHODS:
        assert len(run(method, g, time_limit=0.5).order) == 0


def test_xla_dfs_on_a_dag_whose_subtree_bytes_pass_the_float_range() -> None:
    """XLA's subtree byte sums count shared subtrees again on every path: on a ladder (each op reads the two
    before it) they grow like Fibonacci numbers and pass 1e308 by op 1,500.  They saturate without a warning
    on the user's terminal, and the order is still valid."""
    import warnings

    from onnx_sched.passes.order.xla_dfs import xla_dfs_order

    n = 1600
    edges = [(v - 1, v) for v in range(1, n)] + [(v - 2, v) for v in range(2, n)]
    g = Graph.from_edges(n, edges, output_bytes=[1 << 20] * n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        order = xla_dfs_order(g)
    assert is_topological_order(g, order) and sorted(order.tolist()) == list(range(n))


def test_the_graph_bound_is_computed_before_the_pass_gets_its_share_of_the_time(monkeypatch) -> None:
    """On a 20,000-op graph the must-live bound takes a few tenths of a second.  Every method's result carries it,
    so peak-mem's ``prepare`` computes it inside the time limit, before the pass's share is set, instead of after a
    pass that used its whole share."""
    import onnx_sched.api as api
    from onnx_sched.cost import memory_bound
    from onnx_sched.synth.onnx_writer import graph_to_onnx
    from onnx_sched.synth.random_dags import er_graph

    events: list[str] = []
    cached, schedule = memory_bound._op_lower_bounds_cached, api.schedule_graph
    monkeypatch.setattr(memory_bound, "_op_lower_bounds_cached", lambda *a: events.append("bound") or cached(*a))
    monkeypatch.setattr(api, "schedule_graph", lambda *a, **k: events.append("pass") or schedule(*a, **k))
    api.optimize_model(graph_to_onnx(er_graph(30, 4), name="g"), "peak-mem", "file", 5.0, warm_up=False)
    assert events.index("bound") < events.index("pass")
