"""The min-cut repair (passes/order/_repair.py): valid, never worse, and it moves early work past a peak."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from onnx_sched.cost.memory import profile
from onnx_sched.dag import is_topological_order
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes.order._repair import repair


@pytest.mark.parametrize("inplace", [False, True])
def test_repair_keeps_orders_valid_and_never_raises_the_peak(inplace: bool) -> None:
    rng = np.random.default_rng(11)
    lowered = 0
    for _ in range(60):
        n = int(rng.integers(6, 40))
        edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 3 / n]
        types = [("Relu", "Add", "Op")[int(rng.integers(3))] for _ in range(n)]
        g = Graph.from_edges(n, edges, output_bytes=rng.integers(1, 50, n), param_bytes=rng.integers(0, 5, n),
                             op_types=types, sinks_are_outputs=bool(rng.integers(2)))
        order = np.asarray(list(nx.lexicographical_topological_sort(g.to_networkx(), key=lambda v: -v)))
        fixed = repair(g, order, inplace)
        assert is_topological_order(g, fixed)
        before, after = profile(g, order, inplace).peak, profile(g, fixed, inplace).peak
        assert after <= before
        lowered += after < before
    assert lowered >= 10


def test_repair_moves_an_early_branch_past_the_peak() -> None:
    """0 -> 1 -> 2 -> 3 peaks at 2 (a 100-byte output); 4 -> 5 is an independent branch whose 30-byte
    output waits for 6.  Running 4 first holds 30 bytes across the peak; the repair runs it after."""
    g = Graph.from_edges(7, [(0, 1), (1, 2), (2, 3), (4, 5), (3, 6), (5, 6)], output_bytes=[1, 10, 100, 1, 30, 1, 1])
    early = np.array([4, 0, 1, 2, 3, 5, 6])
    assert profile(g, early, False).peak == 140
    fixed = repair(g, early, False)
    assert profile(g, fixed, False).peak == 110
    assert list(fixed).index(4) > list(fixed).index(2)


def test_repair_stops_at_the_deadline_with_the_order_given() -> None:
    g = Graph.from_edges(7, [(0, 1), (1, 2), (2, 3), (4, 5), (3, 6), (5, 6)], output_bytes=[1, 10, 100, 1, 30, 1, 1])
    early = np.array([4, 0, 1, 2, 3, 5, 6])
    assert repair(g, early, False, deadline=work_clock() - 1.0).tolist() == early.tolist()


def test_a_rebuild_that_moves_the_peak_is_rebuilt_again() -> None:
    """0 feeds 1 (40 bytes), 2 and 3; 3 feeds 5 (40 bytes).  In [4, 0, 3, 5, 2, 1] op 5 peaks at 70 with
    0's and 3's outputs waiting; rebuilt around 5 the peak moves to 1 (still 70), and rebuilt around 1
    it drops to 60.  Without the lookahead the first rebuild is given up."""
    g = Graph.from_edges(6, [(0, 1), (0, 2), (0, 3), (3, 5)], output_bytes=[20, 40, 10, 10, 1, 40])
    order = np.array([4, 0, 3, 5, 2, 1])
    assert profile(g, order, False).peak == 70
    assert profile(g, repair(g, order, False, lookahead=0), False).peak == 70
    fixed = repair(g, order, False)
    assert is_topological_order(g, fixed) and profile(g, fixed, False).peak == 60


def test_no_rebuild_starts_that_the_last_ones_time_says_would_end_past_the_deadline(monkeypatch) -> None:
    """A rebuild is a max-flow over the whole graph (0.3-0.7 s at 20,000 ops), the lookahead's too.  With a
    clock that only rebuilds move, one second each, and 1.5 s to the deadline, the order of the lookahead test
    gets its first rebuild (the peak moves, not lower) and no second one."""
    from onnx_sched.passes.order import _repair

    clock = [0.0]
    real = _repair._rebuilt

    def one_second(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        clock[0] += 1.0
        return real(*args, **kwargs)

    monkeypatch.setattr(_repair, "work_clock", lambda: clock[0])
    monkeypatch.setattr(_repair, "_rebuilt", one_second)
    g = Graph.from_edges(6, [(0, 1), (0, 2), (0, 3), (3, 5)], output_bytes=[20, 40, 10, 10, 1, 40])
    order = np.array([4, 0, 3, 5, 2, 1])
    assert repair(g, order, False, deadline=1.5).tolist() == order.tolist() and clock[0] == 1.0
    clock[0] = 0.0
    assert profile(g, repair(g, order, False, deadline=2.5), False).peak == 60 and clock[0] == 2.0
