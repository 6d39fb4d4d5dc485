"""The peak-memory model on graphs whose peaks are worked out by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnx_sched.cost.memory import MemoryState, peak_memory, profile
from onnx_sched.cost.memory_bound import lower_bound
from onnx_sched.dag import CycleError, is_topological_order, kahn_order
from onnx_sched.graph import Csr, Graph, TensorKind


def fork_join() -> Graph:
    # 0 -> (1 -> 2), (3 -> 4); 2, 4 -> 5.  Big heads (1, 3), small tails (2, 4).
    return Graph.from_edges(6, [(0, 1), (1, 2), (0, 3), (3, 4), (2, 5), (4, 5)], output_bytes=[1, 10, 1, 10, 1, 1])


def test_chain_peak_is_largest_adjacent_pair():
    g = Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[4, 2, 1])
    # step0: 4, step1: 4+2 (then free 4), step2: 2+1 (sink freed after)
    assert profile(g, [0, 1, 2]).step.tolist() == [4, 6, 3]
    assert peak_memory(g, [0, 1, 2]) == 6


def test_fork_join_depth_first_beats_breadth_first():
    g = fork_join()
    depth = [0, 1, 2, 3, 4, 5]  # 1,10 ->11 ; after 1 done: 1+10+1=12 then free10 ->2 ; 2+10=12 ...
    breadth = [0, 1, 3, 2, 4, 5]  # 1+10+10 = 21 at step of op 3
    assert peak_memory(g, depth) == 12
    assert peak_memory(g, breadth) == 21
    best = min(peak_memory(g, list(p)) for p in itertools.permutations(range(6)) if is_topological_order(g, p))
    assert best == 12
    assert lower_bound(g) <= best


def test_param_bytes_count_only_during_their_step():
    g = Graph.from_edges(2, [(0, 1)], output_bytes=[3, 3], param_bytes=[100, 0])
    assert profile(g, [0, 1]).step.tolist() == [103, 6]


def test_multi_output_op_and_shared_consumer():
    # op0 -> (t0: 8, t1: 2); op1 reads t0 and t1, op2 reads t1 only.
    g = Graph(
        name="multi",
        op_names=("a", "b", "c"),
        op_types=("Split", "Add", "Relu"),
        op_inputs=Csr.from_lists([[], [0, 1], [1]]),
        op_outputs=Csr.from_lists([[0, 1], [2], [3]]),
        tensor_names=("t0", "t1", "t2", "t3"),
        tensor_bytes=[8, 2, 8, 2],
        tensor_kind=[TensorKind.ACTIVATION] * 2 + [TensorKind.OUTPUT] * 2,
        tensor_producer=[0, 0, 1, 2],
    )
    # order a,b,c: a=10; b: 10+8=18, frees t0 -> 10 ; c: 10+2 = 12, frees t1 -> 10
    assert profile(g, [0, 1, 2]).step.tolist() == [10, 18, 12]
    # order a,c,b: a=10; c: 12 (t1 still needed by b); b: 12+8=20
    assert peak_memory(g, [0, 2, 1]) == 20
    # graph outputs are kept to the end: the bound counts both
    assert lower_bound(g) >= 10


def test_graph_inputs_live_from_start_and_weights_are_free():
    g = Graph(
        name="io",
        op_names=("mm",),
        op_types=("MatMul",),
        op_inputs=Csr.from_lists([[0, 1]]),
        op_outputs=Csr.from_lists([[2]]),
        tensor_names=("x", "w", "y"),
        tensor_bytes=[5, 1000, 7],
        tensor_kind=[TensorKind.INPUT, TensorKind.WEIGHT, TensorKind.OUTPUT],
        tensor_producer=[-1, -1, 0],
    )
    assert profile(g, [0]).base == 5
    assert peak_memory(g, [0]) == 12
    assert lower_bound(g) == 12


def test_inplace_reuses_a_dying_input_of_the_same_size():
    g = Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[4, 4, 4], op_types=["Conv", "Relu", "Sigmoid"])
    assert peak_memory(g, [0, 1, 2]) == 8
    assert peak_memory(g, [0, 1, 2], inplace=True) == 4
    # an input that is still needed elsewhere cannot be reused
    g2 = Graph.from_edges(3, [(0, 1), (0, 2), (1, 2)], output_bytes=[4, 4, 4], op_types=["Conv", "Relu", "Clip"])
    assert profile(g2, [0, 1, 2], inplace=True).step.tolist() == [4, 8, 8]


def test_incremental_state_matches_profile():
    rng = np.random.default_rng(1)
    edges = [(i, j) for i in range(12) for j in range(i + 1, 12) if rng.random() < 0.25]
    g = Graph.from_edges(12, edges, output_bytes=rng.integers(1, 50, 12), param_bytes=rng.integers(0, 5, 12))
    order = kahn_order(g, rng.random(12))
    state = MemoryState(g)
    steps = [state.step(int(op)) for op in order]
    assert steps == profile(g, order).step.tolist()
    assert state.peak == peak_memory(g, order)


def test_cycle_is_reported():
    with pytest.raises(CycleError, match="cycle"):
        Graph.from_edges(3, [(0, 1), (1, 2), (2, 0)], output_bytes=[1, 1, 1])


# ------------------------------------------------------------ lower bounds
def _all_orders(g: Graph):
    import networkx as nx

    return [np.asarray(o) for o in nx.all_topological_sorts(g.to_networkx())]


def _random_dag(rng: np.random.Generator, n: int) -> Graph:
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.35]
    types = [("Relu", "Add", "Op")[int(rng.integers(3))] for _ in range(n)]
    return Graph.from_edges(n, edges, output_bytes=rng.integers(1, 20, n), param_bytes=rng.integers(0, 4, n),
                            op_types=types, sinks_are_outputs=bool(rng.integers(2)))


@pytest.mark.parametrize("inplace", [False, True])
def test_per_op_bounds_hold_in_every_order(inplace: bool) -> None:
    """On small random DAGs (every topological order enumerated): when op v runs, live memory is at
    least op_lower_bounds[v] in every order, so the bound never exceeds the optimum."""
    from onnx_sched.cost.memory_bound import op_lower_bounds

    rng = np.random.default_rng(7)
    tight = 0
    for _ in range(40):
        g = _random_dag(rng, int(rng.integers(3, 8)))
        per_op = op_lower_bounds(g, inplace)
        best = None
        for order in _all_orders(g):
            step = profile(g, order, inplace).step
            at = np.empty(g.n_ops, np.int64)
            at[order] = step
            assert (at >= per_op).all(), (order.tolist(), at.tolist(), per_op.tolist())
            best = step.max() if best is None else min(best, step.max())
        assert lower_bound(g, inplace) <= best
        tight += lower_bound(g, inplace) == best
    assert tight >= 10  # and it is often exactly the optimum


def test_must_live_bound_sees_tensors_held_for_later_readers() -> None:
    """0 feeds 5 (the last op) and a chain 1..4: 0's big output is live while every chain op runs.
    Counting only each op's own inputs and outputs gives 111 (op 5); the optimum is 120."""
    g = Graph.from_edges(6, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 5)], output_bytes=[100, 10, 10, 10, 10, 1])
    assert lower_bound(g) == 120 == min(peak_memory(g, o) for o in _all_orders(g))


def test_the_must_live_bound_is_the_same_one_block_of_ops_at_a_time(monkeypatch) -> None:
    """The closures are built for one block of ops at a time (bounded memory on any graph): blocks of 64 ops
    give the same per-op bounds as one block holding every op."""
    from onnx_sched.cost import memory_bound
    from onnx_sched.synth.random_dags import er_graph

    graphs = [er_graph(n, seed, p=0.03) for seed, n in enumerate((65, 130, 200, 301))]
    whole = {(g.name, inplace): memory_bound.op_lower_bounds(g, inplace) for g in graphs for inplace in (False, True)}
    monkeypatch.setattr(memory_bound, "block_words", lambda n: 1)
    memory_bound._op_lower_bounds_cached.cache_clear()
    try:
        for (name, inplace), want in whole.items():
            g = next(g for g in graphs if g.name == name)
            assert memory_bound.op_lower_bounds(g, inplace).tolist() == want.tolist()
    finally:
        memory_bound._op_lower_bounds_cached.cache_clear()


def test_graphs_too_big_for_the_closure_get_the_inputs_plus_outputs_bound(monkeypatch) -> None:
    """Beyond MAX_BOUND_WORK each op needs its own non-graph-input inputs, outputs and transient bytes."""
    from onnx_sched.cost import memory_bound
    from onnx_sched.cost.memory import memory_arrays

    rng = np.random.default_rng(3)
    graphs = [_random_dag(rng, int(rng.integers(3, 8))) for _ in range(20)]
    monkeypatch.setattr(memory_bound, "MAX_BOUND_WORK", -1)
    memory_bound._op_lower_bounds_cached.cache_clear()
    try:
        for g in graphs:
            for inplace in (False, True):
                a = memory_arrays(g, inplace)
                want = []
                for v in range(g.n_ops):
                    ins = a.in_idx[a.in_ptr[v]: a.in_ptr[v + 1]]
                    outs = a.out_idx[a.out_ptr[v]: a.out_ptr[v + 1]]
                    cands = a.inplace_idx[a.inplace_ptr[v]: a.inplace_ptr[v + 1]]
                    want.append(a.base + int(a.size[ins][~a.keep[ins]].sum()) + int(a.size[outs].sum()) + int(a.param[v])
                                - (int(a.size[cands].max()) if len(cands) else 0))
                assert memory_bound.op_lower_bounds(g, inplace).tolist() == want
                assert lower_bound(g, inplace) <= min(peak_memory(g, o, inplace) for o in _all_orders(g))
    finally:
        memory_bound._op_lower_bounds_cached.cache_clear()


@pytest.mark.parametrize("inplace", [False, True])
def test_cut_bound_is_the_least_memory_of_any_order_at_each_op(inplace: bool) -> None:
    """The min-cut of memory_cut_bound is, per op, exactly the smallest step memory over every
    order (a lower bound with in-place reuse); the pruned search by an order's steps gives
    the same graph bound as cutting every op, and never less than the must-live bound."""
    from onnx_sched.cost.memory_bound import op_lower_bounds
    from onnx_sched.cost.memory_cut_bound import cut_lower_bound, least_memory_at

    rng = np.random.default_rng(11)
    raised = 0
    for _ in range(40):
        g = _random_dag(rng, int(rng.integers(3, 8)))
        least = np.full(g.n_ops, np.iinfo(np.int64).max)
        orders = _all_orders(g)
        for order in orders:
            at = np.empty(g.n_ops, np.int64)
            at[order] = profile(g, order, inplace).step
            least = np.minimum(least, at)
        cut = least_memory_at(g, inplace)
        if inplace:
            assert (cut <= least).all()
        else:
            assert cut.tolist() == least.tolist()
        assert (cut >= op_lower_bounds(g, inplace)).all()
        full = cut_lower_bound(g, inplace)
        assert full.bound == cut_lower_bound(g, inplace, order=orders[int(rng.integers(len(orders)))]).bound
        assert full.bound == max(int(cut.max()), lower_bound(g, inplace))
        raised += full.bound > lower_bound(g, inplace)
    assert raised >= 3  # the cut sees what the must-live bound does not


def test_cut_bound_and_repair_on_graphs_with_nothing_to_free() -> None:
    """When every tensor is a graph output or empty, the cut network has no tensor nodes: an op's least memory
    is its own step (run first), the bound what stays live at the end, and the repair keeps the order."""
    from onnx_sched.cost.memory_cut_bound import cut_lower_bound, least_memory_at
    from onnx_sched.passes.order._repair import repair

    outputs = Graph.from_edges(3, [], output_bytes=[4, 5, 7], sinks_are_outputs=True)
    empty = Graph.from_edges(4, [(0, 1), (1, 2), (2, 3)], output_bytes=[0, 0, 0, 0])
    assert least_memory_at(outputs).tolist() == [4, 5, 7] and least_memory_at(empty).tolist() == [0, 0, 0, 0]
    assert cut_lower_bound(outputs).bound == 16 and cut_lower_bound(empty).bound == 0
    assert repair(empty, np.arange(4), False).tolist() == [0, 1, 2, 3]


def test_cut_networks_are_kept_within_their_count_and_bytes(monkeypatch) -> None:
    """Every cut, probe and repair of a graph shares its network; the cache keeps at most
    ``NETWORK_CACHE_SIZE`` of them and, past the newest, no more than ``NETWORK_CACHE_BYTES``."""
    from onnx_sched.cost import memory_cut_bound as mcb

    rng = np.random.default_rng(5)
    graphs = [_random_dag(rng, 6) for _ in range(5)]
    expected = [mcb.least_memory_at(g).tolist() for g in graphs]
    monkeypatch.setattr(mcb, "_networks", type(mcb._networks)())
    monkeypatch.setattr(mcb, "NETWORK_CACHE_SIZE", 3)
    for g in graphs:
        assert mcb._network(g, False) is mcb._network(g, False)
    assert [k[0] for k in mcb._networks] == graphs[2:]
    mcb._network(graphs[2], False)  # used: now the newest
    assert [k[0] for k in mcb._networks] == [graphs[3], graphs[4], graphs[2]]
    monkeypatch.setattr(mcb, "NETWORK_CACHE_BYTES", 1)  # no room but for the newest
    assert [mcb.least_memory_at(g).tolist() for g in graphs] == expected
    assert [k[0] for k in mcb._networks] == [graphs[-1]]


def test_kahn_order_takes_the_smallest_priority_then_the_lower_id() -> None:
    """Ready ops: 0 and 3 first (both sources), then by priority; equal priorities go to the lower id."""
    g = Graph.from_edges(6, [(0, 1), (0, 2), (3, 4), (3, 5)], output_bytes=[1] * 6)
    assert kahn_order(g).tolist() == [0, 1, 2, 3, 4, 5]
    assert kahn_order(g, [5.0, 1.0, 0.0, 2.0, 0.0, 0.0]).tolist() == [3, 4, 5, 0, 2, 1]
    assert kahn_order(g, [0.0] * 6).tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="one value per op"):
        kahn_order(g, [0.0] * 5)
