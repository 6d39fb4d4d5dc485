"""Chain contraction (onnx_sched.cost.memory_chains) against every order of small random DAGs with chains."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from onnx_sched.cost.memory import profile
from onnx_sched.cost.memory_chains import contract_chains
from onnx_sched.dag import is_topological_order
from onnx_sched.graph import Csr, Graph, TensorKind


def _dag_with_chains(rng: np.random.Generator, n: int) -> Graph:
    """A random DAG where most ops extend a chain (one reader, one input), with varied sizes."""
    edges = []
    for v in range(1, n):
        if rng.random() < 0.6:
            edges.append((v - 1, v))
        else:
            edges += [(u, v) for u in rng.choice(v, size=min(v, int(rng.integers(1, 3))), replace=False).tolist()]
    types = [("Relu", "Conv", "Add")[int(rng.integers(3))] for _ in range(n)]
    return Graph.from_edges(n, edges, output_bytes=rng.choice([2, 4, 4, 8, 16], n), param_bytes=rng.integers(0, 3, n),
                            op_types=types, sinks_are_outputs=bool(rng.integers(2)))


def _best(g: Graph, inplace: bool) -> int:
    return min(profile(g, np.asarray(o), inplace).peak for o in nx.all_topological_sorts(g.to_networkx()))


@pytest.mark.parametrize("inplace", [False, True])
def test_contraction_keeps_the_optimal_peak_and_every_peak(inplace: bool) -> None:
    """The contracted graph's optimum equals the original's, every contracted order expands to a valid
    order with the same peak, and the contraction merges something on most graphs."""
    rng = np.random.default_rng(7)
    merged = 0
    for _ in range(40):
        g = _dag_with_chains(rng, int(rng.integers(5, 10)))
        c = contract_chains(g, inplace)
        merged += c.reduced
        orders = list(nx.all_topological_sorts(c.graph.to_networkx()))
        for o in orders:
            full = c.expand(o)
            assert is_topological_order(g, full)
            assert profile(g, full, inplace).peak == profile(c.graph, np.asarray(o), inplace).peak
        assert min(profile(c.graph, np.asarray(o), inplace).peak for o in orders) == _best(g, inplace)
    assert merged >= 20


def test_contract_gives_a_valid_order_and_round_trips() -> None:
    rng = np.random.default_rng(7)
    g = _dag_with_chains(rng, 40)
    c = contract_chains(g, False)
    assert c.reduced
    for o in (np.arange(g.n_ops), np.asarray(list(nx.topological_sort(g.to_networkx())))):
        short = c.contract(o)
        assert is_topological_order(c.graph, short)
        assert np.array_equal(c.contract(c.expand(short)), short)


def test_a_shrinking_op_is_not_delayed_past_a_high_point() -> None:
    """In the chain 1 -> 2 -> 3 -> 4 (16, 1, then 32 bytes; 3 also needs 30 transient bytes), 2 shrinks
    the chain.  Gluing it to 3 would hold 16 bytes instead of 1 while the 32-byte branch 5 -> 6 runs,
    and the best peak would rise from 65 to 68 bytes: the contraction leaves 2 alone."""
    g = Graph.from_edges(7, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6)], output_bytes=[32, 16, 1, 32, 32, 32, 4],
                         param_bytes=[0, 0, 0, 30, 0, 0, 0])
    c = contract_chains(g)
    orders = list(nx.all_topological_sorts(c.graph.to_networkx()))
    assert min(profile(c.graph, np.asarray(o), False).peak for o in orders) == _best(g, False) == 65
    assert not any(2 in m.tolist() and 3 in m.tolist() for m in c.members)


@pytest.mark.parametrize("inplace", [False, True])
def test_ops_without_outputs_contract_too(inplace: bool) -> None:
    """An op may write nothing (a graph built through the API; the last op here): it allocates nothing and the
    contraction keeps every peak."""
    g = Graph(name="sink_writes_nothing", op_names=("a", "b", "c"), op_types=("Relu", "Relu", "Op"),
              op_inputs=Csr.from_lists([[], [0], [1]]), op_outputs=Csr.from_lists([[0], [1], []]),
              tensor_names=("t0", "t1"), tensor_bytes=np.array([8, 4], np.int64),
              tensor_kind=np.array([TensorKind.ACTIVATION] * 2, np.int8), tensor_producer=np.array([0, 1], np.int64),
              op_param_bytes=np.zeros(3, np.int64))
    chains = contract_chains(g, inplace)
    order = chains.expand(np.arange(chains.graph.n_ops))
    assert order.tolist() == [0, 1, 2]
    assert profile(chains.graph, np.arange(chains.graph.n_ops), inplace).peak == profile(g, order, inplace).peak
