"""``auto`` for makespan: the best of the heuristics within the time limit.

Runs, in order, list scheduling in file order (the reference it never loses
to), list-cp / list-mopnr / list-spt, HEFT and PEFT (unit demands only), the
learned sampler S(64) (``learned``; graphs of up to ``learned_max_ops`` ops,
default 3000; skipped when its checkpoint is missing or ``learned=0``, and
dropped when its encoder does not finish within half of the time left), then
spends the rest of the time limit (unless the best so far already meets the makespan lower bound) on

* CP-SAT hinted with the best schedule so far for graphs up to
  ``cpsat_max_ops`` ops (default 300), where it often proves optimality;
* the GA otherwise (seeded with the best schedule's start order, the
  classical priorities and Gumbel-top-k samples around the critical path).
  On 1000-op graphs CP-SAT rarely improves its hint within seconds while the
  GA does (``benchmarks/makespan.py``).

``info["candidates"]`` lists every makespan tried.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan import cpsat, ga, heft, list_rules, peft
from onnx_sched.schedule import Schedule

#: Share of the time left after which the learned sampler's encoder is stopped and ``auto`` goes on without it.
ENCODER_SHARE = 0.5


@register("auto", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """Portfolio of makespan methods under ``ctx.time_limit`` (see module docstring)."""
    t0 = work_clock()
    problem = ms.problem_of(graph, ctx)
    n = problem.n_ops
    cands: dict[str, Schedule] = {}
    cands["list-file"] = ms.list_schedule(problem, -np.arange(n, dtype=np.float64), "list-file")
    for name, prio in list_rules.PRIORITIES.items():
        cands[name] = ms.list_schedule(problem, prio(problem), name)
    if (problem.demand == 1).all():
        cands["heft"] = heft.run(graph, ctx)
        cands["peft"] = peft.run(graph, ctx)

    if int(ctx.option("learned", 1)) and 0 < n <= int(ctx.option("learned_max_ops", 3000)):
        from onnx_sched.errors import OnnxSchedError
        from onnx_sched.passes.makespan import learned

        try:
            model = ctx.option("model", None)
            left = ctx.time_limit - (work_clock() - t0)
            sub = replace(ctx, time_limit=max(ENCODER_SHARE * left, 1e-3),
                          options={"samples": 64, **({"model": model} if model else {})})
            cands["learned"] = learned.run(graph, sub)
        except OnnxSchedError:  # no checkpoint in this install, or its encoder stopped at its share of the time
            pass

    def best() -> Schedule:
        return min(cands.values(), key=lambda s: s.info["makespan"])

    left = ctx.time_limit - (work_clock() - t0)
    bound = None
    at_bound = bool(n) and best().info["makespan"] <= ms.lower_bound(problem) * (1 + 1e-9)  # nothing can be faster
    if left > 0.2 and n and not at_bound:
        if n <= int(ctx.option("cpsat_max_ops", 300)):
            sched, info = cpsat.solve(problem, best(), left, int(ctx.option("workers", 2)), None, ctx.seed)
            if info["exact"] and info["cp_bound"] is not None:
                bound = float(info["cp_bound"])
            if sched is not None:
                cands["cpsat"] = sched
        else:
            seeds = np.stack([-s.start for s in sorted(cands.values(), key=lambda s: s.info["makespan"])[:4]])
            x, _, gens = ga.search(problem, left, ctx.seed, extra=seeds)
            cands["ga"] = ms.list_schedule(problem, x, "ga", generations=gens)
    chosen = best()
    summary = {k: float(s.info["makespan"]) for k, s in cands.items()}
    optimal = at_bound or chosen.optimal or any(s.optimal for s in cands.values()
                                                if s.info["makespan"] <= chosen.info["makespan"])
    return ms.make_schedule(problem, chosen.start, chosen.placement, f"auto:{chosen.method}", optimal=optimal,
                            bound=bound, candidates=summary, seconds=work_clock() - t0)
