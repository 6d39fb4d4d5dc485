"""``learned`` for makespan: one-shot neural priority sampling (paper 001 section 3).

The trained Topoformer (run by ONNX Runtime through
:class:`~onnx_sched.models.inference.topoformer_onnx.PriorityModel`; no torch) maps the
problem's features (:mod:`onnx_sched.models.inference.makespan_features`) to one logit
per op in a single forward pass (plus the critical-path logits when the model
was trained with ``prior="cp"``, recorded in its metadata).  Greedy mode list-schedules by the logits;
``samples=K`` adds ``K`` Gumbel-perturbed priority vectors (eq. 7, Gumbel-top-k)
and keeps the shortest schedule, the paper's ``S(K)`` mode.

Not the paper's pass as is: the list-cp schedule (critical-path priorities, no
network) is also a candidate, so the pass never loses to list-cp, and a result of
``learned`` can be list-cp's own schedule (``info["chosen"] == "list-cp"``).  So that
the network's own result is visible, ``info`` always reports ``learned_makespan``
(the best of greedy and the samples, without list-cp) beside ``list_cp_makespan``;
option ``list_cp=0`` drops the candidate (``--option list_cp=0``).

With ``candidates`` (``--candidates K``) it is paper 002's "one-shot priority
sampler" candidate generator instead: greedy + ``K - 1`` samples, each list
scheduled, filtered by the proxy and chosen on ``--target``
(:mod:`._candidates`).

Options: ``samples`` (default 256), ``list_cp`` (default 1: list-cp is a candidate),
``model`` (ONNX path; default the shipped ``models/checkpoints/sampler_makespan.onnx``).  The model was trained on machine-type
problems with capacities (1, 1, 4); on device problems it still gives a valid
schedule (the serial earliest-finish list scheduler decodes the priorities),
but it was not trained for them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains
from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.models.inference.features import check_encoder_memory
from onnx_sched.models.inference.makespan_features import makespan_encoder_inputs, prior_logits
from onnx_sched.models.inference.timed_run import run_by
from onnx_sched.models.inference.topoformer_onnx import PriorityModel
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._candidates import chains_from_priorities, select
from onnx_sched.passes.makespan._priorities import cp_priority, gumbel_priorities
from onnx_sched.schedule import Schedule

__all__ = ["candidates", "default_model", "logits", "run"]


def default_model() -> Path:
    """The shipped checkpoint: ``sampler_makespan.onnx`` in :data:`onnx_sched.models.CHECKPOINTS`."""
    from onnx_sched.models import CHECKPOINTS

    return CHECKPOINTS / "sampler_makespan.onnx"


def logits(problem: ms.MakespanProblem, model: PriorityModel, deadline: Deadline | None = None) -> np.ndarray:
    """``(n,)`` float64 logits of ``model`` for ``problem`` (higher = earlier); the encoder is stopped at
    ``deadline`` (:class:`~onnx_sched.errors.TimeLimitError`)."""
    if model.metadata.get("onnx_sched.objective") != "makespan":
        raise ValueError(f"{model.path!r} is not a makespan sampler (metadata onnx_sched.objective != 'makespan')")
    check_encoder_memory(problem.n_ops, "learned")
    pe_dim = int(model.config.get("pe_dim", 20))
    inp = makespan_encoder_inputs(problem, pe_dim, relations="rel" in model.input_names)
    feeds = {"x": inp.x}
    if "rel" in model.input_names:
        feeds["rel"] = inp.rel
    (y,) = run_by(model.session, ["priority"], feeds, deadline, "learned", problem.n_ops)
    y = np.asarray(y, np.float64).reshape(-1)
    if len(y) != problem.n_ops or not np.isfinite(y).all():
        raise ValueError(f"model {model.path!r} returned {len(y)} logits for {problem.n_ops} ops (or non-finite)")
    return y + prior_logits(problem, model.metadata.get("onnx_sched.prior", "none"))


def candidates(problem: ms.MakespanProblem, ctx: PassContext, y: np.ndarray | None = None) -> Chains:
    """Greedy + ``candidates - 1`` Gumbel samples of the logits ``y`` (the shipped model's by default),
    each list scheduled, as chain schedules."""
    if y is None:
        y = logits(problem, PriorityModel.load(ctx.option("model", default_model())))
    count = int(ctx.option("candidates", 1000))
    pr = np.vstack([y[None, :], gumbel_priorities(y, ctx.rng(), max(count - 1, 0))])
    return chains_from_priorities(problem, pr)


@register("learned", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    """Greedy + ``samples`` Gumbel-top-k samples of the learned logits; best of them and (unless
    ``list_cp=0``) the list-cp schedule."""
    deadline = Deadline(ctx.time_limit)
    measuring = ctx.measure_by(deadline)  # the candidates' runs on a measured target
    problem = ms.problem_of(graph, ctx)
    samples = int(ctx.option("samples", 256))
    if samples < 0:
        raise ValueError(f"learned: samples must be >= 0, got {samples}")
    with_cp = bool(int(ctx.option("list_cp", 1)))
    t0 = time.perf_counter()
    model = PriorityModel.load(ctx.option("model", default_model()))
    y = logits(problem, model, deadline)
    t1 = time.perf_counter()
    cands = [y[None, :], cp_priority(problem)[None, :]]
    if samples:
        cands.append(gumbel_priorities(y, ctx.rng(), samples))
    pr = np.vstack(cands)
    if ctx.options.get("candidates") is not None:  # paper 002's pipeline: samples filtered by the proxy, chosen on the target
        return select(problem, candidates(problem, ctx, y), ctx, "learned", deadline=measuring, model=model.path,
                      seconds=round(time.perf_counter() - t0, 4))
    spans = ms.list_makespans(problem, pr)
    learned_only = np.array(spans, dtype=np.float64)
    learned_only[1] = np.inf  # row 1 is list-cp
    i = int(np.argmin(spans if with_cp else learned_only))
    source = "greedy" if i == 0 else ("list-cp" if i == 1 else "sample")
    return ms.list_schedule(problem, pr[i], "learned", decoder=f"S({samples})" if samples else "greedy",
                            chosen=source, greedy_makespan=float(spans[0]), learned_makespan=float(learned_only.min()),
                            list_cp_makespan=float(spans[1]), list_cp_candidate=with_cp, encoder_s=round(t1 - t0, 4),
                            seconds=round(time.perf_counter() - t0, 4), model=model.path)
