"""``regal``: BRKGA with per-op distributions predicted by a trained graph network (paper 003, REGAL).

The network (``models/checkpoints/regal.onnx``, ONNX Runtime, no torch) reads the op
graph with node features from a short uniform BRKGA run (the checkpoint's ``feature_evaluations``: 100, one
population; paper 003: 400) and predicts, per op,
Beta distributions for its affinity, priority and transfer genes and an elite bias
(:mod:`onnx_sched.models.inference.regal`); BRKGA then spends the rest of the budget
with them.  Option ``evaluations`` (default 5,000) is the whole budget, feature run
included; ``sample`` (default false) draws the action from the policy instead of taking
its mode; ``pin`` (default: as the checkpoint was trained, its ONNX metadata ``pin``; true in
the paper and for checkpoints without it) holds the op with the most memory on device 0
(symmetry breaking; ``pin=false`` lets BRKGA move it, which matters because the host is not
interchangeable with the other devices); ``model`` (default the shipped
checkpoint for the device count: ``models/checkpoints/regal.onnx`` for 2 devices, ``regal_d3.onnx`` for 3)
is the policy file; ``prior`` (default false) takes the
hand-written feature prior's action instead of the network's (the ablation without learning,
:func:`onnx_sched.models.inference.regal.feature_prior`; ``model`` and ``sample`` are then unused, and
any device count works); ``tidy`` (default 10,000) the evaluations spent afterwards on moving fewer bytes between
devices at the same peak (:func:`~onnx_sched.passes.device_memory.local_search.tidy_transfers`; not in the
paper, 0 turns it off).  The first population holds the
host-only solution, so the result is never worse than it.  Fails with one line when the
checkpoint is missing or was trained for another device count.
"""

from __future__ import annotations

from onnx_sched.deadline import Deadline
from onnx_sched.graph import Graph
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory._common import problem_of, schedule_of_keys
from onnx_sched.passes.device_memory.local_search import tidy_transfers
from onnx_sched.schedule import Schedule


@register("regal", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    from onnx_sched.models.inference.regal import load_policy, run_regal

    problem = problem_of(graph, ctx)
    pin = None if ctx.option("pin", None) is None else ctx.flag("pin", True)  # None: as the checkpoint was trained
    policy = None if ctx.flag("prior", False) else load_policy(ctx.option("model", None), problem.n_devices)
    clock = Deadline(ctx.time_limit)
    result = run_regal(problem, policy, int(ctx.option("evaluations", 5000)),
                       seed=ctx.seed, sample=ctx.flag("sample", False), deadline=clock, pin=pin)
    keys, tidied = tidy_transfers(problem, result.best_keys, ctx, clock)
    return schedule_of_keys(problem, keys, "regal", tidy_evaluations=tidied, **result.info)
