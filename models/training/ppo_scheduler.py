"""PPO on paper 002's scheduling environment: the reinforcement-learning baseline of its section 5 -- torch.

Same states, actions, policy network and reward as the GFlowNet (paper 002: "the
same definitions of states, actions, and reward function (with temperature
sigma = 0.25)"): the terminal reward ``(U(x) - m) / 0.25``, the policy's
temperature input fixed at 0.25.  Each update samples ``batch`` trajectories of
one training problem and takes ``epochs`` passes of the PPO-clip loss (Schulman
et al. 2017, ratio clipped to ``1 +- clip``) with the entropy bonus added to it
(Ahmed et al. 2019); the entropy coefficient and the learning rate decay
exponentially.  One simplification, stated: the advantage of every step of a
trajectory is its standardised return within the batch (the batch mean as the
baseline, as paper 001's REINFORCE uses a per-graph baseline) instead of a learned
critic -- the reward is terminal and undiscounted, so the two estimate the same
quantity and the batch mean needs no second network.

The export is the GFlowNet's (encoder + head ONNX, ``onnx_sched.policy = ppo``),
so :class:`~onnx_sched.models.inference.gflownet.GFlowNetModel` samples from it
at temperature 0.25.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from onnx_sched.cost import makespan as ms
from onnx_sched.models.inference.features import relation_matrix
from onnx_sched.models.inference.gflownet import sample_trajectories
from onnx_sched.models.inference.gflownet_env import env_arrays
from onnx_sched.models.training import distributed
from onnx_sched.models.training.gflownet_net import GFlowNetPolicy, export_onnx, policy_config
from onnx_sched.models.training.gflownet_train import replay_chunks, torch_step_fn

__all__ = ["PPOConfig", "SIGMA", "ppo_update", "train_ppo"]

SIGMA = 0.25


@dataclass(frozen=True)
class PPOConfig:
    updates: int = 500
    batch: int = 100
    epochs: int = 4
    clip: float = 0.2
    lr: float = 1e-3
    lr_decay: float = 0.999  # per update
    entropy: float = 0.01
    entropy_decay: float = 0.995  # per update
    d_model: int = 64
    n_layers: int = 3
    heads_per_group: int = 1
    head_dim: int = 16
    ffn_dim: int = 128
    replay_chunk: int = 800
    seed: int = 0
    hours: float = 0.0
    log_every: int = 10


def ppo_update(model: GFlowNetPolicy, opt: torch.optim.Optimizer, problem: ms.MakespanProblem, cfg: PPOConfig,
               entropy_coef: float, seed: int) -> dict[str, float]:
    """One PPO update on ``problem`` (see module docstring); returns its statistics."""
    rel = torch.from_numpy(relation_matrix(problem.graph))
    x = torch.from_numpy(env_arrays(problem).static)
    log_sigma = torch.full((1, 1), math.log(SIGMA))
    with torch.no_grad():
        h, e = model.encoder(x, rel, log_sigma)
    ro = sample_trajectories(problem, torch_step_fn(model, h, e), cfg.batch, batch=cfg.batch, seed=seed, record=True)
    lanes = ro.steps[0][1].shape[2]
    ret = (ro.speedup - lanes) / SIGMA
    adv = torch.from_numpy(((ret - ret.mean()) / (ret.std() + 1e-8)).astype(np.float32))
    old = None
    n_states = len(ro.steps) * cfg.batch
    for _ in range(cfg.epochs):
        opt.zero_grad()
        h, e = model.encoder(x, rel, log_sigma)
        new_old = []
        for part, logp, ent in replay_chunks(model, h, e, ro.steps, cfg.batch, cfg.replay_chunk):
            n_steps = part.stop - part.start
            a = adv.repeat(n_steps)
            ref = logp.detach() if old is None else old[part.start * cfg.batch:part.stop * cfg.batch]
            ratio = torch.exp(logp - ref)
            surrogate = torch.minimum(ratio * a, torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * a)
            (-(surrogate + entropy_coef * ent).sum() / n_states).backward(retain_graph=True)
            new_old.append(logp.detach())
        if old is None:
            old = torch.cat(new_old)
        distributed.average_gradients(model.parameters())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
    return {"mean_speedup": float(ro.speedup.mean()), "max_speedup": float(ro.speedup.max())}


def train_ppo(cfg: PPOConfig, problems: Sequence[ms.MakespanProblem], out: str, echo: Any = print) -> dict[str, Any]:
    """Train PPO on ``problems``; write ``out.pt``, ``out.onnx`` (+ head) and ``out_log.json``
    (under torchrun: one problem per rank per update, gradients averaged, rank 0 writes)."""
    world = distributed.setup()
    echo = distributed.main_echo(echo)
    torch.manual_seed(cfg.seed)
    model = GFlowNetPolicy(policy_config(cfg.d_model, cfg.n_layers, cfg.heads_per_group, cfg.head_dim, cfg.ffn_dim))
    distributed.broadcast_modules(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=cfg.lr_decay)
    rng = distributed.rank_rng(cfg.seed)
    log, t0, update = [], time.perf_counter(), 0
    for update in range(cfg.updates):
        problem = problems[int(rng.integers(len(problems)))]
        stats = ppo_update(model, opt, problem, cfg, cfg.entropy * cfg.entropy_decay ** update,
                           seed=update * world.size + world.rank)
        sched.step()
        stats.update(update=update, seconds=time.perf_counter() - t0)
        log.append(stats)
        if update % cfg.log_every == 0:
            echo(f"update {update}: mean U {stats['mean_speedup']:.3f} max U {stats['max_speedup']:.3f} "
                 f"({stats['seconds']:.0f} s)")
        if distributed.any_rank(bool(cfg.hours) and time.perf_counter() - t0 > cfg.hours * 3600):
            break
    seconds = time.perf_counter() - t0
    if distributed.is_main():
        torch.save({"model": model.state_dict(), "config": asdict(cfg), "update": update + 1}, f"{out}.pt")
        export_onnx(model, f"{out}.onnx", {"onnx_sched.objective": "gflownet", "onnx_sched.policy": "ppo",
                                            "onnx_sched.sigma": str(SIGMA), "onnx_sched.updates": str(update + 1)})
        with open(f"{out}_log.json", "w") as f:
            json.dump({"config": asdict(cfg), "updates": update + 1, "seconds": seconds, "log": log}, f)
    distributed.barrier()
    return {"updates": update + 1, "seconds": seconds, "log": log}
