"""Demonstration orders for imitation pre-training of the peak-memory policy.

REINFORCE (paper 000, 4.3) needs hundreds of thousands of sampled graphs to
reach the approximate-DP level; on a 2-core CPU that is out of reach (the
shipped REINFORCE model saw 4,512 graphs).  A far cheaper signal is the order
the approximate DP itself finds: maximising its eq. 8 log-likelihood teaches the
priorities directly what a good order looks like, and REINFORCE can then refine
the result.  Any topological order is reachable by eq. 8 (give each op a higher
priority than every op after it), so the target is always representable.

The demonstrations are the orders of the registry pass ``beam`` (approximate DP
with state collapsing) on training graphs of any synthetic family (layered by
default).  They are costly (about a second per 500-op graph at width 10^4), so
each one is cached as an ``.npy`` file named by family, size, seed and width, and :func:`build_experts` fills a cache with a
process pool; a later run, or a later session, reuses the cache.

Example:
    >>> from onnx_sched.synth.layered import layered_graph
    >>> order = expert_order(layered_graph(40, 3), width=64)
    >>> sorted(order.tolist()) == list(range(40))
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_sched.graph import Graph

__all__ = ["ExpertSpec", "build_experts", "expert_order", "load_expert"]


@dataclass(frozen=True)
class ExpertSpec:
    """One demonstration: the graph ``generate(family, n_ops, seed)`` ordered by beam search of ``width``."""

    n_ops: int
    seed: int
    width: int
    family: str = "layered"

    def graph(self) -> Graph:
        from onnx_sched.synth import generate

        return generate(self.family, self.n_ops, self.seed)

    def path(self, cache_dir: str | os.PathLike[str]) -> Path:
        return Path(cache_dir) / f"{self.family}_n{self.n_ops}_seed{self.seed}_beam{self.width}.npy"


def expert_order(graph: Graph, width: int) -> np.ndarray:
    """The order approximate DP (registry pass ``beam``, ``width`` states per layer) finds for ``graph``."""
    from onnx_sched.passes import PassContext, get_pass

    result = get_pass("beam", "peak-mem")(graph, PassContext(time_limit=3600.0, options={"beam_width": width}))
    return np.asarray(result.order, dtype=np.int32)


def _build_one(spec: ExpertSpec, cache_dir: str) -> Path:
    path = spec.path(cache_dir)
    if not path.is_file():
        order = expert_order(spec.graph(), spec.width)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npy")
        np.save(tmp, order)
        os.replace(tmp, path)
    return path


def build_experts(specs: Iterable[ExpertSpec], cache_dir: str | os.PathLike[str], workers: int = 1) -> list[Path]:
    """Make sure every demonstration of ``specs`` is in ``cache_dir``; returns their paths in order."""
    cache = Path(cache_dir)
    specs = list(specs)
    if workers <= 1:
        return [_build_one(s, str(cache)) for s in specs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_build_one, specs, [str(cache)] * len(specs), chunksize=4))


def load_expert(spec: ExpertSpec, cache_dir: str | os.PathLike[str]) -> np.ndarray:
    """A cached demonstration (built on the spot if missing)."""
    return np.load(_build_one(spec, str(cache_dir)))
