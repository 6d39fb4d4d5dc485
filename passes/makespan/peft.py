"""PEFT: predict earliest finish time (Arabnejad & Barbosa 2014).

The optimistic cost table ``OCT[v, p]`` is the shortest remaining path from
``v`` placed on unit ``p`` to a sink when every later op takes its best unit:
``OCT[v, p] = max_{w in succ(v)} min_{q} (OCT[w, q] + d[w, q] + (q != p) * c-bar(v, w))``
(``c-bar``: the edge's mean transfer cost).  Ops are taken in decreasing mean
``OCT`` among ready ops and placed on the unit minimising ``EFT + OCT`` with
insertion.  Needs unit resource demands.
"""

from __future__ import annotations

import numba
import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.paths import _mean_comm
from onnx_sched.cost.makespan.problem import _topo
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.schedule import Schedule


@numba.njit(cache=True)
def _oct(topo, dur, pred_ptr, pred_idx, ebytes, lat_bar, inv_bar):  # noqa: ANN001, ANN202
    n, p = dur.shape
    table = np.zeros((n, p))
    val = np.empty(p)
    for i in range(n - 1, -1, -1):
        w = topo[i]
        best = np.inf
        for q in range(p):
            val[q] = table[w, q] + dur[w, q]
            if val[q] < best:
                best = val[q]
        for k in range(pred_ptr[w], pred_ptr[w + 1]):
            v = pred_idx[k]
            c = best + lat_bar + ebytes[k] * inv_bar
            for q in range(p):
                x = val[q] if val[q] < c else c
                if x > table[v, q]:
                    table[v, q] = x
    return table


def oct_table(problem: ms.MakespanProblem) -> np.ndarray:
    """``(n, P)`` optimistic cost table (inf entries of ``durations`` are skipped)."""
    lat_bar, inv_bar = _mean_comm(problem) if problem.has_transfers else (0.0, 0.0)
    preds = problem.graph.op_preds
    return _oct(_topo(problem), problem.durations, preds.indptr, preds.indices, problem.edge_bytes,
                lat_bar, inv_bar)


@register("peft", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """PEFT with insertion; ``ValueError`` when some op demands more than one resource unit."""
    problem = ms.problem_of(graph, ctx)
    if (problem.demand != 1).any():
        raise ValueError("peft needs every op to demand one resource unit; use list-cp for larger demands")
    table = oct_table(problem)
    allowed = problem.allowed
    rank = np.where(allowed, table, 0.0).sum(axis=1) / allowed.sum(axis=1)
    start, place, _ = ms.run_list(problem, rank, insertion=True, oct_table=np.where(allowed, table, 0.0))
    return ms.make_schedule(problem, start, place, "peft")
