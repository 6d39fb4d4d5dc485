"""``brkga`` for makespan: BRKGA over lanes and priorities, paper 002's BRKGA candidate sampler (section 5, E.1).

Chromosome = |N| x |L| lane affinities + |N| op priorities (paper 003's encoding
without transfer genes: transfers are implied by the lanes).  Decoding: each op
on its highest-affinity lane among those whose unit can run it, ops in a
priority-tie-broken topological order (higher priority first); the chain
schedule is timed on the proxy (:mod:`onnx_sched.cost.makespan.chains`).
Standard BRKGA (:mod:`onnx_sched.brkga`): pi = 100, pi_e = 10, pi_c = 80,
rho = 0.7, 5,000 evaluations or the time limit.  As in paper 002, the final
population (best first) is the candidate set for ``--target``; ``--candidates N`` sizes that population
to N (elites and children in the same shares, 10 % and 80 %; the budget at least one population) unless
``population`` is given.  Options: ``evaluations``, ``population``, ``elites``, ``children``, ``elite_bias``,
and the candidate options of :mod:`._candidates` (``candidates``, ``top_k``, ``target``).
"""

from __future__ import annotations

import numba
import numpy as np

from onnx_sched.brkga import BrkgaParams, brkga
from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains, chain_times, lanes_of
from onnx_sched.dag_kernels import heap_pop, heap_push
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._candidates import CandidateOptions, select
from onnx_sched.schedule import Schedule

__all__ = ["candidates", "decode", "params_of", "run"]


@numba.njit(cache=True)
def _priority_orders(prio, indeg0, succ_ptr, succ_idx):  # noqa: ANN001, ANN202
    """Per row of ``prio``: Kahn's order taking the ready op of highest priority first."""
    k_count, n = prio.shape
    orders = np.empty((k_count, n), np.int64)
    hf = np.empty(n)
    hv = np.empty(n, np.int64)
    indeg = np.empty(n, np.int64)
    for k in range(k_count):
        indeg[:] = indeg0
        nh = 0
        for v in range(n):
            if indeg[v] == 0:
                nh = heap_push(hf, hv, nh, -prio[k, v], v)
        for i in range(n):
            v, nh = heap_pop(hf, hv, nh)
            orders[k, i] = v
            for e in range(succ_ptr[v], succ_ptr[v + 1]):
                w = succ_idx[e]
                indeg[w] -= 1
                if indeg[w] == 0:
                    nh = heap_push(hf, hv, nh, -prio[k, w], w)
    return orders


def decode(problem: ms.MakespanProblem, keys: np.ndarray) -> Chains:
    """Chromosomes ``(K, n * L + n)`` -> chain schedules (see module docstring)."""
    n, lanes = problem.n_ops, lanes_of(problem)
    keys = np.atleast_2d(keys)
    affinity = keys[:, : n * lanes.n].reshape(len(keys), n, lanes.n)
    allowed = problem.allowed[:, lanes.unit]
    lane = np.argmax(np.where(allowed[None], affinity, -1.0), axis=2)
    g = problem.graph
    order = _priority_orders(np.ascontiguousarray(keys[:, n * lanes.n:]), g.op_preds.lengths().astype(np.int64),
                             g.op_succs.indptr.astype(np.int64), g.op_succs.indices.astype(np.int64))
    return Chains(lane, order)


#: What choosing among the top k costs after the run (ranking, the target's times, the diversity over all pairs),
#: in chromosome evaluations per candidate kept: about 3.3 measured on an 8,369-op graph (1.15 s against 0.35 s per
#: generation of 90); BRKGA leaves that time when the pass's deadline is near.
SELECT_EVALUATIONS = 4


def params_of(ctx: PassContext) -> BrkgaParams:
    """BRKGA's sizes from the pass options: ``candidates`` sizes the population when ``population`` is not given.

    >>> params_of(PassContext(options={"candidates": 1000}))
    BrkgaParams(population=1000, elites=100, children=800, elite_bias=0.7, evaluations=5000)
    """
    base, wanted = BrkgaParams(), ctx.options.get("candidates")
    if wanted is not None and ctx.options.get("population") is None:
        size = max(int(wanted), 2)
        share = base.population
        base = BrkgaParams(population=size, elites=max(1, size * base.elites // share),
                           children=size * base.children // share, elite_bias=base.elite_bias,
                           evaluations=max(base.evaluations, size))
    return base.with_options(ctx.option)


def candidates(problem: ms.MakespanProblem, ctx: PassContext,
               deadline: Deadline | None = None) -> tuple[Chains, dict[str, int]]:
    """BRKGA's final population (best first) as chain schedules, and its evaluation counts; it stops at
    ``deadline`` (the pass's, else the time limit from now)."""
    params = params_of(ctx)
    n_genes = problem.n_ops * (lanes_of(problem).n + 1)

    def fitness(keys: np.ndarray) -> np.ndarray:
        return chain_times(problem, decode(problem, keys), check=False)[1]

    result = brkga(fitness, n_genes, params, seed=ctx.seed, deadline=deadline or Deadline(ctx.time_limit),
                   reserve=SELECT_EVALUATIONS * CandidateOptions.of(ctx).top_k)
    return decode(problem, result.population), {"evaluations": result.evaluations, "generations": result.generations}


@register("brkga", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    deadline = Deadline(ctx.time_limit)  # generating; then (measured target) timing, in the time held back for it
    measuring = ctx.measure_by(deadline)
    problem = ms.problem_of(graph, ctx)
    chains, info = candidates(problem, ctx, deadline)
    return select(problem, chains, ctx, "brkga", deadline=measuring, **info)
