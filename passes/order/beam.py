"""``beam``: approximate dynamic programming (paper 000, appendix C.3).

Beam search over scheduled-set states: every layer expands every ready op of
every kept state, collapses states with the same set to the one with the lowest
peak so far (their futures are identical), and keeps the ``beam_width`` states
with the lowest (peak, live bytes).  With an unbounded width this is exact.

States are bitsets (uint64 words) hashed with two Zobrist keys; all per-layer
work runs in numba kernels (:mod:`onnx_sched.passes.order._kernels`).  When the
projected time passes ``ctx.time_limit`` the width shrinks (down to 1); when even
width 1 would end past it (a graph with thousands of ops ready at once) the greedy
rule of :mod:`~onnx_sched.passes.order.greedy` finishes the best state's order, so the
pass always returns a complete order in time.  The search runs on the graph with its chains contracted
(:mod:`onnx_sched.cost.memory_chains`: same peaks, 25-45 % fewer ops on the corpus networks).

Options: ``beam_width`` (default 1000).
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost.memory_chains import Contraction, contract_chains
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule, peak_of
from onnx_sched.passes.order._kernels import kernel_graph
from onnx_sched.passes.order._search import (
    SearchResult,
    layered_search,
    start_layer,
    zobrist_keys,
)
from onnx_sched.passes.order.greedy import greedy_order
from onnx_sched.schedule import Schedule

__all__ = ["beam_search", "run"]

DEFAULT_WIDTH = 1000


def beam_search(
    graph: Graph, width: int, *, inplace: bool, seed: int = 0, time_limit: float | None = None, cutoff: int | None = None,
    contract: bool = True,
) -> tuple[np.ndarray | None, SearchResult]:
    """Best complete order of a width-``width`` beam search and the search record.

    With ``cutoff`` (an incumbent's peak) states whose peak reaches it are dropped,
    which leaves the beam to orders that can still beat the incumbent; the order is
    then ``None`` when none does.  ``contract=False`` searches the graph as given, chains included.
    """
    if width < 1:
        raise ValueError(f"beam_width must be >= 1, got {width}")
    chains = contract_chains(graph, inplace) if contract else Contraction.identity(graph)  # same peaks, fewer states
    kg = kernel_graph(chains.graph, inplace)
    z1, z2 = zobrist_keys(chains.graph.n_ops, seed)
    start = start_layer(kg, np.zeros(0, np.int64), kg.base, kg.base, z1, z2)
    deadline = None if time_limit is None else work_clock() + float(time_limit)
    limit = np.iinfo(np.int64).max if cutoff is None else int(cutoff)
    res = layered_search(kg, start, chains.graph.n_ops, z1=z1, z2=z2, width=int(width), cutoff=limit, deadline=deadline,
                         shrink_to_fit=True)
    if res.order is None and cutoff is None:  # impossible without a cutoff; kept as a guard
        raise RuntimeError(f"beam search on {graph.name!r} ended without a complete order")
    if res.order is None:
        return None, res
    if not res.complete:  # stopped for time at width 1: the greedy rule finishes the order
        short = greedy_order(chains.graph, inplace, prefix=res.order)
        if cutoff is not None and peak_of(chains.graph, short, inplace) >= cutoff:
            return None, res
        return chains.expand(short), res
    return chains.expand(res.order), res


@register("beam", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    width = int(ctx.option("beam_width", DEFAULT_WIDTH))
    t0 = work_clock()
    order, res = beam_search(graph, width, inplace=ctx.inplace, seed=ctx.seed, time_limit=ctx.time_limit)
    finish = {} if res.complete else {"greedy_finish_after_steps": res.layers_done}
    return make_schedule(
        graph, order, "beam", ctx.inplace, **finish,
        beam_width=width, max_states=res.max_states, width_shrunk_for_time=res.shrunk,
        seconds=round(work_clock() - t0, 4),
    )
