"""Random connected pieces of the corpus's real models (train split only).

Why: no generator matches every pattern of real exports (shape arithmetic, mask
building, odd fan-outs); pieces of the real train-split models put those patterns,
with their real tensor sizes, into the training mixture, and the held-out models
(:data:`~onnx_sched.synth.corpus_split.HELD_OUT_PEAKMEM`) are never drawn.

Family ``corpus-subgraph``: :func:`corpus_subgraph_graph` ``(n, seed, params, *,
corpus, name)``.  One draw: a train-split model with at least ``n`` ops (uniform
among them), then ``n`` of its ops by one of three region shapes (uniform):

* ``prefix``: the first ``n`` ops of a random topological order (Kahn's algorithm
  with random priorities) -- downward closed, so no input comes from outside;
* ``window``: ``n`` consecutive ops of a random topological order starting at a
  random position -- convex (every path between two of its ops stays inside);
* ``bfs``: a random op and its nearest ``n - 1`` ops in undirected breadth-first
  order (paper 002's sub-graphs) -- connected, not always convex.

The piece is the model cut as ``onnx.utils.extract_model`` would cut it: tensors
read from ops outside the piece become graph inputs (live from the start), outputs
read after the piece (or model outputs) stay graph outputs, weights are dropped
(resident, not activation memory).  An op with several outputs (``Split``,
``Dropout``'s mask) gets one tensor of their summed bytes, since the ONNX writer
writes one output per op.  Bytes are the model's, times ``U(1 - noise, 1 + noise)``
per tensor when ``params.noise > 0``, rounded up to a multiple of 4.  The graph
has exactly ``n`` ops (``25 <= n <= 800`` is the intended range; ``n`` above the
largest train model raises).  Deterministic in ``seed`` (and the corpus folder).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.dag import kahn_order
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.importers._assemble import assemble_graph
from onnx_sched.synth._builder import writer_bytes
from onnx_sched.synth.corpus_split import train_models

__all__ = ["REGIONS", "CorpusSubgraphParams", "corpus_subgraph_graph", "extract_ops", "region_ops"]

REGIONS = ("prefix", "window", "bfs")


@dataclass(frozen=True)
class CorpusSubgraphParams:
    """Region weights (``prefix``, ``window``, ``bfs``) and the tensor-size noise."""

    prefix_weight: float = 1.0
    window_weight: float = 1.0
    bfs_weight: float = 1.0
    noise: float = 0.0  # multiplicative U(1 - noise, 1 + noise) per tensor

    def __post_init__(self) -> None:
        w = (self.prefix_weight, self.window_weight, self.bfs_weight)
        if min(w) < 0 or sum(w) <= 0:
            raise ValueError(f"CorpusSubgraphParams: region weights must be >= 0 with a positive sum, got {w}")
        if not 0.0 <= self.noise < 1.0:
            raise ValueError(f"CorpusSubgraphParams: noise must be in [0, 1), got {self.noise}")


@lru_cache(maxsize=64)
def _load(path: str) -> Graph:
    from onnx_sched.importers.onnx import import_onnx

    return import_onnx(path).graph


def region_ops(graph: Graph, n: int, region: str, rng: np.random.Generator) -> np.ndarray:
    """``n`` op ids of ``graph`` forming a ``region`` (see module docstring), sorted."""
    if not 1 <= n <= graph.n_ops:
        raise ValueError(f"region_ops: need 1 <= n <= {graph.n_ops} ops, got {n}")
    if region in ("prefix", "window"):
        order = kahn_order(graph, rng.random(graph.n_ops))
        start = 0 if region == "prefix" else int(rng.integers(0, graph.n_ops - n + 1))
        return np.sort(order[start : start + n])
    if region != "bfs":
        raise ValueError(f"region_ops: unknown region {region!r}; choose from {REGIONS}")
    preds, succs = graph.op_preds, graph.op_succs
    start = int(rng.integers(graph.n_ops))
    seen = {start}
    queue = deque([start])
    while queue and len(seen) < n:
        v = queue.popleft()
        for w in (*preds.row(v).tolist(), *succs.row(v).tolist()):
            if w not in seen and len(seen) < n:
                seen.add(w)
                queue.append(w)
    for v in range(graph.n_ops):  # only when the component is smaller than n: then the piece is disconnected
        if len(seen) >= n:
            break
        seen.add(v)
    return np.asarray(sorted(seen), dtype=np.int64)


def extract_ops(graph: Graph, ops: np.ndarray, *, name: str, scale: np.ndarray | None = None,
                metadata: dict[str, Any] | None = None) -> Graph:
    """The piece of ``graph`` made of ``ops`` (see module docstring); ``scale`` multiplies tensor bytes."""
    keep = set(int(v) for v in ops)
    nbytes = graph.tensor_bytes * (1.0 if scale is None else scale)
    consumers = graph.tensor_consumers
    t_names: list[str] = []
    t_bytes: list[int] = []
    t_kind: list[int] = []
    t_prod: list[int] = []
    t_dtype: list[str] = []
    t_shape: list[Any] = []
    outside: dict[int, int] = {}  # original tensor -> new graph-input tensor
    out_of: dict[int, int] = {}  # original op -> new tensor
    op_list = [int(v) for v in ops]
    new_op = {v: i for i, v in enumerate(op_list)}

    def add(name_: str, b: float, kind: int, prod: int, dtype: str, shape: Any) -> int:
        t_names.append(name_)
        t_bytes.append(writer_bytes(b))
        t_kind.append(kind)
        t_prod.append(prod)
        t_dtype.append(dtype)
        t_shape.append(shape)
        return len(t_names) - 1

    for v in op_list:
        outs = graph.op_outputs.row(v).tolist()
        read_later = any(graph.tensor_kind[t] == TensorKind.OUTPUT for t in outs) or any(
            int(c) not in keep for t in outs for c in consumers.row(t))
        one = outs[0] if len(outs) == 1 else None
        out_of[v] = add(graph.tensor_names[outs[0]], float(nbytes[outs].sum()),
                        int(TensorKind.OUTPUT if read_later else TensorKind.ACTIVATION), new_op[v],
                        graph.tensor_dtypes[outs[0]], graph.tensor_shapes[one] if one is not None else None)
    op_in: list[list[int]] = []
    for v in op_list:
        ins: list[int] = []
        for t in graph.op_inputs.row(v).tolist():
            p = int(graph.tensor_producer[t])
            if p in keep:
                ins.append(out_of[p])
            elif graph.tensor_kind[t] != TensorKind.WEIGHT:
                if t not in outside:
                    outside[t] = add(graph.tensor_names[t], float(nbytes[t]), int(TensorKind.INPUT), -1,
                                     graph.tensor_dtypes[t], graph.tensor_shapes[t])
                ins.append(outside[t])
        op_in.append(list(dict.fromkeys(ins)))
    piece = assemble_graph(
        name=name,
        op_names=tuple(graph.op_names[v] for v in op_list),
        op_types=tuple(graph.op_types[v] for v in op_list),
        op_attrs=tuple(dict(graph.op_attrs[v]) for v in op_list),
        op_in=op_in,
        op_out=[[out_of[v]] for v in op_list],
        tensor_names=t_names,
        tensor_bytes=np.asarray(t_bytes, np.int64),
        tensor_kind=t_kind,
        tensor_producer=t_prod,
        tensor_dtypes=t_dtype,
        tensor_shapes=t_shape,
        flops_of=lambda *_: 0.0,
        metadata=dict(metadata or {}),
    )
    return replace(piece, op_flops=graph.op_flops[op_list])  # the model's estimates (they saw its weights)


def corpus_subgraph_graph(n: int, seed: int, params: CorpusSubgraphParams = CorpusSubgraphParams(), *,
                          corpus: str | os.PathLike[str] | None = None, name: str | None = None) -> Graph:
    """``n`` ops of a random train-split corpus model (see module docstring)."""
    if n < 1:
        raise ValueError(f"corpus-subgraph needs n >= 1 ops, got {n}")
    rng = np.random.default_rng(seed)
    paths = train_models(corpus)
    graph: Graph | None = None
    path: Path | None = None
    for i in rng.permutation(len(paths)).tolist():
        g = _load(str(paths[i]))
        if g.n_ops >= n:
            graph, path = g, paths[i]
            break
    if graph is None or path is None:
        biggest = max(_load(str(p)).n_ops for p in paths)
        raise ValueError(f"corpus-subgraph: no train-split model has {n} ops (the largest has {biggest})")
    w = np.asarray([params.prefix_weight, params.window_weight, params.bfs_weight])
    region = REGIONS[int(rng.choice(len(REGIONS), p=w / w.sum()))]
    ops = region_ops(graph, n, region, rng)
    scale = rng.uniform(1 - params.noise, 1 + params.noise, graph.n_tensors) if params.noise > 0 else None
    meta = {"family": "corpus-subgraph", "seed": int(seed), "model": path.stem, "region": region,
            "noise": params.noise, "model_ops": graph.n_ops}
    return extract_ops(graph, ops, name=name or f"corpus-subgraph-{path.stem}-n{n}-s{seed}", scale=scale,
                       metadata=meta)
