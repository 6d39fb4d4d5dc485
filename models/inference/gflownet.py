"""Sampling schedules from the GFlowNet forward policy (paper 002, 2.3 and 3) -- numpy + ONNX Runtime.

:func:`sample_trajectories` rolls out ``count`` trajectories of the
:class:`~onnx_sched.models.inference.gflownet_env.ScheduleEnv` in batches: at
every step the policy scores all (op, lane) actions, invalid ones are masked,
and one action per trajectory is drawn (Gumbel-max, so sampling is exact).  The
policy is any ``step_fn(node, pair, mask) -> (B, n, L)`` logits for one temperature
(entries of masked actions are ignored):
the exported ONNX network at optimize time (:meth:`GFlowNetModel.step_fn`: the
encoder once, the head per step), the torch network during training, or
:func:`uniform_logits`.  It returns the finished chain schedules with
their proxy speedups and, for training, per trajectory ``sum log P_F`` and
``sum log P_B`` and (``record=True``) the observed states and actions.

Sampling costs one encoder pass per problem and temperature and ``n`` head
passes per batch.  With a ``deadline``, each batch after the first holds only
the trajectories that the last one's time per trajectory says end in time, and
the first batch shrinks to the number its first step says fit (at least one
trajectory always completes): on a graph of thousands of ops one batch of 100
takes longer than a typical time limit.  With time to spare the draws are the
same as without one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.chains import Chains
from onnx_sched.deadline import Deadline
from onnx_sched.models.inference.features import check_encoder_memory, relation_matrix
from onnx_sched.models.inference.gflownet_env import ScheduleEnv, env_arrays
from onnx_sched.models.inference.mask_rewrite import arithmetic_where
from onnx_sched.models.inference.timed_run import run_by
from onnx_sched.models.inference.topoformer_onnx import CheckpointMissingError

__all__ = ["DEFAULT_CHECKPOINT", "GFlowNetModel", "Rollouts", "StepFn", "head_path", "masked_log_softmax", "ready_rows",
           "sample_trajectories", "scatter_logits", "uniform_logits"]

StepFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def head_path(path: str | os.PathLike[str]) -> str:
    """Where the head of the encoder export at ``path`` lives: ``x.onnx`` -> ``x_head.onnx``."""
    p = os.fspath(path)
    return p[:-5] + "_head.onnx" if p.endswith(".onnx") else p + "_head.onnx"


def _default_checkpoint() -> Path:
    from onnx_sched.models import CHECKPOINTS

    return CHECKPOINTS / "gflownet_makespan.onnx"


DEFAULT_CHECKPOINT = _default_checkpoint()


@dataclass(frozen=True, eq=False)
class Rollouts:
    """Finished trajectories: chains, proxy speedups, ``sum log P_F``, ``sum log P_B`` and, if recorded,
    per step the states (``node``, ``pair``, ``mask``) and the flat actions taken."""

    chains: Chains
    speedup: np.ndarray
    log_pf: np.ndarray
    log_pb: np.ndarray
    steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)


def masked_log_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax of ``(B, A)`` logits over the valid actions (``-inf`` elsewhere)."""
    z = np.where(mask, logits.astype(np.float64), -np.inf)
    top = z.max(axis=1, keepdims=True)
    return z - top - np.log(np.exp(z - top).sum(axis=1, keepdims=True))


def ready_rows(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(state, op)`` index pairs of the ops with at least one valid action: the only rows a policy scores."""
    return np.nonzero(mask.any(axis=-1))


def scatter_logits(mask: np.ndarray, rows: tuple[np.ndarray, np.ndarray], scores: np.ndarray) -> np.ndarray:
    """``(B, n, L)`` logits: ``scores`` (K, L) at the ready rows, ``-inf`` elsewhere."""
    out = np.full(mask.shape, -np.inf, np.float32)
    out[rows] = scores
    return out


def uniform_logits(node: np.ndarray, pair: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The uniform policy (every valid action equally likely)."""
    return np.zeros(pair.shape[:3], np.float32)


def sample_trajectories(problem: ms.MakespanProblem, step_fn: StepFn, count: int, *, batch: int = 100, seed: int = 0,
                        record: bool = False, deadline: Any = None, actions: str = "all") -> Rollouts:
    """Roll out up to ``count`` trajectories (see module docstring) with the action set ``actions`` of
    :class:`~onnx_sched.models.inference.gflownet_env.ScheduleEnv`: fewer when ``deadline`` ends the sampling, and
    none when the first step predicts that not even one trajectory would end before it."""
    rng = np.random.default_rng(seed)
    arrays = env_arrays(problem)
    parts, spd, lpf, lpb, steps = [], [], [], [], []
    done, per_trajectory = 0, 0.0  # seconds one trajectory of the last batch took
    while done < count:
        b = min(batch, count - done)
        if done and deadline is not None:
            b = min(b, int(deadline.left() / max(per_trajectory, 1e-9)))  # what ends before the deadline
            if b < 1:
                break
        t0 = time.perf_counter()
        env = ScheduleEnv(problem, b, arrays, actions=actions)
        log_pf, log_pb = np.zeros(b), np.zeros(b)
        while not env.done:
            node, pair, mask = env.observe()
            flat_mask = mask.reshape(b, -1)
            logp = masked_log_softmax(np.asarray(step_fn(node, pair, mask)).reshape(b, -1), flat_mask)
            action = np.argmax(logp + rng.gumbel(size=logp.shape), axis=1)
            log_pf += logp[np.arange(b), action]
            if record:
                steps.append((node, pair, mask, action))
            log_pb += env.step(action)
            if env.t == 1 and not done and deadline is not None:
                predicted = (time.perf_counter() - t0) * problem.n_ops
                if predicted > deadline.left() and b == 1:
                    break  # not even one trajectory ends in time: none (the caller falls back on its references)
                fits = _batch_that_fits(b, predicted, deadline.left())
                if fits < b:  # the first batch alone would overrun: start again with fewer trajectories
                    b, t0 = fits, time.perf_counter()
                    env = ScheduleEnv(problem, b, arrays, actions=actions)
                    log_pf, log_pb = np.zeros(b), np.zeros(b)
                    steps.clear()
        if not env.done:
            break
        parts.append(env.chains())
        spd.append(env.speedups())
        lpf.append(log_pf)
        lpb.append(log_pb)
        done += b
        per_trajectory = (time.perf_counter() - t0) / b
        if deadline is not None and deadline.expired():
            break
    if not parts:
        empty = np.zeros((0, problem.n_ops), np.int64)
        return Rollouts(Chains(empty, empty), np.zeros(0), np.zeros(0), np.zeros(0), [])
    return Rollouts(Chains.concat(parts), np.concatenate(spd), np.concatenate(lpf), np.concatenate(lpb), steps)


def _batch_that_fits(batch: int, predicted: float, left: float) -> int:
    """How many of ``batch`` trajectories fit in ``left`` seconds when all of them take ``predicted`` (at least 1).

    >>> _batch_that_fits(100, 20.0, 5.0), _batch_that_fits(100, 2.0, 5.0), _batch_that_fits(100, 20.0, 0.0)
    (25, 100, 1)
    """
    if predicted <= left:
        return batch
    return max(1, int(batch * max(left, 0.0) / predicted))


@dataclass(frozen=True, eq=False)
class GFlowNetModel:
    """An ONNX Runtime session of an exported GFlowNet forward policy."""

    path: str
    encoder: Any
    head: Any
    metadata: dict[str, str]

    @staticmethod
    def load(path: str | os.PathLike[str] | None = None) -> GFlowNetModel:
        p = Path(path or DEFAULT_CHECKPOINT).resolve()
        if not p.is_file():
            raise CheckpointMissingError(
                f"GFlowNet checkpoint {str(p)!r} not found; train one with 'onnx-sched train gflownet' "
                "(needs the [train] extra) or use another --method")
        return _load(str(p), p.stat().st_mtime_ns)

    @property
    def trained_sigma(self) -> float | None:
        """The one temperature a fixed-temperature policy (the PPO baseline) was trained at, else ``None``."""
        value = self.metadata.get("onnx_sched.sigma")
        return float(value) if value is not None else None

    @property
    def actions(self) -> str:
        """The action set the policy was trained with (``gflownet_env.ACTIONS``)."""
        return self.metadata.get("onnx_sched.actions", "all")

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.metadata["onnx_sched.encoder_config"])

    def step_fn(self, problem: ms.MakespanProblem, log_sigma: float, deadline: Deadline | None = None) -> StepFn:
        """The policy on ``problem`` at temperature ``exp(log_sigma)`` for :func:`sample_trajectories`; its
        encoder is stopped at ``deadline`` (:class:`~onnx_sched.errors.TimeLimitError`)."""
        check_encoder_memory(problem.n_ops, "gflownet")
        static = env_arrays(problem).static
        rel = relation_matrix(problem.graph)
        h, e = run_by(self.encoder, ["h", "e"], {"x": static, "rel": rel,
                                                 "log_sigma": np.full((1, 1), log_sigma, np.float32)},
                      deadline, "gflownet", problem.n_ops)

        def run(node: np.ndarray, pair: np.ndarray, mask: np.ndarray) -> np.ndarray:
            rows = ready_rows(mask)
            (scores,) = self.head.run(["logits"], {"h": h[rows[1]], "e": e, "node": node[rows], "pair": pair[rows]})
            return scatter_logits(mask, rows, scores)

        return run


@lru_cache(maxsize=4)
def _load(path: str, _mtime: int) -> GFlowNetModel:
    import onnxruntime as ort

    from onnx_sched.importers.onnx import load_model

    proto = load_model(path)  # one line for a file that is not ONNX
    meta = {p.key: p.value for p in proto.metadata_props}
    if meta.get("onnx_sched.objective") != "gflownet":
        raise ValueError(f"{path!r} is not a GFlowNet policy export (metadata onnx_sched.objective != 'gflownet')")
    if not os.path.isfile(head_path(path)):
        raise CheckpointMissingError(f"GFlowNet head {head_path(path)!r} (beside the encoder) not found")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")

    fast = arithmetic_where(proto).SerializeToString()
    encoder = ort.InferenceSession(fast, opts, providers=["CPUExecutionProvider"])
    head = ort.InferenceSession(head_path(path), opts, providers=["CPUExecutionProvider"])
    return GFlowNetModel(path=path, encoder=encoder, head=head, metadata=meta)
