"""Minimum cuts (onnx_sched.flow) against networkx on random networks with parallel edges and dead ends."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from onnx_sched.flow import min_cut


@pytest.mark.parametrize("seed", range(6))
def test_min_cut_value_and_smallest_source_side_match_networkx(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 40))
    m = int(rng.integers(n, 6 * n))
    tails, heads = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = tails != heads
    tails, heads, caps = tails[keep], heads[keep], rng.integers(1, 50, int(keep.sum()))
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for u, v, c in zip(tails.tolist(), heads.tolist(), caps.tolist()):  # parallel edges add up
        g.add_edge(u, v, capacity=g[u][v]["capacity"] + c if g.has_edge(u, v) else c)
    value, smallest = min_cut(n, 0, n - 1, tails, heads, caps)
    _, largest = min_cut(n, 0, n - 1, tails, heads, caps, largest=True)
    expected, (source_side, _) = nx.minimum_cut(g, 0, n - 1)
    assert value == expected
    assert set(np.flatnonzero(largest).tolist()) == source_side  # networkx: every node that cannot reach the sink
    for side in (smallest, largest):  # both are minimum cuts
        cut = sum(c for u, v, c in zip(tails, heads, caps) if side[u] and not side[v])
        assert cut == value and side[0] and not side[n - 1]
    assert not (smallest & ~largest).any()
