"""Probing the min-cut bound (onnx_sched.cost.memory_probe) against every order of small random DAGs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from onnx_sched.cost.memory import profile
from onnx_sched.cost.memory_cut_bound import cut_lower_bound
from onnx_sched.cost.memory_probe import precedences_below, probe_bound, with_precedences
from onnx_sched.dag import is_topological_order
from onnx_sched.graph import Graph


def _random_dag(rng: np.random.Generator, n: int) -> Graph:
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.3]
    types = [("Relu", "Add", "Op")[int(rng.integers(3))] for _ in range(n)]
    return Graph.from_edges(n, edges, output_bytes=rng.integers(1, 20, n), param_bytes=rng.integers(0, 4, n),
                            op_types=types, sinks_are_outputs=bool(rng.integers(2)))


def _peaks(g: Graph, inplace: bool) -> list[tuple[np.ndarray, int]]:
    return [(np.asarray(o), profile(g, np.asarray(o), inplace).peak) for o in nx.all_topological_sorts(g.to_networkx())]


@pytest.mark.parametrize("inplace", [False, True])
def test_probing_is_sound_and_sees_more_than_one_moment(inplace: bool) -> None:
    """For every threshold: a refuted one is at most the best peak of all orders, and every order
    below an unrefuted one obeys its precedences.  The bisected bound is never above the optimum
    and, on some graphs, above the min-cut bound."""
    rng = np.random.default_rng(5)
    raised = found = 0
    for _ in range(30):
        g = _random_dag(rng, int(rng.integers(4, 9)))
        orders = _peaks(g, inplace)
        best = min(p for _, p in orders)
        cut = cut_lower_bound(g, inplace).bound
        for threshold in range(cut, best + 2):
            probe = precedences_below(g, inplace, threshold)
            if probe.refuted:
                assert threshold <= best
                continue
            for order, peak in orders:
                if peak < threshold:
                    pos = np.empty(g.n_ops, np.int64)
                    pos[order] = np.arange(g.n_ops)
                    assert all(pos[a] < pos[b] for a, b in probe.precedences.tolist())
            found += len(probe.precedences)
        result = probe_bound(g, inplace, cut, best)
        assert cut <= result.bound <= best and result.complete
        raised += result.bound > cut
    assert raised >= 2 and found > 0


def test_precedences_keep_memory_and_orders() -> None:
    """The constrained graph has the same peak for every order it allows, and allows only orders of the
    original graph that obey the pairs."""
    g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[8, 20, 6, 1])
    h = with_precedences(g, [(2, 1)])
    for order in ([0, 2, 1, 3], [0, 1, 2, 3]):
        assert profile(h, np.array(order), False).peak == profile(g, np.array(order), False).peak or \
            not is_topological_order(h, order)
    assert is_topological_order(h, [0, 2, 1, 3]) and not is_topological_order(h, [0, 1, 2, 3])
    assert with_precedences(g, np.zeros((0, 2), np.int64)) is g


def test_bisection_stops_at_the_deadline_with_what_it_proved() -> None:
    rng = np.random.default_rng(2)
    g = _random_dag(rng, 8)
    result = probe_bound(g, False, 0, 10**6, deadline=0.0)
    assert result.bound == 0 and not result.complete and result.probes == 0


def test_auto_probe_phase_raises_the_bound_and_keeps_every_better_order() -> None:
    """auto's probing step from a near-optimal incumbent: the bound it returns is proven (at most the optimum),
    what it offers beats the incumbent, and the graph it hands to the final beams still holds every
    order below the incumbent."""
    from onnx_sched.deadline import Deadline
    from onnx_sched.passes import PassContext
    from onnx_sched.passes.order.auto import probe_phase

    rng = np.random.default_rng(8)
    raised = 0
    for _ in range(40):
        g = _random_dag(rng, 8)
        orders = _peaks(g, False)
        best = min(p for _, p in orders)
        above = [p for _, p in orders if p > best]
        if not above:
            continue
        worst = min(above)  # the incumbent: the second-best peak
        peaks = {"start": worst}
        offered = []

        def offer(name: str, order: np.ndarray) -> None:
            offered.append(profile(g, order, False).peak)
            peaks[name] = min(peaks.get(name, worst), offered[-1])

        start = cut_lower_bound(g, False).bound
        search, bound, bisect_later = probe_phase(g, PassContext(time_limit=10.0), Deadline(10.0), offer,
                                                  lambda: min(peaks.values()), start, {})
        assert start <= bound <= best
        assert all(p < worst for p in offered)
        for order, peak in orders:
            if peak < worst:
                assert is_topological_order(search, order)
        assert not bisect_later  # small graphs bisect before the final beams, and these finish
        raised += bound > start
    assert raised >= 1
