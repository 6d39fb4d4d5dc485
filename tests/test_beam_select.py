"""Beam selection (``select_children``): the ``k`` children with the lowest (peak, live bytes), ties by index.

Checked against a full sort of every child of real beam layers on random DAGs, including
layers where many children tie on the peak (the case whose threshold numba's quickselect
took seconds to find).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_sched.passes.order._kernels import (
    _tie_live,
    collapse_kernel,
    expand_kernel,
    kernel_graph,
    materialize_kernel,
    select_children,
)
from onnx_sched.passes.order._search import Layer, start_layer, zobrist_keys
from onnx_sched.synth.random_dags import er_graph


def _children(kg, layer: Layer, z1: np.ndarray, z2: np.ndarray) -> tuple:
    cpar, cop, cpeak, ch1, ch2 = expand_kernel(layer.S, layer.F, layer.peak, layer.live, layer.h1, layer.h2,
                                               np.int64(0), np.int64(np.iinfo(np.int64).max), np.int64(-1), z1, z2,
                                               *kg.expand_args())
    return collapse_kernel(cpeak, ch1, ch2), cpar, cop, cpeak, ch1, ch2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_select_children_takes_the_lowest_peak_then_live_then_index(seed: int) -> None:
    g = er_graph(40, seed)
    kg = kernel_graph(g, False)
    z1, z2 = zobrist_keys(g.n_ops, 0)
    layer = start_layer(kg, np.array([], dtype=np.int64), kg.base, 0, z1, z2)
    checked = 0
    for _ in range(12):
        idx, cpar, cop, cpeak, ch1, ch2 = _children(kg, layer, z1, z2)
        if len(idx) == 0:
            break
        live = _tie_live(idx, cpar, cop, layer.S, layer.live, *kg.live_args())
        for k in sorted({1, 2, len(idx) // 3 + 1, len(idx) // 2 + 1, len(idx) - 1, len(idx), len(idx) + 5} - {0}):
            got = select_children(idx, cpar, cop, cpeak, k, layer.S, layer.live, *kg.live_args())
            want = np.sort(idx[np.lexsort((idx, live, cpeak[idx]))[:k]])
            assert got.tolist() == want.tolist()
            checked += 1
        keep = select_children(idx, cpar, cop, cpeak, 64, layer.S, layer.live, *kg.live_args())
        layer = Layer(*materialize_kernel(keep, layer.S, layer.F, layer.live, cpar, cop, cpeak, ch1, ch2,
                                          *kg.adj_args(), *kg.live_args())[:6])
    assert checked > 20


def test_select_children_on_a_layer_of_tied_peaks() -> None:
    """Every child at the same peak: the live bytes alone decide, then the index."""
    g = er_graph(30, 7)
    kg = kernel_graph(g, False)
    z1, z2 = zobrist_keys(g.n_ops, 0)
    layer = start_layer(kg, np.array([], dtype=np.int64), kg.base, 0, z1, z2)
    idx, cpar, cop, cpeak, _, _ = _children(kg, layer, z1, z2)
    flat = np.full_like(cpeak, int(cpeak.max()))
    live = _tie_live(idx, cpar, cop, layer.S, layer.live, *kg.live_args())
    for k in range(1, len(idx) + 1):
        got = select_children(idx, cpar, cop, flat, k, layer.S, layer.live, *kg.live_args())
        assert got.tolist() == np.sort(idx[np.lexsort((idx, live))[:k]]).tolist()


@pytest.mark.parametrize("inplace", [False, True])
def test_bitset_peaks_match_the_memory_model_when_readers_span_many_words(inplace: bool) -> None:
    """The kernels' per-op tables (kept outputs, inputs freed for sure, groups of other readers as (word, mask)
    pairs) give the memory model's peak on a 300-op graph whose hub tensors are read by ops 64 apart and more,
    so one input's other readers span several words, and one reader's own bit shares a word with others."""
    from onnx_sched.cost.memory import profile
    from onnx_sched.graph import Graph
    from onnx_sched.passes.order.beam import beam_search

    rng = np.random.default_rng(3)
    n = 300
    edges = {(u, u + 1) for u in range(n - 1)}
    for hub in (0, 5, 70, 130):
        edges |= {(hub, int(v)) for v in rng.choice(np.arange(hub + 2, n), 60, replace=False)}
    edges |= {(int(u), int(v)) for u, v in rng.integers(0, n, (200, 2)) if u < v}
    g = Graph.from_edges(n, sorted(edges), output_bytes=rng.integers(1, 1000, n), op_types=["Relu"] * n)
    for width in (1, 16):
        order, res = beam_search(g, width, inplace=inplace, contract=False)
        assert res.peak == profile(g, order, inplace).peak
