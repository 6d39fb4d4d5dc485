"""List-scheduling priorities for the makespan passes (paper 001 D.1) and Gumbel sampling of them.

Higher value = scheduled earlier.  :func:`cp_priority` (critical path),
:func:`mopnr_priority` (most operations remaining) and :func:`spt_priority`
(shortest processing time) are the classical rules of ``list_rules``;
:func:`cp_logits` and :func:`gumbel_priorities` give the sampled priorities of
``ga``, ``learned`` and the benchmarks (paper 001 eq. 7).

They are heuristics, not part of the cost model, so they live with the passes
(the leading underscore keeps the pass registry from loading this module as a
pass).  :func:`upward_rank` (HEFT's rank, the critical path these rules build
on) stays in :mod:`onnx_sched.cost.makespan.paths` because the cost model needs
it too; it is imported here so the passes find every priority in one place.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost.makespan.paths import upward_rank
from onnx_sched.cost.makespan.problem import MakespanProblem

__all__ = ["cp_logits", "cp_priority", "gumbel_priorities", "mopnr_priority", "spt_priority", "upward_rank"]


def cp_priority(problem: MakespanProblem) -> np.ndarray:
    """Critical path (paper 001 D.1): longest duration path from the op to a sink (incl. transfers)."""
    return upward_rank(problem)


def mopnr_priority(problem: MakespanProblem) -> np.ndarray:
    """Most operations remaining (paper 001 D.1): ops on the longest path to a sink; ties by critical path."""
    ops = upward_rank(problem, np.ones(problem.n_ops), comm=False)
    cp = cp_priority(problem)
    return ops + cp / (2.0 * max(float(cp.max(initial=0.0)), 1e-300))


def spt_priority(problem: MakespanProblem) -> np.ndarray:
    """Shortest processing time (paper 001 D.1): inverse of the op's (mean) duration."""
    return 1.0 / np.maximum(problem.mean_durations(), 1e-300)


def cp_logits(problem: MakespanProblem, temperature: float = 0.3) -> np.ndarray:
    """Critical path over ``temperature`` x the mean op duration, as logits for Gumbel sampling.

    With unit Gumbel noise, ops whose critical paths differ by less than about
    ``temperature`` mean durations swap often.  0.3 was the best of 0.03 - 3 for
    best-of-256 sampling on 1000-op ER / SBM graphs (3 seeds each; on layered
    graphs any noise lost about 1 % to plain list-cp).
    """
    cp = cp_priority(problem)
    scale = float(problem.mean_durations().mean()) or 1.0
    return cp / (temperature * scale)


def gumbel_priorities(logits: np.ndarray, rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` priority vectors ``logits + Gumbel noise`` (paper 001 eq. 7, Gumbel-top-k)."""
    return np.asarray(logits, np.float64)[None, :] + rng.gumbel(size=(k, len(logits)))
