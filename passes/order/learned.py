"""``learned``: Topoformer priorities decoded into an order (paper 000, section 4).

The trained encoder runs through ONNX Runtime (no torch): graph -> node features
and relation masks -> one priority per op -> an order by one of three decoders
(:mod:`onnx_sched.models.inference.decoders`):

* default: greedy (highest-priority ready op first);
* ``samples=K``: ``K`` orders sampled from the policy (eq. 8) plus the greedy
  order; the lowest peak wins;
* ``beam=K``: beam search of width ``K`` with state collapsing.

The policy is eq. 8 over ``priorities / T``, or, for a checkpoint trained with
``mem_beta > 0``, the memory-aware policy of :mod:`onnx_sched.models.inference.mem_aware`
(``priorities / T - beta * live-memory change / s`` at every step); all three
decoders decode that one policy.

The decoded orders then go through the min-cut repair (:mod:`onnx_sched.passes.order._repair`;
option ``repair=0`` skips it), which lowers a peak where an op's output waits across a later peak:
with ``--samples K`` every one of the K + 1 orders is repaired and the lowest repaired peak wins;
``info["policy_peak_bytes"]`` is the policy's own best peak, before repair.

Options: ``samples``, ``beam`` (at most one of them), ``model`` (path of an ONNX
export; default the shipped ``models/checkpoints/topoformer_peakmem.onnx``), ``sample_mode``
(``race`` = exact eq. 8 samples, ``gumbel`` = paper 001's one-shot perturbation;
eq. 8 only), ``temperature`` (default: the checkpoint's
``onnx_sched.sample_temperature`` metadata, chosen on validation graphs by
``benchmarks/learned_temperature.py``, else 1), ``mem_beta`` (default: the
checkpoint's ``onnx_sched.mem_beta``, else 0 = eq. 8), ``encoder_seconds`` (how long the encoder may run,
default the time limit; ``auto`` gives it half of the time it has left while the repairs keep to their share).
An encoder that would end past that (quadratic in ops: 5-8 s at 8,400 ops on this 2-core machine) is stopped
there with :class:`~onnx_sched.errors.TimeLimitError`.
A missing checkpoint raises :class:`~onnx_sched.models.inference.topoformer_onnx.CheckpointMissingError`
(an :class:`~onnx_sched.errors.OnnxSchedError`), which the CLI prints as one line.
"""

from __future__ import annotations

import time

import numpy as np

from onnx_sched.deadline import Deadline, positive_seconds
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock
from onnx_sched.models.inference.decoders import beam_search, best_of, decode_graph, greedy, sample_orders
from onnx_sched.models.inference.mem_aware import mem_aware_orders
from onnx_sched.models.inference.topoformer_onnx import DEFAULT_CHECKPOINT, PriorityModel
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.order._common import make_schedule, peak_of
from onnx_sched.passes.order._repair import repair
from onnx_sched.schedule import Schedule

__all__ = ["run"]


def _best_repaired(graph: Graph, cands: np.ndarray, inplace: bool, deadline: float) -> np.ndarray:
    """The lowest peak among the candidates after each is repaired (the lowest raw peak is not always
    the lowest repaired one: on fresh ba-400 graphs 229.5 -> 204.0 MiB by repairing all 17)."""
    best, best_peak = None, None
    for cand in cands:
        fixed = repair(graph, cand, inplace, deadline=deadline)
        peak = peak_of(graph, fixed, inplace)
        if best_peak is None or peak < best_peak:
            best, best_peak = fixed, peak
    return best


@register("learned", objective="peak-mem")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    samples = ctx.option("samples", 0)
    beam = ctx.option("beam_width", None) or ctx.option("beam", 0)  # --beam; "beam" as API callers used to say
    if samples and beam:
        raise ValueError("learned: choose either samples or beam, not both")
    if int(samples) < 0 or int(beam) < 0:
        raise ValueError(f"learned: samples and beam must be >= 0, got samples={samples}, beam={beam}")
    model = PriorityModel.load(ctx.option("model", DEFAULT_CHECKPOINT))
    encoder_clock = Deadline(positive_seconds(ctx.option("encoder_seconds", ctx.time_limit), "encoder_seconds"))
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    if graph.n_ops == 0:
        return make_schedule(graph, [], "learned", ctx.inplace, decoder="greedy")
    y = model.priorities(graph, timings, encoder_clock)
    temperature = float(ctx.option("temperature", model.sample_temperature))
    beta = float(ctx.option("mem_beta", model.mem_beta))
    if not temperature > 0 or not beta >= 0:
        raise ValueError(f"learned: need temperature > 0 and mem_beta >= 0, got {temperature} and {beta}")
    logits = y / temperature
    t1 = time.perf_counter()
    dg = decode_graph(graph, ctx.inplace)
    order = mem_aware_orders(dg, logits, beta)[0] if beta > 0 else greedy(dg, y)
    decoder = "greedy"
    cands = order[None, :]
    if samples:
        if beta > 0:
            drawn = mem_aware_orders(dg, logits, beta, int(samples), seed=int(ctx.rng().integers(2**31)))
        else:
            drawn = sample_orders(dg, logits, int(samples), ctx.rng(), mode=str(ctx.option("sample_mode", "race")))
        cands = np.vstack([cands, drawn])
        order, _ = best_of(dg, cands)
        decoder = f"sample-{int(samples)}"
    elif beam:
        order, _ = beam_search(dg, logits, int(beam), seed=ctx.seed, mem_beta=beta)
        cands = order[None, :]
        decoder = f"beam-{int(beam)}"
    if temperature != 1.0 or beta > 0:
        decoder += f" (T={temperature:g}" + (f", mem_beta={beta:g})" if beta > 0 else ")")
    policy_peak = peak_of(graph, order, ctx.inplace)
    if int(ctx.option("repair", 1)):
        deadline = work_clock() + max(float(ctx.time_limit) - (time.perf_counter() - t0), 0.0)
        order = _best_repaired(graph, cands, ctx.inplace, deadline)
    t2 = time.perf_counter()
    return make_schedule(
        graph, order, "learned", ctx.inplace,
        decoder=decoder, model=model.path, policy_peak_bytes=policy_peak,
        features_s=round(timings.get("features_s", 0.0), 4), encoder_s=round(timings.get("encoder_s", 0.0), 4),
        decode_s=round(t2 - t1, 4), seconds=round(t2 - t0, 4),
    )
