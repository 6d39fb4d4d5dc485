"""REINFORCE's policy gradient on REGAL's problems: how much of one step's gradient is signal.

Every REGAL training recipe of docs/results.md 14.4 ends at or below its imitation start, and the training reward of
the sampled actions never rises.  This script asks why without training: it holds one policy fixed (the shipped
checkpoint's ``regal.pt``, or ``--model``) and computes the policy gradient of ``--steps`` training steps exactly as
``onnx-sched train regal --advantage leave-one-out`` does -- one training problem and one seed of its pool per step,
``--samples`` actions sampled at ``--temperature``, the reward ``-o_a / o_s`` of REGAL's BRKGA with each, the loss
``-(advantage * log p).mean()`` -- and measures whether the steps agree on a direction:

* ``split-half cosine``: the steps split at random into two halves (``--splits`` times); the cosine of the two halves'
  mean gradients.  Zero when the steps share no direction, one when every step points the same way.
* the same for the **null control**: each step's advantages multiplied by random signs (the same BRKGA runs, the
  reward's link to the actions cut).  A real signal shows as a cosine above the control's.
* ``signal share``: the unbiased estimate of ``|E g|^2`` (``|mean|^2 - trace(cov) / M``) over ``E |g|^2``;
  ``steps for one signal``: ``trace(cov) / |E g|^2``, how many steps a mean gradient needs before its noise is no
  larger than its signal (with Adam's per-parameter steps the picture is the same in kind).

The table's title also gives the within-step reward spread (standard deviation of a step's rewards: same problem,
same seed, only the actions differ) and on how many heads a sampled action leaves the mode action; a last line
compares the mode action with the same action one head moved one level (same seed), and with itself under another
seed (``--one-head`` draws).

``--common-random-numbers`` draws BRKGA's Beta genes by inverse CDF from one uniform number each (a fixed count per
generation), instead of numpy's Beta sampler, whose draws consume a variable count of random numbers: then two
actions with the same seed share every draw of the genes they agree on, and differ only where their distributions
do.  It asks whether the within-step spread is the sampler's stream shifting or BRKGA's own sensitivity.  (This
script only: the library's BRKGA keeps numpy's sampler.)

    python benchmarks/regal_gradient_snr.py --steps 400 --temperature 1 --out benchmarks/regal_gradient_snr_t1.json
    python benchmarks/regal_gradient_snr.py --steps 400 --temperature 0.2 --out benchmarks/regal_gradient_snr_t02.json
    python benchmarks/regal_gradient_snr.py --steps 400 --temperature 1 --common-random-numbers \\
        --out benchmarks/regal_gradient_snr_t1_crn.json
    python benchmarks/regal_gradient_snr.py --steps 400 --temperature 0.2 --common-random-numbers \\
        --out benchmarks/regal_gradient_snr_t02_crn.json

The training problems are those of ``onnx-sched train regal`` (``--synthetic`` graphs of 50-150 ops and
``--copies`` noisy copies of each training corpus model), with ``--seed-pool`` seeds each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.progress import track
from rich.table import Table

from onnx_sched import brkga
from onnx_sched.models import CHECKPOINTS
from onnx_sched.models.inference.regal import solve_with_actions
from onnx_sched.models.inference.regal_features import PAPER_FEATURE_EVALUATIONS, n_node_features
from onnx_sched.models.training.checkpoint_io import load_checkpoint
from onnx_sched.models.training.regal_data import make_instances, split_graphs
from onnx_sched.models.training.regal_net import PolicyNet
from onnx_sched.models.training.regal_train import _tensors, leave_one_out_advantage


def load_policy(path: Path) -> tuple[PolicyNet, dict]:
    """The torch policy of a ``regal.pt`` checkpoint and its training config (devices, symmetry pin, ...);
    ``ValueError`` for a file that is no torch checkpoint or lacks a policy and a config."""
    saved = load_checkpoint(path, ("policy", "config"))
    cfg = saved["config"]
    devices = cfg.get("devices", 2)
    policy = PolicyNet(n_node_features(devices), devices, cfg["hidden"], cfg["rounds"])
    policy.load_state_dict(saved["policy"])
    return policy, cfg


#: Points of the tabulated Beta quantile functions of ``--common-random-numbers``.
QUANTILE_GRID = np.linspace(0.0, 1.0, 4097)


@lru_cache(maxsize=None)
def beta_quantiles(a: float, b: float) -> np.ndarray:
    """Beta(a, b)'s quantile function at :data:`QUANTILE_GRID`."""
    from scipy.special import betaincinv

    return betaincinv(a, b, QUANTILE_GRID)


def inverse_cdf_sample(self: brkga.GeneDistributions, rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` chromosomes, gene ``j`` the Beta(alpha_j, beta_j) quantile of its own uniform number (tabulated
    per distinct (alpha, beta): an action has at most (levels x levels) of them)."""
    u = rng.random((count, len(self.alpha)))
    out = u.copy()
    pairs, which = np.unique(np.stack([self.alpha, self.beta], axis=1), axis=0, return_inverse=True)
    which = which.reshape(-1)
    for j, (a, b) in enumerate(pairs):
        if a != 1.0 or b != 1.0:  # Beta(1, 1): the uniform number itself
            cols = np.flatnonzero(which == j)
            out[:, cols] = np.interp(u[:, cols], QUANTILE_GRID, beta_quantiles(float(a), float(b)))
    return out


def step_gradients(policy: PolicyNet, inst, seed: int, samples: int, temperature: float, evaluations: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One training step's policy gradient (flattened), the same with random-sign advantages, its rewards, and the
    mean number of heads where a sampled action leaves the mode action."""
    params = list(policy.parameters())
    logits = policy(*_tensors(inst))
    dist = torch.distributions.Categorical(logits=logits / temperature)
    actions = dist.sample((samples,))
    strayed = float((actions != logits.argmax(dim=2)).sum(dim=(1, 2)).float().mean())
    logp = dist.log_prob(actions).sum(dim=(1, 2))
    reward = torch.tensor([-solve_with_actions(inst.problem, inst.inputs, a.numpy(), evaluations, seed=seed)
                           .best_fitness / inst.standards[seed] for a in actions], dtype=torch.float32)
    adv = leave_one_out_advantage(reward)
    signs = torch.from_numpy(rng.choice([-1.0, 1.0], size=samples).astype(np.float32))
    grads = []
    for a in (adv, adv * signs):
        g = torch.autograd.grad(-(a * logp).mean(), params, retain_graph=True)
        grads.append(torch.cat([x.reshape(-1) for x in g]).numpy().astype(np.float64))
    return grads[0], grads[1], reward.numpy(), strayed


def one_head_changes(policy: PolicyNet, instances: list, count: int, evaluations: int,
                     rng: np.random.Generator) -> dict[str, float]:
    """How far one head moved one level moves the reward: the mode action against the same action with one random
    head one level up or down, same problem and seed, on ``count`` draws; against it, the same mode action run with
    two different seeds."""
    head_moves, seed_moves = [], []
    with torch.no_grad():
        for _ in range(count):
            inst = instances[int(rng.integers(len(instances)))]
            logits = policy(*_tensors(inst))
            mode, levels = logits.argmax(dim=2).numpy(), int(logits.shape[2])
            moved = mode.copy()
            op, head = int(rng.integers(mode.shape[0])), int(rng.integers(mode.shape[1]))
            moved[op, head] = moved[op, head] + 1 if moved[op, head] < levels - 1 else moved[op, head] - 1
            seed = int(rng.integers(len(inst.standards)))

            def reward(action: np.ndarray, s: int) -> float:
                run = solve_with_actions(inst.problem, inst.inputs, action, evaluations, seed=s)
                return -run.best_fitness / inst.standards[seed]

            base = reward(mode, seed)
            head_moves.append(abs(reward(moved, seed) - base))
            seed_moves.append(abs(reward(mode, seed + 1000) - base))
    return {"draws": count, "one_head_mean_abs_change": float(np.mean(head_moves)),
            "one_head_unchanged_share": float(np.mean(np.array(head_moves) == 0)),
            "other_seed_mean_abs_change": float(np.mean(seed_moves))}


def direction_stats(g: np.ndarray, splits: int, rng: np.random.Generator) -> dict[str, float]:
    """Split-half cosine (mean and spread over ``splits`` random halvings), signal share and steps for one signal
    of the per-step gradients ``g`` (steps x parameters)."""
    m = len(g)
    cosines = []
    for _ in range(splits):
        perm = rng.permutation(m)
        a, b = g[perm[: m // 2]].mean(axis=0), g[perm[m // 2:]].mean(axis=0)
        norms = np.linalg.norm(a) * np.linalg.norm(b)
        if norms > 0:  # a half of steps whose actions all scored the same has no gradient
            cosines.append(float(a @ b / norms))
    mean = g.mean(axis=0)
    trace_cov = float(((g - mean) ** 2).sum() / (m - 1))
    signal = float(mean @ mean) - trace_cov / m  # unbiased |E g|^2
    power = float((g ** 2).sum(axis=1).mean())  # E |g|^2
    return {"split_half_cosine": float(np.mean(cosines)) if cosines else float("nan"),
            "split_half_cosine_std": float(np.std(cosines)) if cosines else float("nan"),
            "signal_share": signal / power, "steps_for_one_signal": trace_cov / signal if signal > 0 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=CHECKPOINTS / "regal.pt", help="A regal.pt checkpoint (torch).")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--evaluations", type=int, default=5000)
    ap.add_argument("--synthetic", type=int, default=60)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--seed-pool", type=int, default=2)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--one-head", type=int, default=50, help="Draws of the one-head-moved comparison (0: none).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--common-random-numbers", action="store_true",
                    help="Draw BRKGA's Beta genes by inverse CDF, one uniform number each (see the docstring).")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.steps < 4 or args.samples < 2 or not args.temperature > 0:
        print("regal_gradient_snr: needs --steps >= 4, --samples >= 2 and --temperature > 0", file=sys.stderr)
        return 2
    if args.common_random_numbers:
        brkga.GeneDistributions.sample = inverse_cdf_sample  # this process only
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    started = time.time()
    try:
        policy, trained = load_policy(args.model)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:  # missing, no checkpoint, another network's
        print(f"regal_gradient_snr: {args.model}: not a REGAL regal.pt checkpoint ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0][:160] if str(exc) else ''})", file=sys.stderr)
        return 2
    graphs = split_graphs("train", args.synthetic, args.copies, 50, 150, 0)
    instances = make_instances(graphs, args.evaluations, echo=lambda s: None, pin=trained.get("pin", False),
                               seeds=args.seed_pool, n_devices=trained.get("devices", 2),
                               feature_evaluations=trained.get("feature_evaluations", PAPER_FEATURE_EVALUATIONS))
    real, null, rewards, strayed = [], [], [], []
    for _ in track(range(args.steps), description="policy gradients"):
        inst = instances[int(rng.integers(len(instances)))]
        g, g0, r, off = step_gradients(policy, inst, int(rng.integers(args.seed_pool)), args.samples, args.temperature,
                                  args.evaluations, rng)
        real.append(g)
        null.append(g0)
        rewards.append(r)
        strayed.append(off)
    rows = {"leave-one-out advantage": direction_stats(np.array(real), args.splits, rng),
            "null control (random signs)": direction_stats(np.array(null), args.splits, rng)}
    one_head = one_head_changes(policy, instances, args.one_head, args.evaluations, rng) if args.one_head else None
    r = np.array(rewards)
    spread = float(np.mean(r.std(axis=1)))
    crn = ", common random numbers" if args.common_random_numbers else ""
    table = Table(title=f"REINFORCE policy gradient of {args.model.name}, {args.steps} steps x {args.samples} actions, "
                        f"temperature {args.temperature}{crn} (a sample leaves the mode on {np.mean(strayed):.1f} "
                        "heads); "
                        f"within-step reward spread {spread:.4f}, mean reward {r.mean():.4f}")
    for col in ("gradient", "split-half cosine", "signal share", "steps for one signal"):
        table.add_column(col)
    for name, s in rows.items():
        steps = s["steps_for_one_signal"]
        table.add_row(name, f"{s['split_half_cosine']:+.4f} +- {s['split_half_cosine_std']:.4f}",
                      f"{s['signal_share']:+.5f}", "no signal" if steps is None else f"{steps:,.0f}")
    Console().print(table)
    if one_head:
        print(f"one head moved one level (mode action, same seed), {one_head['draws']} draws: mean |reward change| "
              f"{one_head['one_head_mean_abs_change']:.4f} (no change on {one_head['one_head_unchanged_share']:.0%}); "
              f"the same action with another seed: {one_head['other_seed_mean_abs_change']:.4f}")
    result = {"command": " ".join(["python", "benchmarks/regal_gradient_snr.py", *(argv or sys.argv[1:])]),
              "model": str(args.model), "steps": args.steps, "samples": args.samples,
              "temperature": args.temperature, "common_random_numbers": args.common_random_numbers,
              "problems": len(instances), "mean_reward": float(r.mean()), "within_step_reward_std": spread,
              "heads_off_mode": float(np.mean(strayed)), "rows": rows, "one_head": one_head,
              "seconds": time.time() - started}
    if args.out:
        tmp = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
