"""REINFORCE training of the one-shot makespan priority sampler (paper 001 section 3, appendix F) -- torch.

Per training graph (synthetic layered / ER / SBM with paper 001's machine
types, durations and capacities 1, 1, 4):

1. the Topoformer (:mod:`onnx_sched.models.training.topoformer`, the encoder shared with
   the peak-memory policy; input columns from
   :mod:`onnx_sched.models.inference.makespan_features`) gives one logit per op;
2. ``samples`` priority vectors ``logits + Gumbel`` (eq. 7) are list-scheduled
   by the numba kernel (:func:`onnx_sched.cost.makespan.list_makespans`);
3. the Gumbel-top-k probability of each sampled order (eq. 8, a Plackett-Luce
   product computed with a reversed ``logcumsumexp``) is weighted by the
   standardised makespan (eq. 13; makespans are first divided by their mean so
   ``std_eps`` is relative) and the logit-norm penalty ``c * mean(logits^2)``
   (eq. 12, ``c = 1e-3``) is added.

``prior="cp"`` (this project's option, not the paper's): the logits are the
critical-path logits of :func:`onnx_sched.passes.makespan._priorities.cp_logits` plus the
network output, so the untrained policy is list-cp with Gumbel noise and the
network learns a correction; the logit-norm penalty applies to the correction.

Paper 001 trains on 3000 graphs of 1000 ops with 1000 samples each for 20
epochs on a V100; the defaults here are scaled to a shared 2-core CPU (see
:class:`TrainConfig`) and the numbers the shipped model reaches are in its
metadata and ``log.jsonl``.  Validation after each epoch: mean greedy and
S(``val_samples``) makespans over the list-cp makespan on held-out graphs; the
epoch with the best S(``val_samples``) ratio (the mode the ``learned`` pass runs)
is exported.

Under ``torchrun --nproc_per_node N`` (:mod:`onnx_sched.models.training.distributed`) each rank
trains on every N-th training graph, one graph per rank per update (its own permutation and
Gumbel noise, seeded ``[seed, rank]``); the gradients are averaged over the update's graphs
and rank 0 validates and exports.

Run: ``python -m onnx_sched.models.training.train_makespan --budget 900 --out runs/makespan``
(``torchrun --nproc_per_node 2 -m onnx_sched.models.training.train_makespan ...`` for 2 processes).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from onnx_sched.cost import makespan as ms
from onnx_sched.models.inference.features import PE_DIM
from onnx_sched.models.inference.makespan_features import (
    FEATURE_NAMES,
    makespan_encoder_inputs,
    n_makespan_features,
    prior_logits,
)
from onnx_sched.models.training import distributed
from onnx_sched.models.training.topoformer import EncoderConfig, Topoformer, export_onnx
from onnx_sched.passes.makespan._priorities import cp_priority, gumbel_priorities
from onnx_sched.synth.attrs import makespan_attrs
from onnx_sched.synth.layered import layered_graph
from onnx_sched.synth.random_dags import er_graph, sbm_graph

__all__ = ["Prepared", "TrainConfig", "plackett_luce_log_prob", "prepare", "train", "train_step"]

FAMILIES = {"layered": layered_graph, "er": er_graph, "sbm": sbm_graph}
TRAIN_SEED0 = 20000  # the benchmark and tests use small seeds; keep training graphs apart
VAL_SEED0 = 30000


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters (defaults: the CPU-sized setting of the shipped model)."""

    out_dir: str = "runs/makespan"
    families: tuple[str, ...] = ("layered", "er", "sbm")
    n_ops: int = 300
    train_graphs: int = 40  # per family
    val_graphs: int = 4  # per family
    capacities: tuple[int, ...] = (1, 1, 4)
    d_model: int = 64
    n_layers: int = 3
    heads_per_group: int = 1
    head_dim: int = 16
    ffn_dim: int = 128
    samples: int = 128  # paper: 1000
    epochs: int = 20
    lr: float = 1e-3
    lr_decay: float = 0.95
    grad_clip: float = 1.0
    logit_reg: float = 1e-3  # paper 001 c_logits
    std_eps: float = 1e-3  # relative (makespans divided by their mean first)
    seed: int = 0
    threads: int = 2
    time_budget_s: float = 0.0  # 0 = no limit
    val_samples: int = 32  # model selection by the S(val_samples) ratio, the mode the pass uses; 0 = greedy
    prior: str = "none"  # "none" (paper 001) or "cp": logits = critical-path logits + network output

    def encoder_config(self) -> EncoderConfig:
        return EncoderConfig(
            in_dim=n_makespan_features(PE_DIM), encoder="topoformer", d_model=self.d_model, n_layers=self.n_layers,
            heads_per_group=self.heads_per_group, head_dim=self.head_dim, ffn_dim=self.ffn_dim, prio_norm="none",
            features=FEATURE_NAMES, pe_dim=PE_DIM,
        )


@dataclass(frozen=True, eq=False)
class Prepared:
    """A problem with its encoder inputs as tensors, its prior logits and its list-cp makespan."""

    problem: ms.MakespanProblem
    x: torch.Tensor
    rel: torch.Tensor
    list_cp: float
    prior: torch.Tensor  # added to the network output (zeros without a prior)


def prepare(problem: ms.MakespanProblem, prior: str = "none") -> Prepared:
    inp = makespan_encoder_inputs(problem)
    cp = float(ms.list_makespans(problem, cp_priority(problem)[None])[0])
    base = prior_logits(problem, prior)
    return Prepared(problem, torch.from_numpy(inp.x), torch.from_numpy(inp.rel), cp, torch.from_numpy(base).float())


def synthetic_problem(family: str, n: int, seed: int, capacities: tuple[int, ...] = (1, 1, 4)) -> ms.MakespanProblem:
    g = FAMILIES[family](n, seed)
    return ms.problem_from_attrs(g, makespan_attrs(g, seed, capacities))


def plackett_luce_log_prob(logits: torch.Tensor, orders: torch.Tensor) -> torch.Tensor:
    """``log Pr(order)`` under Gumbel-top-k sampling (paper 001 eq. 8) for each row of ``orders`` (``(k, n)``)."""
    ls = logits[orders]
    tail = torch.logcumsumexp(ls.flip(-1), dim=-1).flip(-1)
    return (ls - tail).sum(-1)


def train_step(model: Topoformer, opt: torch.optim.Optimizer, prep: Prepared | None, cfg: TrainConfig,
               rng: np.random.Generator, graphs: int = 1) -> dict[str, float]:
    """One REINFORCE update on one graph per rank, ``graphs`` over all ranks (``prep=None``: this rank has
    none left in its epoch but joins the update); returns this rank's sample statistics."""
    model.train()
    opt.zero_grad()
    stats: dict[str, float] = {}
    if prep is not None:
        out = model(prep.x, prep.rel)
        y = out + prep.prior
        z = y.detach().double().numpy()[None, :] + rng.gumbel(size=(cfg.samples, prep.problem.n_ops))
        costs = ms.list_makespans(prep.problem, z)
        orders = torch.from_numpy(np.argsort(-z, axis=1, kind="stable"))
        c = costs / costs.mean()
        adv = torch.from_numpy((c - c.mean()) / max(float(c.std()), cfg.std_eps)).to(y.dtype)
        lp = plackett_luce_log_prob(y, orders)
        loss = (adv * lp).mean() + cfg.logit_reg * (out**2).mean()  # eq. 12 on the network's own output
        (loss / graphs).backward()
        stats = {"best_ratio": float(costs.min() / prep.list_cp), "mean_ratio": float(costs.mean() / prep.list_cp)}
    distributed.sum_gradients(model.parameters())
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return stats


@torch.no_grad()
def validation_ratios(model: Topoformer, val: list[Prepared], samples: int, seed: int = 0) -> np.ndarray:
    """``(graphs, 2)``: greedy and S(``samples``) makespan (best of greedy and samples) over list-cp."""
    model.eval()
    rng = np.random.default_rng(seed)  # the same noise every epoch
    out = []
    for p in val:
        y = (model(p.x, p.rel) + p.prior).double().numpy()
        pr = np.vstack([y[None, :], gumbel_priorities(y, rng, samples)]) if samples else y[None, :]
        spans = ms.list_makespans(p.problem, pr)
        out.append((spans[0] / p.list_cp, spans.min() / p.list_cp))
    return np.asarray(out)


def train(cfg: TrainConfig, echo: Any = print) -> dict[str, Any]:
    """Train, validate every epoch, export the best epoch to ``out_dir/sampler_makespan.onnx`` (rank 0;
    the other ranks of a torchrun launch return no path and an empty log)."""
    world = distributed.setup()
    main, echo = world.rank == 0, distributed.main_echo(echo)
    t_start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(max(1, cfg.threads))
    rng = distributed.rank_rng(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    graphs = [(f, i) for f in cfg.families for i in range(cfg.train_graphs)]
    train_set = [prepare(synthetic_problem(f, cfg.n_ops, TRAIN_SEED0 + i, cfg.capacities), cfg.prior)
                 for f, i in distributed.shard(graphs)]
    val = [prepare(synthetic_problem(f, cfg.n_ops, VAL_SEED0 + i, cfg.capacities), cfg.prior)
           for f in cfg.families for i in range(cfg.val_graphs)] if main else []
    echo(f"prepared {len(graphs)} training and {len(val)} validation graphs in {time.perf_counter() - t_start:.1f}s"
         + (f" ({world.size} ranks)" if world.size > 1 else ""))
    model = Topoformer(cfg.encoder_config())
    distributed.broadcast_modules(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, cfg.lr_decay)
    sel = 1 if cfg.val_samples else 0
    best, best_state, best_epoch, log = float("inf"), None, 0, []
    stop = False
    # one update = one graph per rank; a rank whose shard is used up joins with a zero gradient
    per_update = [sum(distributed.shard_count(len(graphs), r, world.size) > j for r in range(world.size))
                  for j in range(distributed.shard_count(len(graphs), 0, world.size))]
    for epoch in range(cfg.epochs + 1):
        stats = []
        perm = rng.permutation(len(train_set)) if epoch else []
        for j in range(len(per_update) if epoch else 0):
            stats.append(train_step(model, opt, train_set[int(perm[j])] if j < len(perm) else None, cfg, rng, per_update[j]))
            if cfg.time_budget_s and distributed.any_rank(time.perf_counter() - t_start > cfg.time_budget_s):
                stop = True
                break
        stats = [s for s in stats if s]
        totals = distributed.sum_values([sum(s["best_ratio"] for s in stats), sum(s["mean_ratio"] for s in stats), len(stats)])
        if epoch:
            sched.step()
        if main:
            r = validation_ratios(model, val, cfg.val_samples).mean(axis=0)
            entry = {"epoch": epoch, "val_greedy_over_list_cp": float(r[0]), "val_sample_over_list_cp": float(r[1]),
                     "seconds": time.perf_counter() - t_start}
            if epoch:
                entry.update(train_best_ratio=totals[0] / totals[2], train_mean_ratio=totals[1] / totals[2], steps=int(totals[2]))
            log.append(entry)
            echo(json.dumps(entry))
            if float(r[sel]) < best:
                best, best_state, best_epoch = float(r[sel]), copy.deepcopy(model.state_dict()), epoch
        if stop:
            break
    if not main:
        return {"best_epoch": None, "val_ratio_over_list_cp": None, "path": None, "log": [], "state": model.state_dict()}
    last_state = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    with open(out / "log.jsonl", "w", encoding="utf-8") as fh:
        for entry in log:
            fh.write(json.dumps(entry) + "\n")
    torch.save({"config": asdict(cfg), "state": best_state, "last_state": last_state},
               out / "sampler_makespan.pt")
    meta = {
        "onnx_sched.objective": "makespan",
        "onnx_sched.prior": cfg.prior,
        "onnx_sched.train_config": json.dumps(asdict(cfg)),
        "onnx_sched.best_epoch": str(best_epoch),
        "onnx_sched.selection": f"S({cfg.val_samples})" if cfg.val_samples else "greedy",
        "onnx_sched.val_ratio_over_list_cp": f"{best:.4f}",
    }
    path = out / "sampler_makespan.onnx"
    export_onnx(model, os.fspath(path), meta)
    echo(f"best epoch {best_epoch}: {'sample' if sel else 'greedy'} / list-cp {best:.4f}; wrote {path}")
    return {"best_epoch": best_epoch, "val_ratio_over_list_cp": float(best), "path": str(path), "log": log,
            "state": last_state}


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    ap = argparse.ArgumentParser(prog=prog, description="Train the makespan priority sampler (paper 001).")
    ap.add_argument("--out", default=TrainConfig.out_dir)
    ap.add_argument("--budget", type=float, default=0.0, help="wall-clock seconds (0 = all epochs)")
    ap.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    ap.add_argument("--n-ops", type=int, default=TrainConfig.n_ops)
    ap.add_argument("--train-graphs", type=int, default=TrainConfig.train_graphs)
    ap.add_argument("--samples", type=int, default=TrainConfig.samples)
    ap.add_argument("--threads", type=int, default=TrainConfig.threads)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prior", choices=("none", "cp"), default="none")
    ap.add_argument("--val-samples", type=int, default=TrainConfig.val_samples)
    a = ap.parse_args(argv)
    train(TrainConfig(out_dir=a.out, time_budget_s=a.budget, epochs=a.epochs, n_ops=a.n_ops,
                      train_graphs=a.train_graphs, samples=a.samples, threads=a.threads, seed=a.seed,
                      prior=a.prior, val_samples=a.val_samples))


if __name__ == "__main__":
    main()
