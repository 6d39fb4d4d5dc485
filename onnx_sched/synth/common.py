"""Pieces shared by the synthetic graph families: the memory mixture and the byte scale.

Papers 000 (appendix A) and 001 (appendix C.3) draw memory sizes as real numbers
from a 4-Gaussian mixture *projected* onto the non-negative reals
(``max(x, 0)``: the Euclidean projection; paper 001 says "projecting it to
non-negative values").  :class:`~onnx_sched.graph.Graph` stores integer bytes, so
one *memory unit* is ``unit_bytes`` bytes (default ``2**20``: 1 unit = 1 MiB) and

    bytes = 4 * round(units * unit_bytes / 4)

i.e. a multiple of 4 so that every tensor is a whole float32 vector in ONNX.
Output tensors get at least 4 bytes (one float32; a difference of ``4 / 2**20``
units, far below the mixture's resolution) so every generated tensor is a real,
non-empty ONNX tensor; parameter bytes may be 0.  The real-valued units are kept
in ``Graph.metadata["mem_units"]`` / ``["param_units"]`` so cost models that want
the paper's exact numbers (e.g. makespan durations ``round(100 m) + 1``) do not
suffer the rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_UNIT_BYTES",
    "GMM_PAPER",
    "GaussianMixture",
    "sample_memory_units",
    "units_to_bytes",
]

DEFAULT_UNIT_BYTES = 2**20


@dataclass(frozen=True)
class GaussianMixture:
    """A 1-D Gaussian mixture ``sum_i w_i N(mu_i, sigma_i)``."""

    weights: tuple[float, ...] = (0.3, 0.3, 0.3, 0.1)
    means: tuple[float, ...] = (0.5, 1.0, 3.0, 5.0)
    stds: tuple[float, ...] = (0.5, 1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        if not (len(self.weights) == len(self.means) == len(self.stds) > 0):
            raise ValueError(
                f"GaussianMixture: weights/means/stds lengths differ "
                f"({len(self.weights)}, {len(self.means)}, {len(self.stds)})"
            )
        if min(self.weights) < 0 or not np.isclose(sum(self.weights), 1.0):
            raise ValueError(f"GaussianMixture: weights {self.weights} must be >= 0 and sum to 1")
        if min(self.stds) < 0:
            raise ValueError(f"GaussianMixture: negative standard deviation in {self.stds}")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` raw draws (may be negative)."""
        comp = rng.choice(len(self.weights), size=size, p=np.asarray(self.weights))
        return rng.normal(np.asarray(self.means)[comp], np.asarray(self.stds)[comp])


#: Parameters of papers 000 (appendix A) and 001 (appendix C.3).
GMM_PAPER = GaussianMixture()


def sample_memory_units(
    rng: np.random.Generator, size: int, mixture: GaussianMixture = GMM_PAPER
) -> np.ndarray:
    """``size`` draws from ``mixture`` projected onto the non-negative reals (``max(x, 0)``)."""
    return np.maximum(mixture.sample(rng, size), 0.0)


def units_to_bytes(units: np.ndarray, unit_bytes: int = DEFAULT_UNIT_BYTES, minimum: int = 0) -> np.ndarray:
    """Memory units to int64 bytes, a multiple of 4, at least ``minimum`` (see module docstring)."""
    if unit_bytes <= 0 or unit_bytes % 4:
        raise ValueError(f"unit_bytes must be a positive multiple of 4, got {unit_bytes}")
    if minimum % 4:
        raise ValueError(f"minimum must be a multiple of 4, got {minimum}")
    units = np.asarray(units, dtype=np.float64)
    if (units < 0).any() or not np.isfinite(units).all():
        raise ValueError("units_to_bytes: memory units must be finite and non-negative")
    out = 4 * np.rint(units * (unit_bytes / 4)).astype(np.int64)
    return np.maximum(out, minimum)
