"""Makespan attributes of synthetic graphs (paper 001 appendix C.3, paper 002 E.5).

:func:`makespan_attrs` ``(graph, seed, capacities=(1, 1, 4), duration_model=None) -> MakespanAttrs``

* ``durations``: paper 001's affine model ``round(100 m(v)) + 1`` (int values,
  float64 array) from the op's output memory ``m(v)`` in memory units
  (``graph.metadata["mem_units"]`` when the generator stored it, else
  ``op_output_bytes / unit_bytes``); or paper 002's ``U(0, 1)`` runtimes
  (``duration_model="uniform"``; the default for the Watts-Strogatz and
  Barabasi-Albert families, read from ``graph.metadata["duration_model"]``).
* ``machine_type``: ``Pr(type = j)`` proportional to ``capacities[j]``
  (1/6, 1/6, 2/3 for the default ``(1, 1, 4)``).
* ``demand``: resources an op holds on its machine type while it runs; 1 for
  every op (paper 001's computation-graph setting, where ``rho(v) = 1``).

Deterministic in ``seed`` (a generator separate from the graph's own seed).
A makespan helper consumes :class:`MakespanAttrs`; the names are stable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.synth.common import DEFAULT_UNIT_BYTES

__all__ = ["DURATION_MODELS", "MakespanAttrs", "affine_durations", "makespan_attrs"]

DURATION_MODELS = ("affine", "uniform")


@dataclass(frozen=True, eq=False)
class MakespanAttrs:
    """Per-op scheduling data for the makespan objective."""

    durations: np.ndarray  # float64 (n,), > 0 for "affine", in [0, 1) for "uniform"
    machine_type: np.ndarray  # int64 (n,), index into capacities
    capacities: tuple[int, ...]  # resources available per machine type (lambda(j))
    demand: np.ndarray  # int64 (n,), resources an op needs on its machine type

    def __post_init__(self) -> None:
        n = len(self.durations)
        if len(self.machine_type) != n or len(self.demand) != n:
            raise ValueError(
                f"MakespanAttrs: durations/machine_type/demand lengths differ "
                f"({n}, {len(self.machine_type)}, {len(self.demand)})"
            )
        if n and (self.machine_type.min() < 0 or self.machine_type.max() >= len(self.capacities)):
            raise ValueError(f"MakespanAttrs: machine type outside [0, {len(self.capacities)})")
        for arr in (self.durations, self.machine_type, self.demand):
            arr.setflags(write=False)


def affine_durations(mem_units: np.ndarray) -> np.ndarray:
    """Paper 001 eq. 17: ``round(100 m) + 1`` (round half up) as float64."""
    m = np.asarray(mem_units, dtype=np.float64)
    return np.floor(100.0 * m + 0.5) + 1.0


def _mem_units(graph: Graph) -> np.ndarray:
    units = graph.metadata.get("mem_units") if graph.metadata else None
    if units is not None and len(units) == graph.n_ops:
        return np.asarray(units, dtype=np.float64)
    unit_bytes = int(graph.metadata.get("unit_bytes", DEFAULT_UNIT_BYTES)) if graph.metadata else DEFAULT_UNIT_BYTES
    return graph.op_output_bytes.astype(np.float64) / unit_bytes


def makespan_attrs(
    graph: Graph,
    seed: int,
    capacities: tuple[int, ...] = (1, 1, 4),
    duration_model: str | None = None,
) -> MakespanAttrs:
    """Durations, machine types and demands for ``graph`` (see module docstring)."""
    caps = tuple(int(c) for c in capacities)
    if not caps or min(caps) <= 0:
        raise ValueError(f"makespan_attrs: capacities must be positive integers, got {capacities}")
    model = duration_model or (graph.metadata.get("duration_model", "affine") if graph.metadata else "affine")
    if model not in DURATION_MODELS:
        raise ValueError(f"makespan_attrs: unknown duration model {model!r}; choose from {DURATION_MODELS}")
    rng = np.random.default_rng(seed)
    n = graph.n_ops
    if model == "affine":
        durations = affine_durations(_mem_units(graph))
    else:
        durations = rng.uniform(0.0, 1.0, size=n)
    p = np.asarray(caps, dtype=np.float64) / math.fsum(caps)
    machine = rng.choice(len(caps), size=n, p=p).astype(np.int64)
    return MakespanAttrs(
        durations=np.ascontiguousarray(durations, dtype=np.float64),
        machine_type=machine,
        capacities=caps,
        demand=np.ones(n, dtype=np.int64),
    )
