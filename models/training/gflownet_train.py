"""Training the conditional GFlowNet scheduler (paper 002, 3.2-3.3 and appendix C) -- torch.

Every update: one training problem, one temperature ``sigma ~ log-uniform[0.01, 1]``,
``batch`` (100) trajectories sampled with the current forward policy (no
exploration mix, as appendix C), reward ``log R = (U(x) - m) / sigma`` with
``U`` the proxy speedup and ``m`` the number of lanes, then one Adam step on

* ``variance`` (eq. 7-8, the paper's loss): ``zeta = log R + sum log P_B - sum log P_F``
  per trajectory, loss ``mean (zeta - mean zeta)^2``;
* ``tb`` (the ablation of Figure 4): trajectory balance with a learned
  ``log Z(G, sigma)`` head, loss ``mean (log Z + sum log P_F - log R - sum log P_B)^2``.

``P_B`` is uniform over parents, so only ``sum log P_F`` carries gradients.  The
trajectories are sampled without autograd; the states are then replayed in
chunks with autograd and each chunk's gradient is accumulated with the
per-trajectory coefficient ``d loss / d sum log P_F`` -- the exact gradient of
the loss, without holding ``n`` batched forward graphs in memory.

Problems come from :func:`synthetic_problems` (paper 002, E.5: durations
``U(0, 1)``, four homogeneous devices, no transfer cost in the proxy) or from
sub-graphs of real models (:func:`subgraph_problems`, 25-75 ops, section 5.3;
drawn once as a pool of ``--graphs`` problems rather than afresh at every
step).  Gradients are clipped to norm 10 (not in the paper).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx
import numpy as np
import torch

from onnx_sched.cost import makespan as ms
from onnx_sched.graph import Graph
from onnx_sched.machines import identical_devices
from onnx_sched.models.inference.features import relation_matrix
from onnx_sched.models.inference.gflownet import Rollouts, StepFn, ready_rows, sample_trajectories, scatter_logits
from onnx_sched.models.inference.gflownet_env import check_actions, env_arrays
from onnx_sched.models.training import distributed
from onnx_sched.models.training.checkpoint_io import load_checkpoint
from onnx_sched.models.training.gflownet_net import GFlowNetPolicy, export_onnx, policy_config

__all__ = ["TrainConfig", "backward", "homogeneous_problem", "loss_coefficients", "model_problems",
           "replay_chunks", "subgraph_problems", "synthetic_problems", "torch_step_fn", "train", "train_step"]


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters (paper 002 appendix C / E.1 where it gives them)."""

    families: tuple[str, ...] = ("er", "layered")
    n_ops: int = 50
    n_graphs: int = 1000
    lanes: int = 4
    updates: int = 1000
    batch: int = 100
    sigma_min: float = 0.01
    sigma_max: float = 1.0
    lr: float = 1e-3
    loss: str = "variance"  # or "tb"
    d_model: int = 64
    n_layers: int = 3
    heads_per_group: int = 1
    head_dim: int = 16
    ffn_dim: int = 128
    replay_chunk: int = 800  # states per autograd replay chunk
    seed: int = 0
    hours: float = 0.0  # wall-clock limit (0 = none)
    log_every: int = 10
    actions: str = "all"  # or "local" / "list": the narrowed actions of ScheduleEnv (docs/results.md 16.3c)

    def __post_init__(self) -> None:
        if self.loss not in ("variance", "tb"):
            raise ValueError(f"loss must be 'variance' or 'tb', got {self.loss!r}")
        check_actions(self.actions)
        if not 0 < self.sigma_min <= self.sigma_max:
            raise ValueError(f"need 0 < sigma_min <= sigma_max, got {self.sigma_min}, {self.sigma_max}")


def homogeneous_problem(graph: Graph, durations: np.ndarray, lanes: int = 4) -> ms.MakespanProblem:
    """``lanes`` identical devices without transfer cost: paper 002's proxy."""
    return ms.makespan_problem(graph, identical_devices(lanes), np.asarray(durations, np.float64))


def synthetic_problems(families: Sequence[str], n_ops: int, count: int, seed: int, lanes: int = 4) -> list[ms.MakespanProblem]:
    """``count`` problems, families in turn, durations ``U(0, 1)`` (paper 002, E.5)."""
    from onnx_sched.synth import generate

    out = []
    for i in range(count):
        g = generate(families[i % len(families)], n_ops, seed + i)
        rng = np.random.default_rng(seed + i)
        out.append(homogeneous_problem(g, rng.uniform(0.0, 1.0, g.n_ops), lanes))
    return out


def subgraph_problems(problems: Sequence[ms.MakespanProblem], count: int, seed: int, low: int = 25,
                      high: int = 75, lanes: Sequence[int] = (4,)) -> list[ms.MakespanProblem]:
    """Random connected sub-graphs of 25-75 ops (paper 002, 5.3): a random op and its nearest
    neighbours in breadth-first order, with the parent's durations, on ``lanes`` identical
    devices (drawn per sub-graph from ``lanes``)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        p = problems[int(rng.integers(len(problems)))]
        g = p.graph
        size = int(rng.integers(low, high + 1))
        devices = identical_devices(int(lanes[int(rng.integers(len(lanes)))]))
        if g.n_ops <= size:
            out.append(ms.makespan_problem(g, devices, p.min_durations()))
            continue
        nxg = g.to_networkx().to_undirected()
        start = int(rng.integers(g.n_ops))
        keep: list[int] = []
        for v in nx.bfs_tree(nxg, start):
            keep.append(int(v))
            if len(keep) == size:
                break
        keep_arr = np.sort(np.asarray(keep))
        index = {int(v): i for i, v in enumerate(keep_arr)}
        edges = [(index[u], index[v]) for u, v in g.edges.tolist() if u in index and v in index]
        sub = Graph.from_edges(len(keep_arr), edges, g.op_output_bytes[keep_arr], name=f"{g.name}_sub",
                               op_types=[g.op_types[v] for v in keep_arr])
        out.append(ms.makespan_problem(sub, devices, p.min_durations()[keep_arr]))
    return out


def model_problems(paths: Sequence[str | os.PathLike[str]], profile: str | os.PathLike[str],
                   device: str = "CPU") -> list[ms.MakespanProblem]:
    """Real models with op durations from ``device`` of a measured profile file (its rate model prices
    ops it did not time), on 4 identical devices: the parents of :func:`subgraph_problems`."""
    from onnx_sched.importers.onnx import import_onnx
    from onnx_sched.profiling import load_profiles, op_seconds_vector

    prof = next((d for d in load_profiles(profile).devices if d.name == device), None)
    if prof is None:
        raise ValueError(f"profile {os.fspath(profile)!r} has no device {device!r}")
    out = []
    for path in paths:
        g = import_onnx(path).graph
        out.append(homogeneous_problem(g, op_seconds_vector(g, prof), 4))
    return out


def loss_coefficients(zeta: np.ndarray) -> np.ndarray:
    """``d/d zeta_b`` of the log-partition variance loss ``mean (zeta - mean zeta)^2`` (eq. 8).

    >>> loss_coefficients(np.array([1.0, 3.0])).tolist()
    [-1.0, 1.0]
    """
    return 2.0 * (zeta - zeta.mean()) / len(zeta)


def torch_step_fn(model: GFlowNetPolicy, h: torch.Tensor, e: torch.Tensor) -> StepFn:
    """The torch head on a fixed encoding as a numpy ``step_fn`` (no autograd) for :func:`sample_trajectories`."""

    def run(node: np.ndarray, pair: np.ndarray, mask: np.ndarray) -> np.ndarray:
        rows = ready_rows(mask)
        with torch.no_grad():
            scores = model.head(h[torch.from_numpy(rows[1])], e, torch.from_numpy(node[rows]),
                                torch.from_numpy(pair[rows])).numpy()
        return scatter_logits(mask, rows, scores)

    return run


def replay_chunks(model: GFlowNetPolicy, h: torch.Tensor, e: torch.Tensor, steps: list, batch: int,
                  chunk: int) -> Iterator[tuple[slice, torch.Tensor, torch.Tensor]]:
    """Replay recorded steps with autograd, ``chunk`` states at a time: per chunk the steps it covers,
    ``log P_F`` of the taken actions and the policy's entropy over valid actions, both ``(steps * batch,)``."""
    per = max(1, chunk // batch)
    for i in range(0, len(steps), per):
        part = steps[i:i + per]
        node = torch.from_numpy(np.concatenate([s[0] for s in part]))
        pair = torch.from_numpy(np.concatenate([s[1] for s in part]))
        state_mask = torch.from_numpy(np.concatenate([s[2] for s in part]))
        mask = state_mask.reshape(len(node), -1)
        action = torch.from_numpy(np.concatenate([s[3] for s in part]))
        rows, ops = torch.nonzero(state_mask.any(dim=-1), as_tuple=True)  # ready ops only: the rest are masked
        scores = model.head.score(h[ops], e, node[rows, ops], pair[rows, ops])
        logits = torch.full(state_mask.shape, float("-inf")).index_put((rows, ops), scores)
        logp = torch.log_softmax(logits.reshape(len(node), -1).masked_fill(~mask, float("-inf")), dim=1)
        entropy = -(logp.exp() * logp.masked_fill(~mask, 0.0)).sum(dim=1)
        yield slice(i, i + len(part)), logp.gather(1, action[:, None]).squeeze(1), entropy


def _replay_log_pf(model: GFlowNetPolicy, h: torch.Tensor, e: torch.Tensor, steps: list, coef: np.ndarray,
                   chunk: int) -> None:
    """Backpropagate ``sum_b coef_b * sum_t log P_F(a_bt | s_bt)`` chunk by chunk (grads accumulate;
    the encoding ``h, e`` is computed once and kept for every chunk)."""
    c = torch.from_numpy(coef.astype(np.float32))
    for part, taken, _ in replay_chunks(model, h, e, steps, len(coef), chunk):
        n_steps = part.stop - part.start
        (taken * c.repeat(n_steps)).sum().backward(retain_graph=True)


def backward(model: GFlowNetPolicy, problem: ms.MakespanProblem, sigma: float, cfg: TrainConfig,
             seed: int) -> tuple[dict[str, float], Rollouts]:
    """Sample ``cfg.batch`` trajectories and accumulate the loss's gradient in ``model`` (no optimizer step)."""
    rel = torch.from_numpy(relation_matrix(problem.graph))
    x = torch.from_numpy(env_arrays(problem).static)
    log_sigma = torch.full((1, 1), math.log(sigma))
    h, e = model.encoder(x, rel, log_sigma)
    ro: Rollouts = sample_trajectories(problem, torch_step_fn(model, h.detach(), e.detach()), cfg.batch,
                                       batch=cfg.batch, seed=seed, record=True, actions=cfg.actions)
    lanes = ro.steps[0][1].shape[2] if ro.steps else cfg.lanes
    log_r = (ro.speedup - lanes) / sigma
    if cfg.loss == "variance":
        zeta = log_r + ro.log_pb - ro.log_pf
        loss = float(np.mean((zeta - zeta.mean()) ** 2))
        _replay_log_pf(model, h, e, ro.steps, -loss_coefficients(zeta), cfg.replay_chunk)
    else:
        log_z = model.log_partition(h, e)
        delta = float(log_z) + ro.log_pf - log_r - ro.log_pb
        loss = float(np.mean(delta ** 2))
        coef = 2.0 * delta / len(delta)
        (log_z * float(coef.sum())).backward(retain_graph=True)
        _replay_log_pf(model, h, e, ro.steps, coef, cfg.replay_chunk)
    stats = {"loss": loss, "mean_speedup": float(ro.speedup.mean()), "max_speedup": float(ro.speedup.max()),
             "sigma": sigma}
    return stats, ro


def train_step(model: GFlowNetPolicy, opt: torch.optim.Optimizer, problem: ms.MakespanProblem, sigma: float,
               cfg: TrainConfig, seed: int) -> dict[str, float]:
    """One update on one problem and temperature (see module docstring); returns its statistics."""
    model.train()
    opt.zero_grad()
    stats, _ = backward(model, problem, sigma, cfg, seed)
    distributed.average_gradients(model.parameters())  # under torchrun: the mean over the ranks' problems
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    opt.step()
    return stats


def train(cfg: TrainConfig, problems: Sequence[ms.MakespanProblem], out: str, echo: Any = print,
          resume: bool = False, init_from: str | None = None) -> dict[str, Any]:
    """Train on ``problems``; write ``out.pt`` (torch, resumable), ``out.onnx`` and ``out_log.json``
    (``init_from``: start from another run's ``.pt`` weights, e.g. to fine-tune on one graph).

    Under ``torchrun --nproc_per_node N`` each rank draws its own problem and temperature per
    update and the gradients are averaged (N problems per update); rank 0 logs, saves and exports.
    """
    world = distributed.setup()
    echo = distributed.main_echo(echo)
    torch.manual_seed(cfg.seed)
    model = GFlowNetPolicy(policy_config(cfg.d_model, cfg.n_layers, cfg.heads_per_group, cfg.head_dim, cfg.ffn_dim),
                           log_z_head=cfg.loss == "tb")
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    log: list[dict[str, float]] = []
    start_update, spent = 0, 0.0
    if resume and os.path.exists(f"{out}.pt"):
        state = load_checkpoint(f"{out}.pt", ("model", "opt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start_update, spent, log = state["update"], state["seconds"], state["log"]
        echo(f"resumed at update {start_update} ({spent / 3600:.2f} h)")
    elif init_from:  # fine-tuning: weights only, a fresh optimizer and log
        model.load_state_dict(load_checkpoint(init_from, ("model",))["model"])
        echo(f"initialised from {init_from}")
    distributed.broadcast_modules(model)
    rng = distributed.rank_rng(cfg.seed + start_update)
    t0 = time.perf_counter() - spent
    update = start_update
    for update in range(start_update, cfg.updates):
        problem = problems[int(rng.integers(len(problems)))]
        sigma = float(math.exp(rng.uniform(math.log(cfg.sigma_min), math.log(cfg.sigma_max))))
        seed = cfg.seed * 1_000_003 + update * world.size + world.rank
        stats = train_step(model, opt, problem, sigma, cfg, seed=seed)
        stats["update"] = update
        stats["seconds"] = time.perf_counter() - t0
        log.append(stats)
        if update % cfg.log_every == 0:
            echo(f"update {update}: loss {stats['loss']:.3g} mean U {stats['mean_speedup']:.3f} "
                 f"max U {stats['max_speedup']:.3f} sigma {sigma:.3f} ({stats['seconds']:.0f} s)")
        if update % 50 == 49 and distributed.is_main():
            _save(model, opt, cfg, out, update + 1, time.perf_counter() - t0, log)
        if distributed.any_rank(bool(cfg.hours) and time.perf_counter() - t0 > cfg.hours * 3600):
            break
    seconds = time.perf_counter() - t0
    if distributed.is_main():
        _save(model, opt, cfg, out, update + 1, seconds, log)
        export_onnx(model, f"{out}.onnx", {"onnx_sched.objective": "gflownet", "onnx_sched.loss": cfg.loss,
                                            "onnx_sched.updates": str(update + 1), "onnx_sched.actions": cfg.actions,
                                            "onnx_sched.processes": str(world.size)})
        with open(f"{out}_log.json", "w") as f:
            json.dump({"config": asdict(cfg), "updates": update + 1, "seconds": seconds, "processes": world.size,
                       "log": log}, f)
    distributed.barrier()
    return {"updates": update + 1, "seconds": seconds, "log": log}


def _save(model: GFlowNetPolicy, opt: torch.optim.Optimizer, cfg: TrainConfig, out: str, update: int,
          seconds: float, log: list) -> None:
    tmp = f"{out}.pt.tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "config": asdict(cfg), "update": update,
                "seconds": seconds, "log": log}, tmp)
    os.replace(tmp, f"{out}.pt")
