"""``random``: the best of ``samples`` random topological orders (paper 000 baseline).

Each order takes a uniformly random ready op at every step; the one with the
lowest peak wins.  Seeded by ``ctx.seed``.  Stops early (with the samples done so
far, at least one) when ``ctx.time_limit`` would be exceeded.

Options: ``samples`` (default 100).
"""

from __future__ import annotations

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule
from onnx_sched.passes.order._list_kernels import list_args, random_orders_kernel
from onnx_sched.schedule import Schedule

__all__ = ["best_random_order", "run"]

DEFAULT_SAMPLES = 100


def best_random_order(graph: Graph, samples: int, *, inplace: bool, seed: int = 0, time_limit: float | None = None) -> tuple[np.ndarray, int, int]:
    """(best order, its peak, samples drawn).  Samples are drawn in batches so a time limit can stop them."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    args = list_args(graph, inplace)
    t0 = work_clock()
    best_order, best_peak, drawn, batch = None, None, 0, 1
    rng = np.random.default_rng(seed)
    while drawn < samples:
        k = min(batch, samples - drawn)
        order, peak = random_orders_kernel(graph.n_ops, k, int(rng.integers(0, 2**31 - 1)), *args)
        drawn += k
        if best_peak is None or peak < best_peak:
            best_order, best_peak = order, int(peak)
        elapsed = work_clock() - t0
        if time_limit is not None and elapsed * (drawn + batch * 2) / drawn > time_limit:
            break
        batch = min(batch * 2, 64)
    assert best_order is not None and best_peak is not None
    return best_order, best_peak, drawn


@register("random", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    samples = int(ctx.option("samples", DEFAULT_SAMPLES))
    order, _, drawn = best_random_order(graph, samples, inplace=ctx.inplace, seed=ctx.seed, time_limit=ctx.time_limit)
    return make_schedule(graph, order, "random", ctx.inplace, samples=drawn, samples_requested=samples)
