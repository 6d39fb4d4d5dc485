"""Synthetic graph families (paper 000 appendix A, paper 001 C.3, paper 002 E.5).

* :mod:`~onnx_sched.synth.layered`: ``layered_graph(n, seed)`` -- NN-like layered DAGs.
* :mod:`~onnx_sched.synth.random_dags`: ``er_graph``, ``sbm_graph``, ``ws_graph``,
  ``ba_graph`` -- random undirected graphs oriented into DAGs.
* :mod:`~onnx_sched.synth.randwire`: ``randwire_er_graph``, ``randwire_ws_graph``,
  ``randwire_ba_graph`` -- RandWire nets (Xie et al. 2019) as their ONNX export has them.
* :mod:`~onnx_sched.synth.transformer`: ``transformer_graph`` -- encoder / decoder /
  encoder-decoder stacks (GQA option) as exported.
* :mod:`~onnx_sched.synth.corpus_subgraph`: ``corpus_subgraph_graph`` -- pieces of the
  real corpus models of the issue-17 train split (:mod:`~onnx_sched.synth.corpus_split`).
* :mod:`~onnx_sched.synth.attrs`: ``makespan_attrs(graph, seed)`` -> ``MakespanAttrs``.
* :mod:`~onnx_sched.synth.onnx_writer`: ``graph_to_onnx(graph)`` -- runnable ONNX.
* :mod:`~onnx_sched.synth.dataset`: NPZ datasets (``save_npz`` / ``load_npz``).
* :data:`FAMILIES`: family name -> ``generator(n, seed) -> Graph``.

Seed convention: training graphs use seeds ``0 .. 9_999``, test / benchmark
graphs ``10_000`` and above (:data:`TEST_SEED_BASE`).
"""

from __future__ import annotations

from collections.abc import Callable

from onnx_sched.graph import Graph
from onnx_sched.synth.attrs import MakespanAttrs, makespan_attrs
from onnx_sched.synth.corpus_subgraph import CorpusSubgraphParams, corpus_subgraph_graph
from onnx_sched.synth.layered import LayeredParams, layered_graph
from onnx_sched.synth.random_dags import ba_graph, er_graph, sbm_graph, ws_graph
from onnx_sched.synth.randwire import RandWireParams, randwire_ba_graph, randwire_er_graph, randwire_ws_graph
from onnx_sched.synth.transformer import TransformerParams, transformer_graph

__all__ = [
    "FAMILIES",
    "TEST_SEED_BASE",
    "TRAIN_SEEDS",
    "CorpusSubgraphParams",
    "LayeredParams",
    "MakespanAttrs",
    "RandWireParams",
    "TransformerParams",
    "ba_graph",
    "corpus_subgraph_graph",
    "er_graph",
    "generate",
    "layered_graph",
    "makespan_attrs",
    "randwire_ba_graph",
    "randwire_er_graph",
    "randwire_ws_graph",
    "sbm_graph",
    "transformer_graph",
    "ws_graph",
]

#: Seeds reserved for training data; test and benchmark graphs start at TEST_SEED_BASE.
TRAIN_SEEDS = range(0, 10_000)
TEST_SEED_BASE = 10_000

FAMILIES: dict[str, Callable[..., Graph]] = {
    "layered": layered_graph,
    "er": er_graph,
    "sbm": sbm_graph,
    "ws": ws_graph,
    "ba": ba_graph,
    # issue 17's mixture: graphs shaped like real exports (``n`` = ops, see each module for the tolerance)
    "randwire-er": randwire_er_graph,
    "randwire-ws": randwire_ws_graph,
    "randwire-ba": randwire_ba_graph,
    "transformer": transformer_graph,
    "corpus-subgraph": corpus_subgraph_graph,
}


def generate(family: str, n: int, seed: int, **kwargs: object) -> Graph:
    """``FAMILIES[family](n, seed, **kwargs)``; ``ValueError`` lists the families."""
    try:
        fn = FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown graph family {family!r}; choose from {', '.join(FAMILIES)}") from None
    return fn(n, seed, **kwargs)
