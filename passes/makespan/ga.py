"""Genetic algorithm over list-scheduling priorities (paper 001 appendix, GA ablation).

Chromosome: one random key in ``[0, 1]`` per op, decoded by list scheduling
(higher key = earlier).  pymoo's single-objective GA (tournament selection, SBX
crossover, polynomial mutation, elitist survival).  As in paper 001 the initial
population is seeded with *sampled priorities*: the CP, MOPNR and SPT
priorities plus Gumbel-top-k samples around the critical-path logits (paper 001
eq. 7; the learned sampler's logits replace them when it exists).  Paper 001
uses 256 seeds, population 1000 and 100 generations; here the defaults are
smaller and the time limit stops the search (options ``population``,
``generations``, ``seeds``).
"""

from __future__ import annotations

import numpy as np
from pymoo.algorithms.soo.nonconvex.ga import GA
from pymoo.core.problem import Problem

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.list_kernels import _rank_keys
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._priorities import (
    cp_logits,
    cp_priority,
    gumbel_priorities,
    mopnr_priority,
    spt_priority,
)
from onnx_sched.schedule import Schedule


def _unit_interval(priority: np.ndarray) -> np.ndarray:
    """Map priorities to rank-based keys in ``(0, 1]`` with the same list-scheduling order."""
    key = _rank_keys(priority)
    return (len(priority) - key) / len(priority)


def seed_population(problem: ms.MakespanProblem, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` priority vectors in ``[0, 1]``: the three classical ones then Gumbel samples of CP logits."""
    rows = [_unit_interval(f(problem)) for f in (cp_priority, mopnr_priority, spt_priority)]
    if k > len(rows):
        samples = gumbel_priorities(cp_logits(problem), rng, k - len(rows))
        rows.extend(_unit_interval(s) for s in samples)
    return np.stack(rows[:k])


class _Priorities(Problem):
    def __init__(self, problem: ms.MakespanProblem) -> None:
        super().__init__(n_var=problem.n_ops, n_obj=1, xl=0.0, xu=1.0)
        self.problem = problem

    def _evaluate(self, x, out, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        out["F"] = ms.list_makespans(self.problem, x)[:, None]


def search(problem: ms.MakespanProblem, time_limit: float, seed: int, population: int = 100,
           generations: int = 100, seeds: int = 64, extra: np.ndarray | None = None) -> tuple[np.ndarray, float, int]:
    """Run the GA; returns (best priority, its makespan, generations run).

    ``extra``: more priority vectors (any scale) put into the initial population first.
    """
    if population < 2 or generations < 1 or seeds < 1:
        raise ValueError(f"ga: population must be >= 2, generations and seeds >= 1, got population={population}, "
                         f"generations={generations}, seeds={seeds}")
    rng = np.random.default_rng(seed)
    start = work_clock()
    x0 = seed_population(problem, max(3, min(seeds, population)), rng)
    if extra is not None and len(extra):
        x0 = np.vstack([np.stack([_unit_interval(e) for e in np.atleast_2d(extra)]), x0])[:population]
    if len(x0) < population:
        x0 = np.vstack([x0, rng.random((population - len(x0), problem.n_ops))])
    algo = GA(pop_size=population, sampling=x0, eliminate_duplicates=False)
    algo.setup(_Priorities(problem), termination=("n_gen", generations), seed=int(seed) % (2**31), verbose=False)
    gens, last = 0, 0.0  # the last generation's seconds: one that would end past the limit does not start
    while algo.has_next() and work_clock() - start + last < time_limit:
        began = work_clock()
        pop = algo.ask()
        algo.evaluator.eval(algo.problem, pop)
        algo.tell(infills=pop)
        gens += 1
        last = work_clock() - began
    best = algo.opt[0] if algo.opt is not None and len(algo.opt) else None
    if best is None:
        f = ms.list_makespans(problem, x0)
        i = int(np.argmin(f))
        return x0[i], float(f[i]), gens
    return np.asarray(best.X, np.float64), float(best.F[0]), gens


@register("ga", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """GA within ``ctx.time_limit`` seeded with sampled priorities."""
    problem = ms.problem_of(graph, ctx)
    x, _, gens = search(problem, ctx.time_limit, ctx.seed, int(ctx.option("population", 100)),
                        int(ctx.option("generations", 100)), int(ctx.option("seeds", 64)))
    return ms.list_schedule(problem, x, "ga", generations=gens)
