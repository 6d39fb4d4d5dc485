"""The pattern bound (``onnx_sched.cost.memory_pattern``) against every order of small random DAGs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from onnx_sched.cost.memory import profile
from onnx_sched.cost.memory_cut_bound import cut_lower_bound
from onnx_sched.cost.memory_pattern import pattern_bound
from onnx_sched.dag import is_topological_order
from onnx_sched.graph import Graph
from onnx_sched.synth import generate


def _random_dag(rng: np.random.Generator, n: int) -> Graph:
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.3]
    types = [("Relu", "Add", "Op")[int(rng.integers(3))] for _ in range(n)]
    return Graph.from_edges(n, edges, output_bytes=rng.integers(1, 20, n), param_bytes=rng.integers(0, 4, n),
                            op_types=types, sinks_are_outputs=bool(rng.integers(2)))


def _optimum(g: Graph, inplace: bool) -> int:
    return min(profile(g, np.asarray(o), inplace).peak for o in nx.all_topological_sorts(g.to_networkx()))


@pytest.mark.parametrize("inplace", [False, True])
def test_pattern_bound_is_sound_and_exact_on_the_whole_graph(inplace: bool) -> None:
    """Every pattern size: the bound is at most the optimum and at least the min-cut bound, the order
    is valid with the reported peak, and a claimed optimum is the optimum.  Without in-place reuse a
    pattern of every op is the exact DP: its bound is the optimum, and with the optimum as cutoff it
    refutes everything below it."""
    rng = np.random.default_rng(11)
    proven = 0
    for _ in range(30):
        g = _random_dag(rng, int(rng.integers(4, 9)))
        best = _optimum(g, inplace)
        cut = cut_lower_bound(g, inplace).bound
        for start in range(1, g.n_ops + 1):
            r = pattern_bound(g, inplace, cutoff=10**9, start=start, step=1)
            assert cut <= r.bound <= best
            assert r.order is not None and is_topological_order(g, r.order)
            assert r.peak == profile(g, r.order, inplace).peak >= best
            if r.optimal:
                assert r.peak == best
                proven += 1
        whole = pattern_bound(g, inplace, cutoff=10**9, start=g.n_ops)
        at_best = pattern_bound(g, inplace, cutoff=best, start=g.n_ops)
        if not inplace:
            assert whole.bound == best and whole.optimal
            assert at_best.bound == best
        assert at_best.bound <= best
    assert proven > 0


def test_pattern_bound_proves_an_irregular_80_op_graph() -> None:
    """An SBM-wired 80-op graph, where the min-cut bound is below the optimum: the refined pattern
    reaches an order whose peak meets its bound, above the cut bound."""
    g = generate("sbm", 80, 0)
    cut = cut_lower_bound(g, False).bound
    r = pattern_bound(g, False, cutoff=10**12)
    assert r.optimal and is_topological_order(g, r.order)
    assert r.bound == r.peak == profile(g, r.order, False).peak
    assert r.bound > 1.04 * cut


@pytest.mark.parametrize("method", ["auto", "exact"])
def test_auto_and_exact_prove_what_their_state_caps_cannot(method: str) -> None:
    """On that graph the exact DP stops at its state cap; both passes then spend the time left on the
    pattern bound, and report the order it built as proven optimal."""
    from onnx_sched.passes import PassContext, get_pass

    g = generate("sbm", 80, 0)
    sched = get_pass(method, "peak-mem")(g, PassContext(time_limit=20.0))
    assert sched.optimal and is_topological_order(g, sched.order)
    assert int(sched.lower_bound) == profile(g, sched.order, False).peak
    assert "pattern" in sched.info
