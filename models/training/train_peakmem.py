"""REINFORCE training of the Topoformer priority policy for peak memory (paper 000 4.3, C.1, C.4;
paper 001 section 3) -- torch, only with the ``[train]`` extra.

One step, per training graph (a layered graph of paper 000 appendix A, or of the synthetic families
``families`` names, taken in turn: the mixture of issue 17):

1. encoder -> priorities ``y``; ``samples`` orders drawn exactly from eq. 8
   (exponential race, :func:`onnx_sched.models.inference.decoders.sample_orders`); their
   peaks from the numba memory kernel;
2. advantage, by ``baseline``:

   * ``"rollout"`` (paper 000, eq. 10 + C.4): ``(C - b) / b`` with ``b`` the peak
     of the greedy decoding of a frozen *baseline policy*, which is replaced by
     the trained policy at the end of an epoch when its mean greedy peak on the
     validation graphs is lower.  (Dividing by ``b`` makes graphs of different
     memory scale weigh alike; the paper uses ``C - b``.)
   * ``"standardize"`` (paper 001, eq. 13): ``(C - mean) / max(std, eps)`` over
     the samples of the graph, costs first divided by their mean so ``eps`` is
     relative (paper 001's ``eps = 0.1`` is in makespan units);

3. loss ``mean(adv * log p(order))`` (eq. 9) ``+ logit_reg * mean(y^2)`` (paper
   001, eq. 12; ``prio_norm="standardize"`` uses paper 000's eq. 17 instead).

``objective="imitation"`` replaces steps 1-3 by the negative eq. 8 log-likelihood (per op) of the
order approximate DP finds for the graph (:mod:`onnx_sched.models.training.expert_orders`, cached), cycling
through ``expert_graphs`` demonstrations.  On this CPU it moves a REINFORCE policy out of its
depth-first habit in minutes; REINFORCE then refines it (recipe in ``models/checkpoints/topoformer_peakmem.md``).
``temperature`` divides the encoder output before eq. 8 (the export records it), and ``mem_beta > 0``
trains the memory-aware decoder of :mod:`onnx_sched.models.inference.mem_aware` instead of eq. 8.
``ema_decay > 0`` validates and keeps an exponential moving average of the weights rather than the
latest ones, to smooth the noise of REINFORCE steps (stage 4 of the shipped checkpoint uses it with
small steps; see the model card).  A run started with ``init_from`` validates the starting weights first
(epoch 0), so it never exports weights worse than those.

``log p`` of eq. 8 is computed exactly: op ``v`` is in the ready set of step ``t``
iff ``ready[v] <= t <= pos[v]`` (:func:`~onnx_sched.models.inference.decoders.ready_steps`),
so all step-wise log-sum-exps of a batch of samples are one masked tensor op.

Seeds: training graphs use seeds ``0 .. 8999``, validation graphs ``9000 ..
9999`` (the layered family reserves ``10000+`` for test sets).  Everything is
seeded (``TrainConfig.seed``); the orders sampled on training graph ``k`` (the ``k``-th of the
run) come from the generator ``[seed, k, 1]``, so a run does not depend on how many processes
share it.  Under ``torchrun --nproc_per_node N`` (:mod:`onnx_sched.models.training.distributed`)
each rank takes every N-th graph of an update, gradients are summed over the ranks (each graph's
loss divided by the update's ``batch_graphs``), and rank 0 validates, logs and checkpoints.
A checkpoint (models, optimizer, RNG states, log) is written after every epoch and every
``checkpoint_every_s`` seconds inside one; ``resume=True`` continues from it (on every rank).
``log.jsonl`` has one line per epoch with the validation gap.

Scaled down for a 2-core CPU (paper: d=256, 4 layers, 10 heads per graph,
500-op graphs, 326 epochs x 1000 graphs on a V100): see :class:`TrainConfig`.
Writing the shipped ONNX + ``.pt`` files from a checkpoint is
:mod:`onnx_sched.models.training.peakmem_export`.

This module is long because it is one training loop: its config, steps, validation and
resumable checkpoints share ``TrainConfig`` and the prepared graphs, and read best together.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from onnx_sched.graph import Graph
from onnx_sched.models.inference.decoders import DecodeGraph, decode_graph, greedy, peaks, ready_steps, sample_orders
from onnx_sched.models.inference.features import DEFAULT_FEATURES, PE_DIM, encoder_inputs, n_features
from onnx_sched.models.inference.mem_aware import mem_aware_offsets, mem_aware_orders
from onnx_sched.models.training import distributed
from onnx_sched.models.training.checkpoint_io import load_checkpoint
from onnx_sched.models.training.expert_orders import ExpertSpec, build_experts, load_expert
from onnx_sched.models.training.topoformer import EncoderConfig, Topoformer

__all__ = [
    "VARIANTS", "Prepared", "TrainConfig", "imitation_specs", "imitation_step", "policy_orders", "prepare",
    "seq_log_prob", "train", "train_step",
]

TRAIN_SEEDS = (0, 9000)
VAL_SEEDS = (9000, 10000)

# paper 000: greedy-rollout baseline + standardised logits (alpha = 5);
# paper 001: per-graph cost standardisation + logit-norm regularisation, raw logits.
VARIANTS: dict[str, dict[str, Any]] = {
    "paper000": {"baseline": "rollout", "prio_norm": "standardize", "logit_reg": 0.0},
    "paper001": {"baseline": "standardize", "prio_norm": "none", "logit_reg": 1e-3},
    "rollout+lognorm": {"baseline": "rollout", "prio_norm": "none", "logit_reg": 1e-3},
}


@dataclass(frozen=True)
class TrainConfig:
    """Training hyper-parameters (defaults: the CPU-sized setting used for the shipped model)."""

    out_dir: str = "runs/peakmem"
    encoder: str = "topoformer"
    variant: str = "paper001"
    baseline: str = "standardize"
    prio_norm: str = "none"
    logit_reg: float = 1e-3
    std_eps: float = 1e-3
    d_model: int = 64
    n_layers: int = 3
    heads_per_group: int = 1
    head_dim: int = 16
    ffn_dim: int = 128
    min_ops: int = 100
    max_ops: int = 300
    ramp_epochs: int = 4  # curriculum: the largest size grows from min_ops to max_ops over these epochs
    epochs: int = 30
    steps_per_epoch: int = 40
    batch_graphs: int = 4
    samples: int = 16
    lr: float = 1e-3
    lr_decay: float = 0.97  # per epoch (paper: 1e-4, 0.996 over 326 epochs)
    grad_clip: float = 1.0
    val_graphs: int = 16
    val_ops: int = 300
    reference_beam: int = 64  # validation reference: registry pass "beam" with this width
    val_samples: int = 0  # > 0: validate (and keep the best weights) by best-of greedy + this many samples
    val_temperature: float = 1.0  # ... drawn from logits / val_temperature (the learned pass's sample-K decoder)
    seed: int = 0
    threads: int = 1
    time_budget_s: float = 0.0  # stop (after checkpointing) once this much wall time is used; 0 = no limit
    checkpoint_every_s: float = 120.0
    snapshot_epochs: tuple[int, ...] = (10,)  # also keep the best-so-far weights at these epochs (ablations)
    temperature: float = 1.0  # the policy's logits are encoder output / temperature (stored with the export)
    mem_beta: float = 0.0  # > 0: train (and export) the memory-aware decoder with this beta (models/inference/mem_aware.py)
    ema_decay: float = 0.0  # > 0: validate and keep an exponential moving average of the weights (per update)
    init_from: str = ""  # start a new run from the weights of an exported .pt (fresh optimizer and lr schedule)
    objective: str = "reinforce"  # or "imitation": maximise the eq. 8 likelihood of approximate-DP orders
    expert_width: int = 10000  # imitation: beam width of the demonstrations
    expert_graphs: int = 2400  # imitation: number of demonstration graphs (cycled through, epoch after epoch)
    expert_dir: str = "runs/experts"  # imitation: demonstration cache, shared between runs
    expert_workers: int = 1  # imitation: processes building missing demonstrations before training
    families: tuple[str, ...] = ("layered",)  # training mixture: graph k of the run is of family k mod len
    val_families: tuple[str, ...] = ("layered",)  # validation graphs, split evenly over these families

    @staticmethod
    def for_variant(variant: str, **overrides: Any) -> TrainConfig:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(VARIANTS)}")
        return TrainConfig(variant=variant, **{**VARIANTS[variant], **overrides})

    def encoder_config(self) -> EncoderConfig:
        return EncoderConfig(
            in_dim=n_features(DEFAULT_FEATURES, PE_DIM), encoder=self.encoder, d_model=self.d_model,
            n_layers=self.n_layers, heads_per_group=self.heads_per_group, head_dim=self.head_dim,
            ffn_dim=self.ffn_dim, prio_norm=self.prio_norm,
        )


@dataclass(frozen=True, eq=False)
class Prepared:
    """A graph with everything a step needs: encoder inputs (torch) and decoding arrays."""

    graph: Graph
    x: torch.Tensor
    rel: torch.Tensor
    dg: DecodeGraph


def prepare(g: Graph) -> Prepared:
    inp = encoder_inputs(g)
    return Prepared(g, torch.from_numpy(inp.x), torch.from_numpy(inp.rel), decode_graph(g))


def imitation_specs(cfg: TrainConfig) -> list[ExpertSpec]:
    """The demonstrations of an imitation run: training seeds ``0 ..``, sizes uniform in ``[min_ops, max_ops]``,
    families taken in turn from ``cfg.families``."""
    return [
        ExpertSpec(int(np.random.default_rng([cfg.seed, k]).integers(cfg.min_ops, cfg.max_ops + 1)), TRAIN_SEEDS[0] + k,
                   cfg.expert_width, cfg.families[k % len(cfg.families)])
        for k in range(cfg.expert_graphs)
    ]


def _graph(family: str, n: int, seed: int) -> Graph:
    from onnx_sched.synth import generate

    return generate(family, n, seed)


def seq_log_prob(y: torch.Tensor, orders: np.ndarray, dg: DecodeGraph, mem_beta: float = 0.0) -> torch.Tensor:
    """``(k,)`` exact log-probabilities of ``orders`` ``(k, n)`` under logits ``y`` ``(n,)``: eq. 8, or with
    ``mem_beta > 0`` the memory-aware policy of :mod:`onnx_sched.models.inference.mem_aware`."""
    n = y.shape[0]
    orders = np.ascontiguousarray(np.atleast_2d(orders), dtype=np.int64)
    idx = torch.from_numpy(orders)
    if mem_beta > 0:
        off_np, mask_np = mem_aware_offsets(dg, orders, mem_beta)
        off, mask = torch.from_numpy(off_np), torch.from_numpy(mask_np)
        logits = y.view(1, 1, n) + off  # (k, step, node)
        chosen = y[idx].sum(-1) + off.gather(2, idx.unsqueeze(2)).sum((1, 2))
    else:
        ready, pos = ready_steps(dg, orders)
        t = torch.arange(n).view(1, n, 1)
        mask = (torch.from_numpy(ready).unsqueeze(1) <= t) & (t <= torch.from_numpy(pos).unsqueeze(1))
        logits = y.view(1, 1, n)
        chosen = y[idx].sum(-1)
    z = torch.where(mask, logits, torch.full((), -math.inf))
    return chosen - torch.logsumexp(z, dim=-1).sum(-1)


def policy_orders(cfg: TrainConfig, dg: DecodeGraph, logits: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` orders sampled from the training policy (``k=0``: its greedy order, one row)."""
    if cfg.mem_beta > 0:
        return mem_aware_orders(dg, logits, cfg.mem_beta, k, seed=int(rng.integers(2**31)) if k else 0)
    return sample_orders(dg, logits, k, rng) if k else greedy(dg, logits)[None]


def _advantage(cfg: TrainConfig, costs: np.ndarray, base_cost: float | None) -> np.ndarray:
    c = costs.astype(np.float64)
    if cfg.baseline == "rollout":
        assert base_cost is not None
        return (c - base_cost) / max(base_cost, 1.0)
    if cfg.baseline == "standardize":
        c = c / max(c.mean(), 1.0)
        return (c - c.mean()) / max(c.std(), cfg.std_eps)
    raise ValueError(f"unknown baseline {cfg.baseline!r}; expected 'rollout' or 'standardize'")


def _policy_logits(cfg: TrainConfig, model: Topoformer, prep: Prepared) -> np.ndarray:
    with torch.no_grad():
        return model(prep.x, prep.rel).numpy() / cfg.temperature


def _greedy_peak_of(cfg: TrainConfig, prep: Prepared, logits: np.ndarray) -> int:
    return int(peaks(prep.dg, policy_orders(cfg, prep.dg, logits, 0, np.random.default_rng(0)))[0])


def greedy_peak(cfg: TrainConfig, model: Topoformer, prep: Prepared) -> int:
    """Peak of the greedy decoding of ``model``'s policy on ``prep``."""
    return _greedy_peak_of(cfg, prep, _policy_logits(cfg, model, prep))


def _backward(cfg: TrainConfig, loss: torch.Tensor, y: torch.Tensor, batch_len: int) -> tuple[float, float]:
    """Add the logit-norm penalty (paper 001, eq. 12) to one graph's ``loss`` and back-propagate its share of
    the batch; returns (loss with penalty, penalty)."""
    reg = cfg.logit_reg * (y**2).mean() if cfg.logit_reg > 0 else None
    if reg is not None:
        loss = loss + reg
    (loss / batch_len).backward()
    return float(loss.detach()), 0.0 if reg is None else float(reg.detach())


def _update(cfg: TrainConfig, model: Topoformer, opt: torch.optim.Optimizer) -> None:
    """Sum the accumulated gradient over the ranks, clip it and take the optimizer step."""
    distributed.sum_gradients(model.parameters())
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()


def train_step(
    cfg: TrainConfig,
    model: Topoformer,
    baseline_model: Topoformer | None,
    opt: torch.optim.Optimizer,
    batch: list[Prepared],
    rng: np.random.Generator | list[np.random.Generator],
    batch_len: int = 0,
) -> dict[str, float]:
    """One REINFORCE update on ``batch`` (this rank's share of ``batch_len`` graphs, default all);
    ``rng`` is one generator or one per graph.  Returns loss and cost statistics over all ranks."""
    model.train()
    opt.zero_grad()
    batch_len = batch_len or len(batch)
    total, ratio_total, reg_total = 0.0, 0.0, 0.0
    for i, prep in enumerate(batch):
        y = model(prep.x, prep.rel)
        logits = y / cfg.temperature
        orders = policy_orders(cfg, prep.dg, logits.detach().numpy(), cfg.samples, rng[i] if isinstance(rng, list) else rng)
        costs = peaks(prep.dg, orders)
        base = greedy_peak(cfg, baseline_model, prep) if cfg.baseline == "rollout" else None
        adv = torch.from_numpy(_advantage(cfg, costs, base)).float()
        logp = seq_log_prob(logits, orders, prep.dg, cfg.mem_beta)
        loss_value, reg_value = _backward(cfg, (adv * logp).mean(), y, batch_len)
        total += loss_value
        reg_total += reg_value
        ratio_total += float(costs.min() / costs.mean())
    _update(cfg, model, opt)
    total, ratio_total, reg_total = distributed.sum_values([total, ratio_total, reg_total])
    return {"loss": total / batch_len, "best_over_mean": ratio_total / batch_len, "logit_reg": reg_total / batch_len}


def imitation_step(cfg: TrainConfig, model: Topoformer, opt: torch.optim.Optimizer, batch: list[tuple[Prepared, np.ndarray]],
                   batch_len: int = 0) -> dict[str, float]:
    """One update maximising the eq. 8 log-likelihood of the demonstration orders of ``batch`` (this rank's
    share of ``batch_len``; per op, so graphs of different size weigh alike), plus the logit-norm penalty."""
    model.train()
    opt.zero_grad()
    batch_len = batch_len or len(batch)
    total, nll_total, reg_total = 0.0, 0.0, 0.0
    for prep, order in batch:
        y = model(prep.x, prep.rel)
        nll = -seq_log_prob(y / cfg.temperature, order[None], prep.dg, cfg.mem_beta)[0] / prep.dg.n
        loss_value, reg_value = _backward(cfg, nll, y, batch_len)
        total += loss_value
        reg_total += reg_value
        nll_total += float(nll.detach())
    _update(cfg, model, opt)
    total, nll_total, reg_total = distributed.sum_values([total, nll_total, reg_total])
    # best_over_mean has no meaning here; report the per-op likelihood of the demonstrations instead
    return {"loss": total / batch_len, "best_over_mean": math.exp(-nll_total / batch_len), "logit_reg": reg_total / batch_len}


def _training_batch(cfg: TrainConfig, step: int, hi: int, specs: list[ExpertSpec]) -> list[Prepared] | list[tuple[Prepared, np.ndarray]]:
    """This rank's graphs of update ``step``: fresh layered graphs (REINFORCE) or demonstrations, cycled (imitation)."""
    batch = []
    for k in _graph_indices(cfg, step):
        if cfg.objective == "imitation":
            spec = specs[k % len(specs)]
            batch.append((prepare(spec.graph()), load_expert(spec, cfg.expert_dir)))
        else:
            seed = TRAIN_SEEDS[0] + k % (TRAIN_SEEDS[1] - TRAIN_SEEDS[0])
            n = int(np.random.default_rng([cfg.seed, k]).integers(cfg.min_ops, hi + 1))
            batch.append(prepare(_graph(cfg.families[k % len(cfg.families)], n, seed)))
    return batch


def _graph_indices(cfg: TrainConfig, step: int) -> list[int]:
    """Indices (in the whole run) of this rank's graphs of update ``step``."""
    return distributed.shard(range(step * cfg.batch_graphs, (step + 1) * cfg.batch_graphs))


# -------------------------------------------------------------- validation
def validation_set(cfg: TrainConfig) -> list[Prepared]:
    fams = cfg.val_families
    return [prepare(_graph(fams[i % len(fams)], cfg.val_ops, VAL_SEEDS[0] + i)) for i in range(cfg.val_graphs)]


def validation_reference(cfg: TrainConfig, val: list[Prepared], out_dir: Path) -> list[int]:
    """Peaks of the registry pass ``beam`` (width ``reference_beam``) on the validation graphs, cached."""
    mix = "" if cfg.val_families == ("layered",) else "_" + "+".join(cfg.val_families)
    path = out_dir / f"val_reference{mix}_n{cfg.val_ops}_k{cfg.val_graphs}_beam{cfg.reference_beam}.json"
    if path.is_file():
        return json.loads(path.read_text())["peaks"]
    from onnx_sched.passes import PassContext, get_pass

    run = get_pass("beam", "peak-mem")
    ctx = PassContext(time_limit=600.0, options={"beam_width": cfg.reference_beam})
    ref = [int(run(p.graph, ctx).info["peak_bytes"]) for p in val]
    path.write_text(json.dumps({"method": "beam", "beam_width": cfg.reference_beam, "peaks": ref}))
    return ref


def evaluate(cfg: TrainConfig, model: Topoformer, val: list[Prepared], samples: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Peaks of ``model`` on ``val``: (greedy decoding, best of it and ``samples`` draws from logits /
    ``cfg.val_temperature``), one encoder call per graph; samples are seeded per graph so epochs compare
    alike, and with ``samples=0`` the second array is the first."""
    model.eval()
    greedy_peaks, best = [], []
    for i, p in enumerate(val):
        logits = _policy_logits(cfg, model, p)
        peak = _greedy_peak_of(cfg, p, logits)
        greedy_peaks.append(peak)
        if samples:
            drawn = policy_orders(cfg, p.dg, logits / cfg.val_temperature, samples, np.random.default_rng([cfg.seed, i]))
            peak = min(peak, int(peaks(p.dg, drawn).min()))
        best.append(peak)
    return np.array(greedy_peaks, dtype=np.float64), np.array(best, dtype=np.float64)


def _weight_average(model: Topoformer, decay: float) -> torch.optim.swa_utils.AveragedModel:
    """Exponential moving average of ``model``'s weights (Polyak averaging): smooths the noise of REINFORCE
    updates; starts as a copy of the current weights."""
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)


def _gap_pct(peaks_: np.ndarray, ref: np.ndarray) -> float:
    return float(np.mean((peaks_ - ref) / ref) * 100.0)


def _val_gap(cfg: TrainConfig, model: Topoformer, val: list[Prepared], ref: np.ndarray) -> float:
    """The validation metric of ``model``: mean % gap from the reference (greedy, or sample-K per ``cfg``)."""
    return _gap_pct(evaluate(cfg, model, val, cfg.val_samples)[1], ref)


def _log_epoch(out: Path, log: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """Record one epoch's row in the checkpointed ``log`` and append it to ``out/log.jsonl``."""
    log.append(row)
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


# -------------------------------------------------------------- checkpoint
def _save(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def _state(cfg, model, baseline_model, best_state, opt, sched, epoch, step, rng, log, best_gap, wall, ema=None) -> dict[str, Any]:
    return {
        "ema": None if ema is None else ema.state_dict(),
        "config": asdict(cfg),
        "encoder_config": model.cfg.to_json(),
        "model": model.state_dict(),
        "baseline": None if baseline_model is None else baseline_model.state_dict(),
        "best": best_state,
        "best_gap": best_gap,
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "epoch": epoch,
        "step": step,
        "numpy_rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "log": log,
        "wall_s": wall,
    }


def train(cfg: TrainConfig, resume: bool = False, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or resume) per ``cfg``; returns the final checkpoint dict.  Writes ``out_dir/checkpoint.pt``,
    ``out_dir/log.jsonl`` (rank 0; under torchrun the other ranks return their own state, same weights,
    without validation results)."""
    main = distributed.setup().rank == 0
    echo = distributed.main_echo(echo)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, cfg.threads))
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model = Topoformer(cfg.encoder_config())
    baseline_model = copy.deepcopy(model).eval() if cfg.baseline == "rollout" else None
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=cfg.lr_decay)
    ckpt_path = out / "checkpoint.pt"
    ema = None
    epoch, step, log, best_gap, best_state, wall_before = 0, 0, [], math.inf, None, 0.0
    fine_tuning = False
    if resume and ckpt_path.is_file():
        st = load_checkpoint(ckpt_path, ("encoder_config", "model"))
        if st["encoder_config"] != model.cfg.to_json():
            raise ValueError(f"checkpoint {ckpt_path} was trained with a different encoder config")
        model.load_state_dict(st["model"])
        if baseline_model is not None and st["baseline"] is not None:
            baseline_model.load_state_dict(st["baseline"])
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        epoch, step, log = st["epoch"], st["step"], st["log"]
        best_gap, best_state, wall_before = st["best_gap"], st["best"], st["wall_s"]
        rng.bit_generator.state = st["numpy_rng"]
        torch.set_rng_state(st["torch_rng"])
        echo(f"resumed from {ckpt_path}: epoch {epoch}, step {step}, {wall_before:.0f}s so far")
    elif cfg.init_from:
        st = load_checkpoint(cfg.init_from, ("encoder_config", "state_dict"))
        if st["encoder_config"] != model.cfg.to_json():
            raise ValueError(f"--init-from {cfg.init_from}: encoder config differs from this run's")
        model.load_state_dict(st["state_dict"])
        if baseline_model is not None:
            baseline_model.load_state_dict(st["state_dict"])
        fine_tuning = True
        echo(f"initialised from {cfg.init_from} (trained {st.get('wall_s', 0) / 3600:.2f} h before)")
    distributed.broadcast_modules(model, *([baseline_model] if baseline_model is not None else []))
    if cfg.ema_decay > 0:
        ema = _weight_average(model, cfg.ema_decay)
        if resume and ckpt_path.is_file() and st.get("ema") is not None:
            ema.load_state_dict(st["ema"])
    scored = model if ema is None else ema.module  # the weights that are validated and kept
    specs: list[ExpertSpec] = []
    if cfg.objective == "imitation":
        specs = imitation_specs(cfg)
        echo(f"imitation: {len(specs)} demonstrations (beam width {cfg.expert_width}) in {cfg.expert_dir}")
        t_build = time.perf_counter()
        build_experts(distributed.shard(specs), cfg.expert_dir, workers=cfg.expert_workers)  # not counted in the training wall time
        distributed.barrier()
        echo(f"demonstrations ready after {time.perf_counter() - t_build:.0f}s")
    elif cfg.objective != "reinforce":
        raise ValueError(f"unknown objective {cfg.objective!r}; expected 'reinforce' or 'imitation'")
    if main:
        (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    t_start = time.perf_counter()
    wall = lambda: wall_before + time.perf_counter() - t_start  # noqa: E731

    def checkpoint(path: Path = ckpt_path) -> None:
        if main:
            _save(path, _state(cfg, model, baseline_model, best_state, opt, sched, epoch, step, rng, log, best_gap, wall(), ema))

    val = validation_set(cfg) if main else []
    ref = np.array(validation_reference(cfg, val, out) if main else [], dtype=np.float64)
    base_val = evaluate(cfg, baseline_model, val)[0] if baseline_model is not None else None
    if fine_tuning and main:
        # the starting weights are the first candidate: a fine-tuning run never exports worse weights
        best_gap = _val_gap(cfg, scored, val, ref)
        best_state = copy.deepcopy(scored.state_dict())
        _log_epoch(out, log, {"epoch": 0, "step": 0, "val_greedy_gap_pct": best_gap, "best_val_gap_pct": best_gap, "wall_s": 0.0})
        echo(f"epoch   0  initial weights: val gap {best_gap:+.2f}%")
    last_ckpt = time.perf_counter()
    stopped = False
    while epoch < cfg.epochs and not stopped:
        if baseline_model is not None:
            distributed.broadcast_modules(baseline_model)  # rank 0's validation decides the baseline
        hi = min(cfg.max_ops, cfg.min_ops + (cfg.max_ops - cfg.min_ops) * (epoch + 1) // max(1, cfg.ramp_epochs))
        stats: list[dict[str, float]] = []
        t_epoch = time.perf_counter()
        while step < (epoch + 1) * cfg.steps_per_epoch:
            batch = _training_batch(cfg, step, hi, specs)
            if cfg.objective == "imitation":
                stats.append(imitation_step(cfg, model, opt, batch, cfg.batch_graphs))
            else:
                rngs = [np.random.default_rng([cfg.seed, k, 1]) for k in _graph_indices(cfg, step)]
                stats.append(train_step(cfg, model, baseline_model, opt, batch, rngs, cfg.batch_graphs))
            if ema is not None:
                ema.update_parameters(model)
            step += 1
            if time.perf_counter() - last_ckpt > cfg.checkpoint_every_s:
                checkpoint()
                last_ckpt = time.perf_counter()
            if cfg.time_budget_s and distributed.any_rank(wall() > cfg.time_budget_s):
                stopped = True
                break
        if stopped and step % cfg.steps_per_epoch:
            # partial epoch: keep the step counter so a resume finishes this epoch
            checkpoint()
            echo(f"time budget reached at step {step} (epoch {epoch}); checkpoint saved")
            break
        sched.step()
        epoch += 1
        if not main:
            continue
        cur, best_of = evaluate(cfg, scored, val, cfg.val_samples)
        gap = _gap_pct(best_of, ref)
        updated = False
        if baseline_model is not None:
            if cur.mean() < base_val.mean():
                baseline_model.load_state_dict(scored.state_dict())
                base_val = cur
                updated = True
        if gap < best_gap:
            best_gap = gap
            best_state = copy.deepcopy(scored.state_dict())
        row = {
            "epoch": epoch,
            "step": step,
            "max_ops": hi,
            "loss": float(np.mean([s["loss"] for s in stats])) if stats else None,
            "train_best_over_mean": float(np.mean([s["best_over_mean"] for s in stats])) if stats else None,
            "val_greedy_gap_pct": gap,  # the validation metric (greedy, or sample-K with val_samples)
            "val_metric": "greedy" if not cfg.val_samples else f"sample-{cfg.val_samples} (T={cfg.val_temperature:g})",
            "best_val_gap_pct": best_gap,
            "baseline_updated": updated,
            "lr": sched.get_last_lr()[0],
            "epoch_s": time.perf_counter() - t_epoch,
            "wall_s": wall(),
        }
        _log_epoch(out, log, row)
        echo(
            f"epoch {epoch:3d}  steps {step:5d}  ops<= {hi}  loss {row['loss']:+.4f}  "
            f"val {'greedy' if not cfg.val_samples else f'sample-{cfg.val_samples}'} gap {gap:+.2f}% (best {best_gap:+.2f}%)  {'baseline updated  ' if updated else ''}"
            f"{row['epoch_s']:.0f}s  total {row['wall_s'] / 60:.1f} min"
        )
        checkpoint()
        if epoch in cfg.snapshot_epochs:
            checkpoint(out / f"snapshot_epoch{epoch}.pt")
        last_ckpt = time.perf_counter()
    distributed.barrier()
    if not main:
        return _state(cfg, model, baseline_model, best_state, opt, sched, epoch, step, rng, log, best_gap, wall(), ema)
    return load_checkpoint(ckpt_path)


def config_with(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    return replace(cfg, **{k: v for k, v in changes.items() if v is not None})
