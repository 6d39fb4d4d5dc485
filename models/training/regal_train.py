"""Train REGAL's policy (paper 003, section 3.4): REINFORCE as a contextual bandit (torch).

Each step draws one training problem and one seed ``s`` of a small pool, samples
``samples`` actions from the policy (per-op levels, eq. 6), runs REGAL's BRKGA with each
(feature run + ``evaluations`` minus its cost,
:func:`~onnx_sched.models.inference.regal.solve_with_actions`) with seed ``s`` and rewards
``r = -o_a / o_s``, ``o_s`` being standard BRKGA's objective on the same problem at the same
budget with the same seed (cached per problem and seed).  The loss is eq. 8 with the
learned baseline of eq. 9, ``-(r - b) log p(y|G) + (lambda / 2) (r - b)^2``; the advantage
is divided by a running standard deviation of advantages.  Validation: the mode action on
the validation problems, mean reward; the best weights are exported.

Not in the paper, both against the reward's noise (two seeds of BRKGA 5K differ by about
5 % on one problem, the actions by about 1 %): the common seed of a step's actions and its
``o_s`` (``seed_pool``), the advantage scale, and a start by imitation: before REINFORCE,
``imitation_steps`` cross-entropy steps fit the policy to
:func:`~onnx_sched.models.inference.regal.feature_prior`, a hand-written action read off
the features (0: the paper's cold start, from standard BRKGA's levels), or with
``imitation_target="best-known"`` to the action encoding a long BRKGA run's solution of each
training problem (:func:`consensus_action` of ``references`` runs; validates worse than the
prior, docs/results.md 14.4, session 21).  Two options, off by default, against REINFORCE drifting
below its imitation start (14.4): ``advantage="leave-one-out"`` compares a step's actions with each
other instead of with ``b(G)``, and ``anchor`` adds a KL penalty toward the policy the imitation left.
``explore_temperature`` below 1 samples REINFORCE's actions from the tempered policy ``softmax(logits / T)``: the
imitation's label smoothing leaves about 0.8 of each head's mass on its mode, so an untempered sample strays from
the mode action inference takes on about a fifth of a graph's hundreds of heads; a tempered one on a few, and a
step compares the mode's neighbours (the mode is the same at every temperature).

    onnx-sched train regal --minutes 35 --export models/checkpoints/regal

writes ``regal.onnx`` (policy, ONNX Runtime), ``regal.pt`` (policy + baseline state,
config) and ``regal_train_log.json``.  ``pin=False`` (``--no-pin``) trains without the symmetry pin; the
flag is written into the ONNX metadata and the pass follows it by default.

Under ``torchrun --nproc_per_node N`` (:mod:`onnx_sched.models.training.distributed`) each rank
builds and draws from its share of the training problems (seed ``[seed, rank]``), every step
averages the N ranks' gradients (and their advantage scale), and rank 0 builds the validation
problems, validates and keeps the best weights.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from onnx_sched.brkga import BrkgaParams
from onnx_sched.cost import device_memory as dm
from onnx_sched.models.inference.regal import LEVELS, feature_prior, solution_action, solve_with_actions
from onnx_sched.models.inference.regal_features import (
    FEATURE_EVALUATIONS,
    PAPER_FEATURE_EVALUATIONS,
    n_node_features,
)
from onnx_sched.models.training import distributed
from onnx_sched.models.training.regal_data import Instance, make_instances, split_graphs
from onnx_sched.models.training.regal_net import BaselineNet, PolicyNet, export_policy
from onnx_sched.passes.device_memory.brkga import solve

__all__ = ["RegalTrainConfig", "export", "imitate", "leave_one_out_advantage", "train"]

#: Label smoothing of the imitation: the mode is the target, and REINFORCE still samples other levels.
IMITATION_SMOOTHING = 0.25
#: Adam's step size for the imitation (REINFORCE has its own, ``RegalTrainConfig.lr``).
IMITATION_LR = 1e-3


@dataclass(frozen=True)
class RegalTrainConfig:
    """Everything a training run depends on."""

    minutes: float = 35.0
    evaluations: int = 5000
    validation_evaluations: int | None = None  # budget of validation and o_s there (None: ``evaluations``; paper 003
    # A.5 trains with 1,000 and validates with 5,000)
    synthetic: int = 120  # training synthetic graphs (validation: a quarter)
    copies: int = 6  # noisy copies per training / validation corpus model
    min_ops: int = 50
    max_ops: int = 150
    samples: int = 4  # actions per step
    lr: float = 1e-3
    baseline_weight: float = 1.0  # lambda of eq. 9's loss
    advantage: str = "learned"  # "learned": r - b(G) (eq. 9); "leave-one-out": r minus the mean reward of the
    # step's other actions (same problem, same seed; not in the paper)
    anchor: float = 0.0  # weight of KL(policy || the policy after imitation), summed over a graph's heads, added to
    # the loss to hold REINFORCE near its start (0: none, as the paper; not in the paper)
    explore_temperature: float = 1.0  # REINFORCE samples from softmax(logits / T): below 1, near the mode action
    # that inference takes (1: the policy itself, as the paper; not in the paper)
    hidden: int = 32
    rounds: int = 4
    validate_every: int = 100
    seed: int = 0
    threads: int = 1
    pin: bool = False  # hold the op with the most memory on device 0 (paper's symmetry breaking; shipped: no)
    validation_seeds: int = 2  # seeds each validation problem runs with (mode action)
    seed_pool: int = 4  # seeds a step's actions and o_s share (o_s cached for each)
    imitation_steps: int = 4000  # cross-entropy steps toward the imitation target before REINFORCE (0: none)
    imitation_target: str = "prior"  # "prior": feature_prior; "best-known": solution_action of a BRKGA run of
    # reference_evaluations per training problem (a near-optimal solution); "seeded": the same run started from the
    # feature run's elites
    reference_evaluations: int = 50_000
    references: int = 1  # best-known solutions per problem (seeds seed + 1000 ..); several: consensus_action
    devices: int = 2  # devices of every problem (the first is the host); the checkpoint serves only this count
    feature_evaluations: int = FEATURE_EVALUATIONS  # the feature run (paper 003: 400); stored in the ONNX metadata

    def __post_init__(self) -> None:
        if self.advantage not in ("learned", "leave-one-out"):
            raise ValueError(f"advantage must be 'learned' or 'leave-one-out', got {self.advantage!r}")
        if self.advantage == "leave-one-out" and self.samples < 2:
            raise ValueError("the leave-one-out advantage compares a step's actions with each other: give --samples 2 "
                             f"or more (got {self.samples})")
        if self.imitation_target not in ("prior", "best-known", "seeded"):
            raise ValueError("imitation_target must be 'prior', 'best-known' or 'seeded', got "
                             f"{self.imitation_target!r}")
        if not self.explore_temperature > 0:
            raise ValueError(f"the exploration temperature must be above 0, got {self.explore_temperature}")


def leave_one_out_advantage(reward: torch.Tensor) -> torch.Tensor:
    """Each action's reward minus the mean reward of the step's other actions (REINFORCE leave-one-out).

    The step's actions share a problem and a BRKGA seed, so this removes what they have in common -- the problem's
    difficulty and the seed's luck, which the learned baseline ``b(G)`` cannot see -- and keeps what the actions
    changed.  Needs at least two actions.

    >>> leave_one_out_advantage(torch.tensor([1.0, 2.0, 3.0])).tolist()
    [-1.5, 0.0, 1.5]
    """
    n = len(reward)
    if n < 2:
        raise ValueError(f"leave-one-out advantage needs at least 2 actions per step, got {n}")
    return reward - (reward.sum() - reward) / (n - 1)


def _tensors(inst: Instance) -> tuple[torch.Tensor, ...]:
    i = inst.inputs
    return tuple(torch.from_numpy(a) for a in (i.x, i.edge_x, i.src, i.dst))


def validate(policy: PolicyNet, instances: list[Instance], evaluations: int) -> dict[str, float]:
    """Mode action, every seed of the problems' pool: mean reward -o_a/o_s and the share of (problem, seed)
    pairs tied or beaten."""
    rewards = []
    with torch.no_grad():
        for inst in instances:
            actions = policy(*_tensors(inst)).argmax(dim=2).numpy()
            for seed, o_s in enumerate(inst.standards):
                o_a = solve_with_actions(inst.problem, inst.inputs, actions, evaluations, seed=seed).best_fitness
                rewards.append(-o_a / o_s)
    r = np.array(rewards)
    return {"reward": float(r.mean()), "ties_or_wins": float((r >= -1.0).mean())}


def consensus_action(problem: dm.DeviceMemoryProblem, solutions: list[np.ndarray], k: int = LEVELS) -> np.ndarray:
    """One action for several solutions: per head group, the mean level of their
    :func:`~onnx_sched.models.inference.regal.solution_action` means (rounded), and the variance level whose
    dequantised variance is nearest the lowest level's plus the spread of their means, so genes the solutions
    agree on stay sharp and the others widen.  One solution: its ``solution_action``."""
    actions = np.stack([solution_action(problem, keys, k) for keys in solutions])  # (R, n, heads)
    out = actions[0].copy()
    if len(solutions) == 1:
        return out
    groups = (actions.shape[2] - 1) // 2
    levels = np.arange(k)
    for g in range(groups):
        mu = (actions[:, :, 2 * g] + 1.0) / (k + 1.0)  # (R, n)
        m = np.clip(np.rint(actions[:, :, 2 * g].mean(axis=0)), 0, k - 1)
        centre = (m + 1.0) / (k + 1.0)
        want = centre * (1 - centre) / (k + 1.0) + mu.var(axis=0)  # level 0's variance + the spread
        var = centre[:, None] * (1 - centre[:, None]) * (levels[None, :] + 1.0) / (k + 1.0)  # (n, k)
        untouched = (actions[:, :, 2 * g + 1] > 0).all(axis=0)  # genes no solution sets (standard) stay standard
        out[:, 2 * g] = m
        out[:, 2 * g + 1] = np.where(untouched, out[:, 2 * g + 1], np.abs(var - want[:, None]).argmin(axis=1))
    return out


def imitation_targets(instances: list[Instance], cfg: RegalTrainConfig,
                      echo: Callable[[str], None] = print) -> list[np.ndarray]:
    """The action each training problem's imitation fits (``cfg.imitation_target``): :func:`feature_prior`, or
    :func:`consensus_action` of ``cfg.references`` standard BRKGA runs of ``cfg.reference_evaluations`` (seeds
    ``cfg.seed + 1000``, ``+ 1001``, ...), started from scratch (``"best-known"``) or from the feature run's elites
    (``"seeded"``: a solution in the basin the features describe, as REGAL's own BRKGA starts there)."""
    if cfg.imitation_target == "prior":
        return [feature_prior(inst.inputs, inst.problem.n_devices) for inst in instances]
    targets = []
    elites = BrkgaParams().elites
    for i, inst in enumerate(instances):
        initial = inst.inputs.warm.population[:elites] if cfg.imitation_target == "seeded" else None
        solutions = [solve(inst.problem, BrkgaParams(evaluations=cfg.reference_evaluations),
                           seed=cfg.seed + 1000 + r, initial=initial).best_keys for r in range(cfg.references)]
        targets.append(consensus_action(inst.problem, solutions))
        if (i + 1) % 25 == 0:
            echo(f"  {i + 1}/{len(instances)} best-known solutions")
    return targets


def imitate(policy: PolicyNet, instances: list[Instance], targets: list[np.ndarray], steps: int, lr: float,
            rng: np.random.Generator) -> dict[str, float]:
    """Fit ``policy`` to each problem's target action (``targets``, parallel to ``instances``) by cross-entropy,
    one problem per step (its own Adam); returns the last step's loss and the share of heads whose mode is the
    target."""
    if not steps:
        return {"steps": 0, "loss": float("nan"), "accuracy": float("nan")}
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    params = list(policy.parameters())
    for _ in range(steps):
        i = int(rng.integers(len(instances)))
        inst = instances[i]
        logits = policy(*_tensors(inst))
        target = torch.from_numpy(targets[i])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[2]), target.reshape(-1),
                                               label_smoothing=IMITATION_SMOOTHING)
        opt.zero_grad()
        loss.backward()
        distributed.average_gradients(params)
        opt.step()
    accuracy = float((logits.argmax(dim=2) == target).float().mean())
    return {"steps": steps, "loss": float(loss.detach()), "accuracy": accuracy}


def train(cfg: RegalTrainConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Build the problems, train for ``cfg.minutes``; returns policy + baseline (the policy with the best validation
    on rank 0, the last one elsewhere), the log and ``last_policy`` (the last policy weights, the same on every rank)."""
    world = distributed.setup()
    main, echo = world.rank == 0, distributed.main_echo(echo)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = distributed.rank_rng(cfg.seed)
    start = time.time()
    echo("building training problems (features + standard BRKGA per problem)")
    graphs = split_graphs("train", cfg.synthetic, cfg.copies, cfg.min_ops, cfg.max_ops, cfg.seed)
    train_set = make_instances(distributed.shard(graphs) or graphs, cfg.evaluations, echo, cfg.pin, cfg.seed_pool,
                               cfg.devices, cfg.feature_evaluations)
    val_evaluations = cfg.validation_evaluations or cfg.evaluations
    val_set = make_instances(split_graphs("validation", cfg.synthetic // 4, max(1, cfg.copies // 3), cfg.min_ops,
                                          cfg.max_ops, cfg.seed), val_evaluations, echo, cfg.pin,
                             cfg.validation_seeds, cfg.devices, cfg.feature_evaluations) if main else []
    prep_s = time.time() - start
    echo(f"{len(graphs)} training, {len(val_set)} validation problems in {prep_s:.0f} s")
    nf = n_node_features(cfg.devices)
    policy = PolicyNet(nf, cfg.devices, cfg.hidden, cfg.rounds)
    baseline = BaselineNet(nf, cfg.hidden, cfg.rounds)
    distributed.broadcast_modules(policy, baseline)
    params = list(policy.parameters()) + list(baseline.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr)
    targets = imitation_targets(train_set, cfg, echo) if cfg.imitation_steps else []
    imitation = imitate(policy, train_set, targets, cfg.imitation_steps, IMITATION_LR, rng)
    if cfg.imitation_steps:
        echo(f"imitation ({cfg.imitation_target}): {cfg.imitation_steps} steps, final cross-entropy "
             f"{imitation['loss']:.4f}, "
             f"mode = target on {imitation['accuracy']:.1%} of the heads")
    start_policy = copy.deepcopy(policy).requires_grad_(False) if cfg.anchor else None
    best_val = validate(policy, val_set, val_evaluations) if main else {"reward": float("nan"), "ties_or_wins": 0.0}
    best_state, best_step = copy.deepcopy(policy.state_dict()), 0
    log: list[dict[str, Any]] = [{"step": 0, "validation": best_val}]
    echo(f"step 0 validation reward {best_val['reward']:.4f} ties/wins {best_val['ties_or_wins']:.2f}")
    adv_sq = 1e-4
    step = 0
    deadline = time.time() + cfg.minutes * 60
    recent: list[float] = []
    while not distributed.any_rank(time.time() >= deadline):
        inst = train_set[int(rng.integers(len(train_set)))]
        tensors = _tensors(inst)
        dist = torch.distributions.Categorical(logits=policy(*tensors) / cfg.explore_temperature)
        actions = dist.sample((cfg.samples,))  # (S, n, heads)
        logp = dist.log_prob(actions).sum(dim=(1, 2))
        seed = int(rng.integers(len(inst.standards)))
        reward = torch.tensor([
            -solve_with_actions(inst.problem, inst.inputs, a.numpy(), cfg.evaluations, seed=seed).best_fitness
            / inst.standards[seed] for a in actions], dtype=torch.float32)
        b = baseline(*tensors)
        adv = (leave_one_out_advantage(reward) if cfg.advantage == "leave-one-out" else reward - b).detach()
        adv_sq = 0.99 * adv_sq + 0.01 * distributed.sum_values([float((adv**2).mean())])[0] / world.size
        loss = -(adv / np.sqrt(adv_sq) * logp).mean() + cfg.baseline_weight / 2 * ((reward - b) ** 2).mean()
        if start_policy is not None:
            start_dist = torch.distributions.Categorical(logits=start_policy(*tensors) / cfg.explore_temperature)
            loss = loss + cfg.anchor * torch.distributions.kl_divergence(dist, start_dist).sum()
        opt.zero_grad()
        loss.backward()
        distributed.average_gradients(params)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        recent.append(float(reward.mean()))
        if main and step % cfg.validate_every == 0:
            val = validate(policy, val_set, val_evaluations)
            if val["reward"] > best_val["reward"]:
                best_val, best_state, best_step = val, copy.deepcopy(policy.state_dict()), step
            log.append({"step": step, "minutes": (time.time() - start) / 60, "train_reward": float(np.mean(recent)),
                        "baseline": float(b.detach()), "validation": val})
            echo(f"step {step} {(time.time() - start) / 60:.1f} min train reward {np.mean(recent):.4f} "
                 f"validation {val['reward']:.4f} ties/wins {val['ties_or_wins']:.2f} (best step {best_step})")
            recent = []
    last_policy = copy.deepcopy(policy.state_dict())
    if main:
        policy.load_state_dict(best_state)
    summary = {"config": asdict(cfg), "imitation": imitation, "steps": step, "best_step": best_step,
               "best_validation": best_val, "problems": {"train": len(train_set), "validation": len(val_set)},
               "prep_seconds": prep_s, "wall_minutes": (time.time() - start) / 60, "log": log, "ranks": world.size}
    return {"policy": policy, "baseline": baseline, "summary": summary, "last_policy": last_policy}


def export(result: dict[str, Any], stem: str | Path) -> tuple[Path, Path, Path]:
    """Write STEM.onnx (policy), STEM.pt (both state dicts + config) and STEM_train_log.json."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    config = result["summary"]["config"]
    onnx_path = export_policy(result["policy"], stem.with_suffix(".onnx"), pin=config.get("pin", True),
                              feature_evaluations=config.get("feature_evaluations", PAPER_FEATURE_EVALUATIONS))
    pt_path = stem.with_suffix(".pt")
    torch.save({"policy": result["policy"].state_dict(), "baseline": result["baseline"].state_dict(),
                "config": result["summary"]["config"]}, pt_path)
    log_path = stem.parent / f"{stem.name}_train_log.json"
    log_path.write_text(json.dumps(result["summary"], indent=1))
    return onnx_path, pt_path, log_path
