"""REGAL (paper 003), inference: the policy network through ONNX Runtime, its actions
dequantised into per-gene Beta distributions and elite biases, and BRKGA run with them.
numpy + onnxruntime only.

Actions (section 3.3, eq. 6; appendix A.2).  The network gives every op ``v``
independent categorical distributions over ``k`` levels (``regal.onnx`` output
``logits``, shape ``(n, heads, k)``), one pair (mean level ``m``, variance level ``v``)
per gene group of the op, then one crossover level ``c``:

* groups ``0 .. D-1``: the op's affinity gene for device ``d``;
* group ``D``: the op's priority gene;
* groups ``D+1 .. 2D``: the transfer genes of the tensors the op produces, to device ``d``;
* head ``2 (2D + 1)``: the elite bias of all the op's genes.

Dequantisation (A.2): ``mu = (m+1)/(k+1)``, ``sigma^2 = mu (1-mu) (v+1)/(k+1)``,
``beta = mu (1-mu)^2 / sigma^2 - 1 + mu``, ``alpha = beta mu / (1-mu)``,
``crossover = 0.5 (1 + c/k)``.  With ``k = 5`` the levels (2, 1, 2) are exactly standard
BRKGA (Beta(1, 1), rho 0.7).  Transfer genes of graph inputs (no producer op) keep
standard BRKGA's uniform distribution and rho 0.7.

REGAL with ``K`` evaluations (A.1): the feature run (uniform BRKGA for ``F`` evaluations: the paper's 400, or the
one population of the checkpoint's ``feature_evaluations`` metadata and of the feature prior,
:mod:`onnx_sched.models.inference.regal_features`) then BRKGA with the predicted distributions for the other
``K - F``, its first population seeded with the feature run's elites.  Inference takes the most likely level of
every head (the mode action); ``sample=True`` draws one action from the policy instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.brkga import BrkgaParams, BrkgaResult, GeneDistributions, brkga
from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.models import CHECKPOINTS
from onnx_sched.models.inference.regal_features import (
    FEATURE_EVALUATIONS,
    PAPER_FEATURE_EVALUATIONS,
    RegalInputs,
    fix_symmetry,
    position_column,
    prepare,
)

__all__ = [
    "CHECKPOINT",
    "LEVELS",
    "STANDARD_LEVELS",
    "RegalPolicy",
    "RegalRun",
    "checkpoint_for",
    "dequantise_beta",
    "dequantise_crossover",
    "feature_prior",
    "gene_distributions",
    "load_policy",
    "n_heads",
    "run_regal",
    "solution_action",
    "solve_with_actions",
    "standard_action",
]

CHECKPOINT = CHECKPOINTS / "regal.onnx"

#: Quantisation levels k of every action head.
LEVELS = 5

#: The level of each head that gives standard BRKGA (Beta(1, 1), rho 0.7) with k = 5.
STANDARD_LEVELS = {"mean": 2, "variance": 1, "crossover": 2}


def n_heads(n_devices: int) -> int:
    """Categorical heads per op: (mean, variance) for 2D + 1 gene groups, plus the crossover."""
    return 2 * (2 * n_devices + 1) + 1


def dequantise_beta(m: np.ndarray, v: np.ndarray, k: int = LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """Levels (m, v) in 0..k-1 -> Beta (alpha, beta), paper 003 A.2.

    >>> dequantise_beta(np.array([2]), np.array([1]))  # mean 1/2, variance 1/12: uniform
    (array([1.]), array([1.]))
    """
    mu = (np.asarray(m, dtype=np.float64) + 1.0) / (k + 1.0)
    var = mu * (1.0 - mu) * (np.asarray(v, dtype=np.float64) + 1.0) / (k + 1.0)
    beta = mu * (1.0 - mu) ** 2 / var - 1.0 + mu
    return beta * mu / (1.0 - mu), beta


def dequantise_crossover(c: np.ndarray, k: int = LEVELS) -> np.ndarray:
    """Level c in 0..k-1 -> elite bias ``0.5 (1 + c/k)`` (paper 003 A.2)."""
    return 0.5 * (1.0 + np.asarray(c, dtype=np.float64) / k)


def standard_action(n_ops: int, n_devices: int) -> np.ndarray:
    """The action of standard BRKGA (Beta(1, 1) genes, rho 0.7) for every op, (n_ops, heads) levels."""
    groups = [STANDARD_LEVELS["mean"], STANDARD_LEVELS["variance"]] * (2 * n_devices + 1)
    levels = groups + [STANDARD_LEVELS["crossover"]]
    return np.tile(np.asarray(levels, dtype=np.int64), (n_ops, 1))


def feature_prior(inputs: RegalInputs, n_devices: int, k: int = LEVELS) -> np.ndarray:
    """A hand-written action read off the features: standard BRKGA's levels, except that every
    op's priority mean is its expected schedule position in the feature run (level
    ``round(position (k - 1))``) and its elite bias is 0.5 (crossover level 0).  The decoder
    runs the ready op with the highest priority first, so this prefers the ops the feature
    run schedules late, the ones deeper in the graph: a depth-first lean (the reverse rule
    gains nothing on the validation problems).

    Not in the paper: it is the imitation target that starts the policy's training
    (``RegalTrainConfig.imitation_steps``) and an ablation row of ``benchmarks/regal_eval.py``,
    so the tables show what REINFORCE adds to it.  Chosen among a few such rules on the
    validation problems (model card).
    """
    actions = standard_action(inputs.x.shape[0], n_devices)
    position = inputs.x[:, position_column(n_devices)].astype(np.float64)
    actions[:, 2 * n_devices] = np.clip(np.rint(position * (k - 1)), 0, k - 1)
    actions[:, -1] = 0
    return actions


def solution_action(problem: dm.DeviceMemoryProblem, keys: np.ndarray, k: int = LEVELS,
                    crossover: int = 0) -> np.ndarray:
    """The action whose modes encode the solution ``keys``: per op, affinity mean level ``k - 1`` on the
    solution's device and 0 on the others; priority mean level from the op's place among the solution's
    steps (the first step the top level: the decoder runs the ready op or transfer of highest priority
    first, on one scale); the transfers of the op's outputs to a device at the level of their place (their
    mean, when several); the lowest variance level for all of these; the genes of transfers the solution
    does not make keep standard BRKGA's uniform distribution (exactly for ``k`` = 5 or 17); crossover level
    ``crossover`` (0: elite bias 0.5).

    Not in the paper: the imitation target ``best-known`` of training (a BRKGA 50K solution per training
    problem) and the oracle rows of ``benchmarks/regal_ceiling.py``, which show what the action space can
    reach when the policy knows a near-optimal solution.
    """
    n, nd = problem.graph.n_ops, problem.n_devices
    placement, steps = dm.decode_keys(problem, keys)
    top = np.linspace(k - 1, 0, len(steps)) if len(steps) > 1 else np.full(len(steps), k - 1.0)
    op_level = np.empty(n)
    moved, count = np.zeros((n, nd)), np.zeros((n, nd))  # per producer op and destination
    producer = problem.graph.tensor_producer
    for level, step in zip(top, steps):
        if step.kind == "op":
            op_level[step.item] = level
        elif producer[step.item] >= 0:
            moved[producer[step.item], step.device] += level
            count[producer[step.item], step.device] += 1
    actions = standard_action(n, nd)
    actions[:, 1:2 * (2 * nd + 1):2] = round((k + 1) / 3 - 1)  # variance 1/12 at mean 1/2: uniform
    actions[:, 2 * nd + 2:-1:2] = (k - 1) // 2  # mean 1/2
    for d in range(nd):
        actions[:, 2 * d] = np.where(placement == d, k - 1, 0)
        actions[:, 2 * d + 1] = 0
        ran = count[:, d] > 0
        actions[ran, 2 * (nd + 1 + d)] = np.rint(moved[ran, d] / count[ran, d])
        actions[ran, 2 * (nd + 1 + d) + 1] = 0
    actions[:, 2 * nd] = np.rint(op_level)
    actions[:, 2 * nd + 1] = 0
    actions[:, -1] = crossover
    return actions


def gene_distributions(problem: dm.DeviceMemoryProblem, actions: np.ndarray, symmetry_op: int | None,
                       k: int = LEVELS) -> GeneDistributions:
    """Per-gene Beta and elite bias of the chromosome from per-op levels ``actions`` (n, heads);
    ``symmetry_op`` (if not None) pinned to device 0."""
    n, nd = problem.graph.n_ops, problem.n_devices
    actions = np.asarray(actions, dtype=np.int64)
    if actions.shape != (n, n_heads(nd)):
        raise ValueError(f"actions must be (ops, heads) = ({n}, {n_heads(nd)}), got {actions.shape}")
    groups = 2 * nd + 1
    alpha_g, beta_g = dequantise_beta(actions[:, 0:2 * groups:2], actions[:, 1:2 * groups:2], k)  # (n, groups)
    rho_op = dequantise_crossover(actions[:, -1], k)
    size = dm.chromosome_size(problem)
    alpha, beta, rho = np.ones(size), np.ones(size), np.full(size, 0.7)
    aff = slice(0, n * nd)
    alpha[aff], beta[aff] = alpha_g[:, :nd].reshape(-1), beta_g[:, :nd].reshape(-1)
    rho[aff] = np.repeat(rho_op, nd)
    pri = slice(n * nd, n * nd + n)
    alpha[pri], beta[pri], rho[pri] = alpha_g[:, nd], beta_g[:, nd], rho_op
    slot = problem.transfer_slot
    producer = np.asarray(problem.graph.tensor_producer, dtype=np.int64)
    moved = np.flatnonzero((slot >= 0) & (producer >= 0))
    genes = (n * nd + n + slot[moved] * nd)[:, None] + np.arange(nd)  # (tensors, D)
    op = producer[moved]
    alpha[genes], beta[genes] = alpha_g[op, nd + 1:], beta_g[op, nd + 1:]
    rho[genes] = rho_op[op, None]
    dist = GeneDistributions(alpha=alpha, beta=beta, rho=rho)
    return dist if symmetry_op is None else fix_symmetry(problem, dist, symmetry_op)


def solve_with_actions(problem: dm.DeviceMemoryProblem, inputs: RegalInputs, actions: np.ndarray, evaluations: int,
                       seed: int, deadline: Deadline | None = None, levels: int = LEVELS) -> BrkgaResult:
    """BRKGA with the dequantised ``actions`` (``levels`` per head) for what the feature run left of
    ``evaluations``, seeded with the feature run's elites."""
    params = BrkgaParams()
    features = inputs.warm.evaluations
    left = evaluations - features
    if left < params.population:
        raise ValueError(f"regal needs at least {features + params.population} evaluations "
                         f"({features} for its features, then one population), got {evaluations}")
    dist = gene_distributions(problem, actions, inputs.symmetry_op if inputs.pinned else None, levels)
    return brkga(lambda keys: dm.fitness(problem, dm.evaluate_keys(problem, keys)), dm.chromosome_size(problem),
                 BrkgaParams(evaluations=left), dist, seed=seed, initial=inputs.warm.population[:params.elites],
                 deadline=deadline)


class RegalPolicy:
    """The trained policy network, run with ONNX Runtime."""

    def __init__(self, path: str | Path | None = None) -> None:
        import onnxruntime as ort

        path = CHECKPOINT if path is None else path
        if not Path(path).is_file():
            raise FileNotFoundError(f"REGAL checkpoint {path} missing: train it with onnx-sched train regal (see "
                                    "models/checkpoints/regal.md), or run the pass with --option prior=true")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT's InvalidProtobuf and friends: a file that is no ONNX model
            why = str(exc).strip()[:200]
            raise ValueError(f"{path}: not a REGAL checkpoint ONNX Runtime can load ({why})") from None
        meta = self.session.get_modelmeta().custom_metadata_map
        self.devices = int(meta.get("devices", 2))
        self.levels = int(meta.get("levels", LEVELS))
        self.pin = meta.get("pin", "true").lower() == "true"  # trained with the symmetry pin (older files: yes)
        #: the feature run the policy was trained on (files before session 50: the paper's 400)
        features = meta.get("feature_evaluations", str(PAPER_FEATURE_EVALUATIONS))
        if not features.isdigit() or int(features) < 1:
            raise ValueError(f"{path}: REGAL checkpoint metadata feature_evaluations={features!r} is not a positive "
                             "integer")
        self.feature_evaluations = int(features)

    def logits(self, inputs: RegalInputs) -> np.ndarray:
        """(n, heads, k) logits of the per-op categorical actions."""
        (out,) = self.session.run(None, {"x": inputs.x, "edge_x": inputs.edge_x, "src": inputs.src, "dst": inputs.dst})
        return out.astype(np.float64)

    def actions(self, inputs: RegalInputs, rng: np.random.Generator | None = None) -> np.ndarray:
        """Mode action (``rng`` None) or one action sampled from the policy, (n, heads) levels."""
        logits = self.logits(inputs)
        if rng is None:
            return logits.argmax(axis=2)
        p = np.exp(logits - logits.max(axis=2, keepdims=True))
        cdf = np.cumsum(p / p.sum(axis=2, keepdims=True), axis=2)
        return np.minimum((cdf < rng.random(cdf.shape[:2])[..., None]).sum(axis=2), cdf.shape[2] - 1)


def checkpoint_for(n_devices: int) -> Path:
    """The shipped checkpoint for ``n_devices`` devices: ``regal.onnx`` for 2, ``regal_d{n}.onnx`` otherwise.

    >>> checkpoint_for(3).name
    'regal_d3.onnx'
    """
    return CHECKPOINT if n_devices == 2 else CHECKPOINTS / f"regal_d{n_devices}.onnx"


def load_policy(path: str | Path | None = None, n_devices: int = 2) -> RegalPolicy:
    """The policy at ``path`` (default: the shipped checkpoint for ``n_devices``), loaded once per path; a missing
    file is a one-line ``ValueError`` (for the default, naming the train command for ``n_devices``)."""
    if path is None:
        path = checkpoint_for(n_devices)
        if not path.is_file():
            raise ValueError(f"REGAL checkpoint {path} missing: train it with onnx-sched train regal --devices "
                             f"{n_devices} (see models/checkpoints/regal.md), or run the pass with --option prior=true")
    return _load_policy(str(path))


@lru_cache(maxsize=4)
def _load_policy(path: str) -> RegalPolicy:
    try:
        return RegalPolicy(path)
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None


#: Of the time left to :func:`run_regal`, the most its feature run may take: the rest is for the policy's BRKGA.
FEATURE_SHARE = 0.5
#: What the policy's forward pass (ONNX Runtime) costs per op and edge: 1.7-2.4 us measured on graphs of 430-20,872
#: ops and up to 615,000 edges (1.4 s on the largest); with less time left than this estimate it is not run.
FORWARD_SECONDS_PER_ELEMENT = 3e-6


@dataclass(frozen=True)
class RegalRun:
    """REGAL's best chromosome and what it spent."""

    best_keys: np.ndarray
    best_fitness: float
    evaluations: int
    info: dict[str, Any]


def run_regal(problem: dm.DeviceMemoryProblem, policy: RegalPolicy | None, evaluations: int = 5000, seed: int = 0,
              sample: bool = False, deadline: Deadline | None = None, pin: bool | None = None) -> RegalRun:
    """Features, one policy action, BRKGA with it: ``evaluations`` in all (paper 003, A.1);
    ``pin``: hold the symmetry op on device 0 (see :func:`regal_features.prepare`); None: as the policy was trained.
    ``policy`` None takes :func:`feature_prior`'s action instead of a network's (the ablation without learning)."""
    if policy is not None and problem.n_devices != policy.devices:
        raise ValueError(f"the REGAL checkpoint was trained for {policy.devices} devices, the problem has "
                         f"{problem.n_devices}")
    pin = (policy is not None and policy.pin) if pin is None else pin
    inputs = prepare(problem, seed, None if deadline is None else Deadline(max(deadline.left(), 0.0) * FEATURE_SHARE),
                     pin, FEATURE_EVALUATIONS if policy is None else policy.feature_evaluations)
    warm = inputs.warm
    forward = 0.0 if policy is None else FORWARD_SECONDS_PER_ELEMENT * (len(inputs.src) + len(inputs.x))
    if deadline is not None and deadline.left() <= forward:  # a huge graph: the feature run was all the time allowed
        best, spent, generations, action = warm, 0, 0, "none: no time left for the policy after the feature run"
    else:
        if policy is None:
            actions = feature_prior(inputs, problem.n_devices)
        else:
            actions = policy.actions(inputs, np.random.default_rng(seed) if sample else None)
        result = solve_with_actions(problem, inputs, actions, evaluations, seed, deadline)
        best = result if result.best_fitness <= warm.best_fitness else warm
        spent, generations = result.evaluations, result.generations
        action = "feature-prior" if policy is None else "sample" if sample else "mode"
    used = warm.evaluations + spent
    return RegalRun(best_keys=best.best_keys, best_fitness=best.best_fitness, evaluations=used,
                    info={"evaluations": used, "feature_evaluations": warm.evaluations, "generations": generations,
                          "pinned": pin, "action": action})
