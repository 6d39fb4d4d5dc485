"""Random-graph DAG families: Erdos-Renyi, stochastic block model, Watts-Strogatz, Barabasi-Albert.

Public API (stable names):

* :func:`er_graph` ``(n, seed, p=0.05, **kw) -> Graph``          (paper 001 C.3)
* :func:`sbm_graph` ``(n, seed, k=4, p_in=0.3, p_out=0.001, **kw) -> Graph``  (paper 001 C.3)
* :func:`ws_graph` ``(n, seed, k=4, p=0.3, **kw) -> Graph``      (paper 002 E.5)
* :func:`ba_graph` ``(n, seed, m=2, **kw) -> Graph``             (paper 002 E.5)
* :func:`orient_acyclic` ``(undirected, rng) -> list[(u, v)]``

The undirected graphs come from networkx's generators.  They become DAGs as
Paliwal et al. (2020) do it and papers 001 / 002 describe it ("randomly choose a
direction for every edge in a way that produces no cycles"): draw a uniformly
random permutation of the nodes and point every edge from the earlier to the
later node of that permutation.  Node ids are then relabelled to the permutation
rank, so ``0..n-1`` is a topological order and ids carry no block / age
information (the SBM's communities and BA's seed nodes are shuffled away).

Memory: every op's output (and transient parameter) size is drawn from the same
mixture as the layered family, per *node* (these families have no layers), in
memory units with the byte scale of :mod:`onnx_sched.synth.common`.
Durations for makespan: paper 001 gives ER / SBM the layered family's affine
model ``round(100 m) + 1``; paper 002 draws runtimes ``U(0, 1)`` -- WS and BA
graphs record ``metadata["duration_model"] = "uniform"`` so
:func:`~onnx_sched.synth.attrs.makespan_attrs` uses that.  Paper 002 gives no
WS / BA parameters; the defaults here (WS ``k = 4, p = 0.3``; BA ``m = 2``) are
this project's choice.

Seeds: one ``numpy.random.default_rng(seed)``; networkx receives an integer
drawn from it, so a graph is deterministic in ``seed``.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import networkx as nx
import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.synth.common import (
    DEFAULT_UNIT_BYTES,
    GMM_PAPER,
    GaussianMixture,
    sample_memory_units,
    units_to_bytes,
)

__all__ = ["ba_graph", "er_graph", "orient_acyclic", "sbm_graph", "ws_graph"]


def orient_acyclic(undirected: nx.Graph, rng: np.random.Generator) -> tuple[int, list[tuple[int, int]]]:
    """Orient ``undirected`` (nodes ``0..n-1``) along a random node permutation.

    Returns ``(n, edges)`` with nodes relabelled to their permutation rank, so
    every edge goes from a smaller to a larger id.
    """
    n = undirected.number_of_nodes()
    rank = rng.permutation(n)  # rank[v] = position of v in the random order
    edges = sorted(
        (int(min(rank[u], rank[v])), int(max(rank[u], rank[v]))) for u, v in undirected.edges() if u != v
    )
    return n, edges


def _build(
    family: str,
    undirected: nx.Graph,
    rng: np.random.Generator,
    seed: int,
    params: dict,
    mixture: GaussianMixture,
    unit_bytes: int,
    duration_model: str,
    name: str | None,
) -> Graph:
    n, edges = orient_acyclic(undirected, rng)
    m = sample_memory_units(rng, n, mixture)
    p = sample_memory_units(rng, n, mixture)
    g = Graph.from_edges(
        n,
        edges,
        output_bytes=units_to_bytes(m, unit_bytes, minimum=4),
        param_bytes=units_to_bytes(p, unit_bytes),
        op_types=["Einsum"] * n,
        name=name or f"{family}-n{n}-s{seed}",
    )
    m.setflags(write=False)
    p.setflags(write=False)
    return replace(
        g,
        metadata={
            "family": family,
            "seed": int(seed),
            "params": dict(params),
            "mem_units": m,
            "param_units": p,
            "unit_bytes": int(unit_bytes),
            "duration_model": duration_model,
        },
    )


def _check_n(family: str, n: int) -> None:
    if n < 1:
        raise ValueError(f"{family} graph needs n >= 1 nodes, got {n}")


def _check_prob(family: str, label: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{family}: {label} must be a probability in [0, 1], got {p}")


def _nx_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def er_graph(
    n: int,
    seed: int,
    p: float = 0.05,
    *,
    mixture: GaussianMixture = GMM_PAPER,
    unit_bytes: int = DEFAULT_UNIT_BYTES,
    name: str | None = None,
) -> Graph:
    """Erdos-Renyi ``G(n, p)`` oriented into a DAG (paper 001 C.3: ``p = 0.05``)."""
    _check_n("er", n)
    _check_prob("er", "p", p)
    rng = np.random.default_rng(seed)
    und = nx.fast_gnp_random_graph(n, p, seed=_nx_seed(rng))
    return _build("er", und, rng, seed, {"p": p}, mixture, unit_bytes, "affine", name)


def sbm_block_sizes(n: int, k: int) -> list[int]:
    """``k`` communities as equal as possible (the first ``n % k`` one node larger)."""
    q, r = divmod(n, k)
    return [q + (1 if i < r else 0) for i in range(k)]


def sbm_undirected(sizes: list[int], p_in: float, p_out: float, seed: int) -> nx.Graph:
    """A stochastic block model over nodes ``0..sum(sizes)-1`` (blocks in order), node for node, edge for edge and in
    the same order as networkx 3.6's ``stochastic_block_model(sizes, p, seed=seed, sparse=True)`` builds it (blocks
    as Python sets, so a block's nodes come in set order).  Pinned here because networkx 3.7 draws differently: the
    synthetic SBM graphs (training sets, tests, the tables of docs/results.md) must not change with the networkx
    installed.

    >>> list(sbm_undirected([3, 3], 1.0, 0.0, 0).edges())
    [(0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5)]
    """
    rand = random.Random(seed)
    starts = [sum(sizes[:b]) for b in range(len(sizes) + 1)]
    blocks = [list(set(range(starts[b], starts[b + 1]))) for b in range(len(sizes))]
    g = nx.Graph()
    g.add_nodes_from(v for block in blocks for v in block)
    for i, j in itertools.combinations_with_replacement(range(len(sizes)), 2):
        p = p_in if i == j else p_out
        if i == j:  # within a block networkx draws every pair, then runs its sparse loop over none
            g.add_edges_from([e for e in itertools.combinations(blocks[i], 2) if rand.random() < p])
            pairs: itertools.product | itertools.chain = itertools.chain()
        else:
            pairs = itertools.product(blocks[i], blocks[j])
        if p == 1:
            g.add_edges_from(pairs)
        elif p > 0:  # geometric skips between the pairs that get an edge
            while True:
                skip = math.floor(math.log(rand.random()) / math.log(1 - p))
                next(itertools.islice(pairs, skip, skip), None)
                e = next(pairs, None)
                if e is None:
                    break
                g.add_edge(*e)
    return g


def sbm_graph(
    n: int,
    seed: int,
    k: int = 4,
    p_in: float = 0.3,
    p_out: float = 0.001,
    *,
    mixture: GaussianMixture = GMM_PAPER,
    unit_bytes: int = DEFAULT_UNIT_BYTES,
    name: str | None = None,
) -> Graph:
    """Stochastic block model with ``k`` equal communities, oriented into a DAG
    (paper 001 C.3: ``k = 4, p_in = 0.3, p_out = 0.001``)."""
    _check_n("sbm", n)
    if not 1 <= k <= n:
        raise ValueError(f"sbm: need 1 <= k <= n communities, got k={k}, n={n}")
    _check_prob("sbm", "p_in", p_in)
    _check_prob("sbm", "p_out", p_out)
    rng = np.random.default_rng(seed)
    und = sbm_undirected(sbm_block_sizes(n, k), p_in, p_out, _nx_seed(rng))
    plain = nx.Graph()
    plain.add_nodes_from(range(n))
    plain.add_edges_from(und.edges())
    return _build("sbm", plain, rng, seed, {"k": k, "p_in": p_in, "p_out": p_out}, mixture, unit_bytes, "affine", name)


def ws_graph(
    n: int,
    seed: int,
    k: int = 4,
    p: float = 0.3,
    *,
    mixture: GaussianMixture = GMM_PAPER,
    unit_bytes: int = DEFAULT_UNIT_BYTES,
    name: str | None = None,
) -> Graph:
    """Watts-Strogatz small world (ring of ``k`` nearest neighbours, rewiring ``p``),
    oriented into a DAG; ``U(0, 1)`` runtimes for makespan (paper 002 E.5)."""
    _check_n("ws", n)
    _check_prob("ws", "p", p)
    if not 0 <= k < n:
        raise ValueError(f"ws: need 0 <= k < n neighbours, got k={k}, n={n}")
    rng = np.random.default_rng(seed)
    und = nx.watts_strogatz_graph(n, k, p, seed=_nx_seed(rng))
    return _build("ws", und, rng, seed, {"k": k, "p": p}, mixture, unit_bytes, "uniform", name)


def ba_graph(
    n: int,
    seed: int,
    m: int = 2,
    *,
    mixture: GaussianMixture = GMM_PAPER,
    unit_bytes: int = DEFAULT_UNIT_BYTES,
    name: str | None = None,
) -> Graph:
    """Barabasi-Albert preferential attachment (``m`` edges per new node), oriented
    into a DAG; ``U(0, 1)`` runtimes for makespan (paper 002 E.5)."""
    _check_n("ba", n)
    if not 1 <= m < n:
        raise ValueError(f"ba: need 1 <= m < n edges per new node, got m={m}, n={n}")
    rng = np.random.default_rng(seed)
    und = nx.barabasi_albert_graph(n, m, seed=_nx_seed(rng))
    return _build("ba", und, rng, seed, {"m": m}, mixture, unit_bytes, "uniform", name)
