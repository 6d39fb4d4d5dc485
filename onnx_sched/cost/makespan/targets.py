"""Target models: how a schedule planned on the proxy may really run (paper 002, 2.2 and E.3).

The *proxy* is the makespan problem itself (paper 002 uses one without
transfer costs).  A *target* is a second problem over the same graph and
units that the planner does not see:

* ``noisy``: every op's durations multiplied by one log-normal factor
  ``exp(N(0, noise^2))`` (profiling error), drawn once per target seed;
* ``bandwidth`` / ``latency``: the linear memory model ``f(m) = a m + b``
  (Valiant) delays every tensor read across units; ``bandwidth`` is dominated
  by ``a``, ``latency`` by ``b``.

``a`` and ``b`` are relative to the graph so the same target means the same
thing on graphs of any scale: ``a = a_rel * mean_duration / mean_edge_bytes``
and ``b = b_rel * mean_duration``.  The defaults (bandwidth ``a_rel=2, b_rel=0.1``;
latency ``a_rel=0.1, b_rel=1``) make a cross-device read cost about two op
durations, the regime where paper 002's list schedule loses most of its proxy
speedup.  Chain schedules (:mod:`~onnx_sched.cost.makespan.chains`) are timed on
a target with the same eq. 2 rule, so a candidate's *target speedup* is
``target total work / target makespan``.  :meth:`TargetModel.placement` applies the
same targets to the latency objective's placement problems.  The ``measured`` target (real runs)
lives with the passes, which may run models; :data:`MODEL_TARGETS` are the
pure ones here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from onnx_sched.cost.latency import PlacementProblem
from onnx_sched.cost.makespan.chains import Chains, chain_times
from onnx_sched.cost.makespan.problem import MakespanProblem

__all__ = ["MODEL_TARGETS", "TargetModel", "speedups", "target_model"]


@dataclass(frozen=True)
class TargetModel:
    """A target derived from the proxy problem (see module docstring)."""

    name: str
    noise: float = 0.0  # log-normal sigma of per-op duration factors
    a_rel: float = 0.0  # transfer seconds per byte, relative to mean duration / mean edge bytes
    b_rel: float = 0.0  # transfer latency, relative to the mean duration
    seed: int = 0

    def perturb(self, times: np.ndarray, latency: np.ndarray, inv_bandwidth: np.ndarray,
                mean_bytes: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The target's op times (ops x units, ``inf`` = cannot run) and link arrays, from the proxy's."""
        if self.noise > 0:
            rng = np.random.default_rng(self.seed)
            times = times * np.exp(rng.normal(0.0, self.noise, size=(len(times), 1)))
        if self.a_rel > 0 or self.b_rel > 0:
            finite = np.where(np.isfinite(times), times, np.nan)
            mean_dur = float(np.nanmean(np.nanmin(finite, axis=1))) if len(times) else 0.0
            off = 1.0 - np.eye(len(latency))
            latency = latency + off * self.b_rel * mean_dur
            inv_bandwidth = inv_bandwidth + off * self.a_rel * mean_dur / max(mean_bytes, 1.0)
        return times, latency, inv_bandwidth

    def problem(self, proxy: MakespanProblem) -> MakespanProblem:
        """The target's makespan problem: same graph and units, perturbed durations or linear-model links."""
        if self.name == "proxy":
            return proxy
        nonzero = proxy.edge_bytes[proxy.edge_bytes > 0]
        d, lat, inv = self.perturb(proxy.durations, proxy.latency, proxy.inv_bandwidth,
                                   float(nonzero.mean()) if len(nonzero) else 1.0)
        return replace(proxy, durations=d, latency=lat, inv_bandwidth=inv, info={**proxy.info, "target": self.name})

    def placement(self, proxy: PlacementProblem) -> PlacementProblem:
        """The same target for a latency (placement) problem: its op times and links perturbed alike."""
        if self.name == "proxy":
            return proxy
        g = proxy.graph
        read = g.tensor_bytes[np.asarray(g.tensor_producer) >= 0]
        read = read[read > 0]
        t, lat, inv = self.perturb(proxy.op_time, proxy.latency, proxy.inv_bandwidth,
                                   float(read.mean()) if len(read) else 1.0)
        return replace(proxy, op_time=t, latency=lat, inv_bandwidth=inv, info={**proxy.info, "target": self.name})


#: the pure target models by name
MODEL_TARGETS: dict[str, TargetModel] = {
    "proxy": TargetModel("proxy"),
    "noisy": TargetModel("noisy", noise=0.5),
    "bandwidth": TargetModel("bandwidth", a_rel=2.0, b_rel=0.1),
    "latency": TargetModel("latency", a_rel=0.1, b_rel=1.0),
}


def target_model(name: str, seed: int = 0) -> TargetModel:
    """The named pure target (``ValueError`` lists them); ``seed`` draws the noisy target's factors."""
    try:
        return replace(MODEL_TARGETS[name], seed=seed)
    except KeyError:
        raise ValueError(f"unknown target model {name!r}; choose from {', '.join(MODEL_TARGETS)} or measured") from None


def speedups(problem: MakespanProblem, chains: Chains, check: bool = True) -> np.ndarray:
    """``total work / makespan`` of every chain schedule on ``problem`` (a proxy or a target problem)."""
    _, ms = chain_times(problem, chains, check=check)
    work = problem.total_work()
    return np.where(ms > 0, work / np.maximum(ms, 1e-300), 1.0)
