"""Node features of paper 001 (appendix F.3) for the makespan priority sampler -- numpy only.

Per op ``v`` of a :class:`~onnx_sched.cost.makespan.MakespanProblem`:

* duration ``delta(v)`` (mean over the units the op may use);
* resource demand ``rho(v)`` (a zero column when every demand is 1, as the
  paper drops it);
* one-hot machine type, padded to ``MAX_TYPES`` columns (all zero for device
  problems, where an op has no fixed type);
* critical-path duration from ``v`` to a sink and from a source to ``v``;
* *type pressure*: the work of the op's machine type over its capacity (this
  project's addition; it tells the encoder which type is the bottleneck).

Each column is divided by its maximum over the graph (F.3), then the 20
Laplacian positional encodings of :func:`onnx_sched.models.inference.features.laplacian_pe`
are appended.  The relation matrix for the Topoformer's masks is
:func:`onnx_sched.models.inference.features.relation_matrix`: the encoder is the one of
:mod:`onnx_sched.models.training.topoformer`, only the input columns differ.
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.cost.makespan.paths import _downward
from onnx_sched.cost.makespan.problem import _topo
from onnx_sched.models.inference.features import PE_DIM, EncoderInputs, laplacian_pe, relation_matrix
from onnx_sched.passes.makespan._priorities import cp_logits, upward_rank

__all__ = [
    "FEATURE_NAMES",
    "MAX_TYPES",
    "PRIORS",
    "makespan_encoder_inputs",
    "makespan_features",
    "n_makespan_features",
    "prior_logits",
]

MAX_TYPES = 4
FEATURE_NAMES = (
    "makespan:duration",
    "makespan:demand",
    *(f"makespan:type{j}" for j in range(MAX_TYPES)),
    "makespan:cp_to_sink",
    "makespan:cp_from_source",
    "makespan:type_pressure",
)


def makespan_features(problem: ms.MakespanProblem) -> np.ndarray:
    """``(n, len(FEATURE_NAMES))`` float32 features, each column max-normalised."""
    n = problem.n_ops
    w = problem.mean_durations()
    cols = [w, problem.demand.astype(np.float64) if (problem.demand != 1).any() else np.zeros(n)]
    onehot = np.zeros((n, MAX_TYPES))
    pressure = np.zeros(n)
    unit = problem.fixed_unit
    if unit is not None:
        if problem.n_units > MAX_TYPES:
            raise ValueError(f"the makespan sampler supports at most {MAX_TYPES} machine types, got {problem.n_units}")
        onehot[np.arange(n), unit] = 1.0
        load = np.bincount(unit, weights=w * problem.demand, minlength=problem.n_units) / problem.capacity
        pressure = load[unit]
    to_sink = upward_rank(problem)
    preds = problem.graph.op_preds
    from_source = _downward(_topo(problem), np.ascontiguousarray(w), preds.indptr, preds.indices)
    x = np.column_stack([cols[0], cols[1], onehot, to_sink, from_source, pressure])
    peak = np.abs(x).max(axis=0) if n else np.zeros(x.shape[1])
    x = np.divide(x, peak, out=np.zeros_like(x), where=peak > 0)
    return x.astype(np.float32)


def n_makespan_features(pe_dim: int = PE_DIM) -> int:
    return len(FEATURE_NAMES) + pe_dim


def makespan_encoder_inputs(problem: ms.MakespanProblem, pe_dim: int = PE_DIM, relations: bool = True) -> EncoderInputs:
    """Features + Laplacian PE and the relation codes, ready for the Topoformer."""
    g = problem.graph
    x = np.concatenate([makespan_features(problem), laplacian_pe(g, pe_dim)], axis=1)
    rel = relation_matrix(g) if relations else np.zeros((0, 0), np.int8)
    return EncoderInputs(x=np.ascontiguousarray(x, dtype=np.float32), rel=rel)


PRIORS = ("none", "cp")


def prior_logits(problem: ms.MakespanProblem, prior: str) -> np.ndarray:
    """Logits added to the network output: zeros (paper 001) or the critical-path logits (``"cp"``)."""
    if prior == "none":
        return np.zeros(problem.n_ops)
    if prior == "cp":
        return cp_logits(problem)
    raise ValueError(f"unknown prior {prior!r}; choose from {PRIORS}")
