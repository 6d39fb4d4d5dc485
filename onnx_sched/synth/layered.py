"""Layered graphs: the NN-like synthetic DAG family of paper 000, appendix A.

Public API (names are stable; other modules and the trainer import them):

* :func:`layered_graph` ``(n, seed, params=LayeredParams(), *, unit_bytes=2**20, name=None) -> Graph``
  -- the generated DAG as a node-centric :class:`~onnx_sched.graph.Graph`
  (``Graph.from_edges``: op ``i`` writes tensor ``t{i}`` read by all its
  successors; sink outputs are freed at once, as in paper 000 eq. 3).
* :func:`layered_structure` ``(n, seed, params) -> LayeredStructure`` -- the
  same draw before it becomes a Graph (layers, edges, skip draws, memory units),
  for tests and statistics.
* :func:`makespan_attrs` ``(graph, seed, capacities=(1, 1, 4)) -> MakespanAttrs``
  (re-exported from :mod:`onnx_sched.synth.attrs`) -- durations and machine
  types of paper 001 appendix C.3.
* The algorithm steps as pure functions: :func:`target_layers` (eq. 11),
  :func:`layer_size_bounds` (eq. 12), :func:`assign_nodes` (algorithm 1),
  :func:`adjacent_edge_budget` (eq. 13), :func:`assign_edges` (algorithm 2),
  :func:`skip_count` (eq. 14), :func:`assign_skips` (algorithm 3).

Everything is deterministic in ``seed`` (one ``numpy.random.default_rng(seed)``
drawn in this order: width factor, layer sizes, edge tie breaks, skip
connections, per-layer memory).

Paper parameters (:class:`LayeredParams` defaults): width factor
``W ~ U(0.25, 0.5)``; ``sigma_N = 0.75``; ``rho_E = 0.2``; ``rho_S = 0.14``;
output memory ``m_l`` and parameter memory ``p_l`` drawn once per layer from the
mixture ``w = (.3, .3, .3, .1)``, ``mu = (.5, 1, 3, 5)``, ``sigma = (.5, 1, 1, 1)``
projected onto the non-negative reals; every node of layer ``l`` gets ``m_l``,
``p_l``.  Bytes: 1 unit = ``unit_bytes`` (default 1 MiB), see
:mod:`onnx_sched.synth.common`.  ``p`` becomes ``Graph.op_param_bytes``, the
transient memory of eq. 15.

Choices where the appendix is loose (each documented at its function):

* "rounded to the closest integer" is round-half-up (``floor(x + 0.5)``).
* Algorithm 1 ends when ``|V|`` nodes are placed; a layer is only opened when
  a node is left to place, so no layer is empty.  If eq. 12's bounds cross
  (only for ``|V| < 2``), the upper bound is raised to the lower one.
* Algorithm 2 gives the edge budget to the nodes of the larger layer one at a
  time, each to a node with fewest edges so far, ties at random.  That is
  distributionally the same as: every node gets ``B // N_s`` edges, and a
  uniformly random subset of ``B % N_s`` nodes one more -- which is how it is
  computed here.  The pseudo-code's inner ``for i in [0, c_n - 1]`` repeats the
  same ``c_n`` edges ``c_n`` times; in a simple graph that is ``c_n`` edges, which
  is what is added.  Edges always point from layer ``l`` to layer ``l + 1``.
* Algorithm 3 draws ``ceil(|E| rho_S / (1 - rho_S))`` skip connections
  independently; two draws may give the same edge, which the DAG keeps once
  (``LayeredStructure.skip_draws`` keeps every draw).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.synth.attrs import MakespanAttrs, makespan_attrs
from onnx_sched.synth.common import (
    DEFAULT_UNIT_BYTES,
    GMM_PAPER,
    GaussianMixture,
    sample_memory_units,
    units_to_bytes,
)

__all__ = [
    "LayeredParams",
    "LayeredStructure",
    "MakespanAttrs",
    "adjacent_edge_budget",
    "assign_edges",
    "assign_nodes",
    "assign_skips",
    "layer_size_bounds",
    "layered_graph",
    "layered_structure",
    "makespan_attrs",
    "skip_count",
    "target_layers",
]


@dataclass(frozen=True)
class LayeredParams:
    """User parameters of the layered family; defaults are paper 000's values."""

    width_low: float = 0.25
    width_high: float = 0.5
    sigma_n: float = 0.75
    rho_e: float = 0.2
    rho_s: float = 0.14
    mixture: GaussianMixture = field(default_factory=lambda: GMM_PAPER)

    def __post_init__(self) -> None:
        if not 0.0 < self.width_low <= self.width_high < 1.0:
            raise ValueError(
                f"LayeredParams: need 0 < width_low <= width_high < 1, got ({self.width_low}, {self.width_high})"
            )
        if not 0.0 <= self.sigma_n < 1.0:
            raise ValueError(f"LayeredParams: sigma_n must be in [0, 1), got {self.sigma_n}")
        if not 0.0 <= self.rho_e <= 1.0:
            raise ValueError(f"LayeredParams: rho_e must be in [0, 1], got {self.rho_e}")
        if not 0.0 <= self.rho_s < 1.0:
            raise ValueError(f"LayeredParams: rho_s must be in [0, 1), got {self.rho_s}")


@dataclass(frozen=True, eq=False)
class LayeredStructure:
    """One draw of the layered generator before it becomes a :class:`Graph`."""

    n: int
    width_factor: float
    target_layers: int  # L of eq. 11
    layer_sizes: tuple[int, ...]  # actual nodes per layer (algorithm 1)
    adjacent_edges: np.ndarray  # (E_adj, 2) edges between layers l -> l+1 (algorithm 2)
    skip_draws: np.ndarray  # (N_S, 2) every skip connection drawn (algorithm 3), may repeat
    m_units: np.ndarray  # per layer output memory, memory units
    p_units: np.ndarray  # per layer parameter memory, memory units

    @property
    def layer_starts(self) -> np.ndarray:
        """Id of the first node of each layer (nodes are numbered layer by layer)."""
        return np.concatenate([[0], np.cumsum(self.layer_sizes)[:-1]]).astype(np.int64)

    @property
    def layer_of_node(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.layer_sizes), dtype=np.int64), self.layer_sizes)

    @property
    def edges(self) -> np.ndarray:
        """All distinct edges (adjacent + skip), sorted."""
        both = np.concatenate([self.adjacent_edges, self.skip_draws]).reshape(-1, 2)
        return np.unique(both, axis=0) if len(both) else both


# ---------------------------------------------------------------- algorithm 1
def target_layers(n: int, width: float) -> int:
    """Eq. 11: ``L = ceil(sqrt(|V| (1/W - 1)))``."""
    if n < 1:
        raise ValueError(f"target_layers: need n >= 1, got {n}")
    if not 0.0 < width < 1.0:
        raise ValueError(f"target_layers: width factor must be in (0, 1), got {width}")
    return max(1, math.ceil(math.sqrt(n * (1.0 / width - 1.0))))


def layer_size_bounds(n: int, n_layers: int, sigma_n: float) -> tuple[int, int]:
    """Eq. 12: inclusive bounds ``(ceil(|V|/L (1 - s)), floor(|V|/L (1 + s)))`` (upper >= lower)."""
    mean = n / n_layers
    low = max(1, math.ceil(mean * (1.0 - sigma_n)))
    high = math.floor(mean * (1.0 + sigma_n))
    return low, max(low, high)


def assign_nodes(n: int, n_layers: int, sigma_n: float, rng: np.random.Generator) -> tuple[int, ...]:
    """Algorithm 1: layer sizes ``N_l ~ U{low..high}`` (eq. 12) until ``n`` nodes are placed.

    The last layer is cut short when it would pass ``n``; so the number of layers
    may differ from the target ``n_layers``.
    """
    low, high = layer_size_bounds(n, n_layers, sigma_n)
    sizes: list[int] = []
    placed = 0
    while placed < n:
        want = int(rng.integers(low, high + 1))
        take = min(want, n - placed)
        sizes.append(take)
        placed += take
    return tuple(sizes)


# ---------------------------------------------------------------- algorithm 2
def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def adjacent_edge_budget(n1: int, n2: int, rho_e: float) -> int:
    """Eq. 13: ``N1 N2 rho_E + (1 - rho_E) max(N1, N2)``, rounded to the closest integer."""
    return _round_half_up(n1 * n2 * rho_e + (1.0 - rho_e) * max(n1, n2))


def _cone_targets(n: int, c_n: int, n_s: int, n_t: int) -> range:
    """Destinations of node ``n`` (of ``n_s``) with ``c_n`` edges: ``c_n`` consecutive
    indices of the other layer centred below it, shifted inside ``[0, n_t - 1]``."""
    center = 0 if n_s == 1 else _round_half_up(n * (n_t - 1) / (n_s - 1))
    lo = center - (c_n - 1) // 2
    lo = min(max(lo, 0), n_t - c_n)
    return range(lo, lo + c_n)


def assign_edges(
    layer_sizes: Sequence[int], rho_e: float, rng: np.random.Generator
) -> np.ndarray:
    """Algorithm 2: edges between every pair of adjacent layers, as ``(E, 2)`` node ids.

    Nodes are numbered layer by layer.  For layers ``l1, l2 = l1 + 1`` the budget of
    eq. 13 goes to the larger layer ``s`` (``l1`` on ties), balanced with random
    tie breaks; node ``n`` of ``s`` connects to a range of ``c_n`` consecutive nodes
    of the other layer ``t`` centred at ``round(n (N_t - 1) / (N_s - 1))``.
    """
    starts = np.concatenate([[0], np.cumsum(layer_sizes)]).astype(np.int64)
    out: list[tuple[int, int]] = []
    for l1 in range(len(layer_sizes) - 1):
        l2 = l1 + 1
        n1, n2 = int(layer_sizes[l1]), int(layer_sizes[l2])
        budget = adjacent_edge_budget(n1, n2, rho_e)
        s, t = (l1, l2) if n1 >= n2 else (l2, l1)
        n_s, n_t = int(layer_sizes[s]), int(layer_sizes[t])
        if budget > n_s * n_t:  # cannot happen for rho_e <= 1; guards the cone ranges
            raise ValueError(f"assign_edges: budget {budget} exceeds {n_s} x {n_t} between layers {l1}, {l2}")
        q, r = divmod(budget, n_s)
        counts = np.full(n_s, q, dtype=np.int64)
        if r:
            counts[rng.choice(n_s, size=r, replace=False)] += 1
        for n in range(n_s):
            for j in _cone_targets(n, int(counts[n]), n_s, n_t):
                a, b = (starts[s] + n, starts[t] + j)
                out.append((int(a), int(b)) if s == l1 else (int(b), int(a)))
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


# ---------------------------------------------------------------- algorithm 3
def skip_count(n_edges: int, rho_s: float) -> int:
    """Eq. 14 as algorithm 3 computes it: ``ceil(|E| rho_S / (1 - rho_S))``."""
    return math.ceil(n_edges * rho_s / (1.0 - rho_s) - 1e-9)


def assign_skips(
    layer_sizes: Sequence[int], n_edges: int, rho_s: float, rng: np.random.Generator
) -> np.ndarray:
    """Algorithm 3: ``skip_count(n_edges)`` skip connections, each from layer
    ``l_s ~ U{0..L-3}`` to ``l_t ~ U{l_s+2..L-1}``, source node ``floor(x_s N_s)``
    and target ``floor(min(x_s + 0.2 y, 0.999) N_t)`` with ``x_s, y ~ U(0, 1)``.
    None when fewer than 3 layers."""
    n_layers = len(layer_sizes)
    if n_layers < 3:
        return np.zeros((0, 2), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(layer_sizes)]).astype(np.int64)
    out = np.empty((skip_count(n_edges, rho_s), 2), dtype=np.int64)
    for i in range(len(out)):
        ls = int(rng.integers(0, n_layers - 2))
        lt = int(rng.integers(ls + 2, n_layers))
        xs = rng.random()
        y = rng.random()
        xt = min(xs + 0.2 * y, 0.999)
        out[i, 0] = starts[ls] + math.floor(xs * layer_sizes[ls])
        out[i, 1] = starts[lt] + math.floor(xt * layer_sizes[lt])
    return out


# ---------------------------------------------------------------- the family
def layered_structure(n: int, seed: int, params: LayeredParams = LayeredParams()) -> LayeredStructure:
    """Draw one layered graph of ``n`` nodes (algorithms 1-3 and per-layer memory)."""
    if n < 1:
        raise ValueError(f"layered graph needs n >= 1 nodes, got {n}")
    rng = np.random.default_rng(seed)
    width = float(rng.uniform(params.width_low, params.width_high))
    n_layers = target_layers(n, width)
    sizes = assign_nodes(n, n_layers, params.sigma_n, rng)
    adjacent = assign_edges(sizes, params.rho_e, rng)
    skips = assign_skips(sizes, len(adjacent), params.rho_s, rng)
    m_units = sample_memory_units(rng, len(sizes), params.mixture)
    p_units = sample_memory_units(rng, len(sizes), params.mixture)
    return LayeredStructure(
        n=n,
        width_factor=width,
        target_layers=n_layers,
        layer_sizes=sizes,
        adjacent_edges=adjacent,
        skip_draws=skips,
        m_units=m_units,
        p_units=p_units,
    )


def layered_graph(
    n: int,
    seed: int,
    params: LayeredParams = LayeredParams(),
    *,
    unit_bytes: int = DEFAULT_UNIT_BYTES,
    name: str | None = None,
) -> Graph:
    """A layered DAG of ``n`` ops (paper 000 appendix A), deterministic in ``seed``.

    ``graph.metadata`` holds ``family``, ``seed``, ``width_factor``,
    ``target_layers``, ``layer_sizes``, ``layer_of_op`` (array), ``mem_units`` and
    ``param_units`` (per-op real memory in units), ``unit_bytes``, ``n_skip_draws``.
    Every op has type ``"Einsum"`` (the ONNX op :mod:`onnx_sched.synth.onnx_writer`
    realises it with, so an ONNX round trip keeps op types) and attributes
    ``{"layer": l}``.
    """
    st = layered_structure(n, seed, params)
    layer = st.layer_of_node
    m = st.m_units[layer]
    p = st.p_units[layer]
    g = Graph.from_edges(
        n,
        map(tuple, st.edges.tolist()),
        output_bytes=units_to_bytes(m, unit_bytes, minimum=4),
        param_bytes=units_to_bytes(p, unit_bytes),
        op_types=["Einsum"] * n,
        name=name or f"layered-n{n}-s{seed}",
    )
    layer.setflags(write=False)
    m.setflags(write=False)
    p.setflags(write=False)
    return replace(
        g,
        op_attrs=tuple({"layer": int(l)} for l in layer),
        metadata={
            "family": "layered",
            "seed": int(seed),
            "width_factor": st.width_factor,
            "target_layers": st.target_layers,
            "layer_sizes": st.layer_sizes,
            "layer_of_op": layer,
            "mem_units": m,
            "param_units": p,
            "unit_bytes": int(unit_bytes),
            "n_skip_draws": int(len(st.skip_draws)),
        },
    )
