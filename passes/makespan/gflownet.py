"""``gflownet``: diverse candidate schedules from the conditional GFlowNet, chosen on the target (paper 002).

The shipped policy (``models/checkpoints/gflownet_makespan.onnx`` + ``_head.onnx``,
run by ONNX Runtime; no torch) samples ``candidates`` schedules at temperature
``temperature`` (default 0.005, the paper's inference value), one valid
(op, lane) action at a time (:mod:`onnx_sched.models.inference.gflownet`); the
proxy keeps the ``top_k`` and the target chooses (:mod:`._candidates`).  Sampling
fits the time limit: the encoder is stopped at the limit (``info["encoder"]`` says so)
and batches shrink to what ends in time (``info["candidates_generated"]`` says how many
were); when not one schedule fits, the result is the better of :mod:`._candidates`'
references (no split, list-cp).
Options: ``candidates``, ``top_k``, ``target``, ``temperature``, ``model`` (ONNX path; the PPO
baseline's export, ``onnx-sched train ppo-scheduler``, samples at the temperature it was trained at),
``actions``: ``all`` (paper 002: any ready op on any lane that can run it), ``local`` or ``list`` (a ready op
only on a lane of one of its predecessors or on the lane that frees first / would finish it first), ``finish``
(only the op is chosen; it runs on the lane that would finish it first, among equals the one holding most of its
inputs); not in the paper, their candidates cross devices less: docs/results.md 16.3c-d, 16.3f; default: the set
the checkpoint was trained with (``onnx-sched train gflownet --actions``): ``all`` for the default checkpoint,
``local`` / ``list`` / ``finish`` for ``gflownet_makespan_{local,list,finish}.onnx``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains
from onnx_sched.deadline import Deadline
from onnx_sched.errors import TimeLimitError
from onnx_sched.graph import Graph
from onnx_sched.models.inference.gflownet import GFlowNetModel, sample_trajectories
from onnx_sched.models.inference.gflownet_env import check_actions
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.makespan._candidates import CandidateOptions, select
from onnx_sched.schedule import Schedule

__all__ = ["candidates", "run"]


def candidates(problem: ms.MakespanProblem, ctx: PassContext,
               deadline: Deadline | None = None) -> tuple[Chains, dict[str, object]]:
    """``candidates`` schedules sampled at ``temperature`` (fewer if ``deadline``, the pass's, else the time limit
    from now, ends sampling)."""
    opts = CandidateOptions.of(ctx)
    t0 = time.perf_counter()
    model = GFlowNetModel.load(ctx.option("model", None))
    temperature = opts.temperature
    if ctx.options.get("temperature") is None and model.trained_sigma is not None:
        temperature = model.trained_sigma  # a fixed-temperature policy (PPO) samples at its own temperature
    actions = check_actions(str(ctx.option("actions", model.actions)))  # before the encoder runs
    deadline = deadline or Deadline(ctx.time_limit)
    info = {"temperature": temperature, "model": model.path, "actions": actions, "candidates_asked": opts.count}
    try:
        step = model.step_fn(problem, math.log(temperature), deadline)
    except TimeLimitError as exc:  # no trajectory can start: select() falls back to its references
        empty = np.zeros((0, problem.n_ops), np.int64)
        return Chains(empty, empty), {**info, "sample_s": round(time.perf_counter() - t0, 4), "encoder": str(exc)}
    rollouts = sample_trajectories(problem, step, opts.count, batch=min(100, opts.count), seed=ctx.seed,
                                   deadline=deadline, actions=actions)
    return rollouts.chains, {**info, "sample_s": round(time.perf_counter() - t0, 4)}


@register("gflownet", objective="makespan")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    deadline = Deadline(ctx.time_limit)  # generating; then (measured target) timing, in the time held back for it
    measuring = ctx.measure_by(deadline)
    problem = ms.problem_of(graph, ctx)
    chains, info = candidates(problem, ctx, deadline)
    return select(problem, chains, ctx, "gflownet", deadline=measuring, **info)
