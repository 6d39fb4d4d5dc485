"""Measured latency for placement passes (``reward=measured``): real OpenVINO runs, pre-filtered by the model.

Paper 004 rewards each placement with its measured inference latency.  Timing is the
bench harness's :class:`~onnx_sched.bench.runtimes.openvino.PlacementTimer` (HETERO with
per-op affinities; paper protocol: 10 runs, mean of the last 5).  A real run costs a
compile plus ten inferences, so the latency model only pre-filters: a placement is timed
when it is new, the measurement budget is not spent, and its predicted latency is within
``margin`` of the best predicted latency among the placements timed so far.  Any other
placement is rewarded with its predicted latency times the median measured/predicted
ratio so far (``calibrated``), and can never be chosen.  The single-device placements
are timed first, always, so the choice (the fastest *timed* placement) is never slower
than the best single device in the same protocol.  A timed placement whose outputs differ
from the whole model's, or on which OpenVINO fails (its HETERO plugin gets some splits wrong,
:class:`~onnx_sched.bench.runtimes.openvino.PlacementTimer`), can never be chosen either; its
reward is twice the slowest valid time, so a learner is steered away from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.devices import cpu_devices, device_names, is_cpu_alias
from onnx_sched.jit import work_clock
from onnx_sched.passes.placement._common import make_placement_schedule
from onnx_sched.schedule import Schedule

__all__ = ["MeasuredLatency", "choose_placement", "measured_reward", "predicted_latency", "reward_option",
           "run_devices_for"]


def predicted_latency(placement: np.ndarray, predicted: float) -> float:
    """The ``reward=model`` judge: a placement's latency is the model's prediction."""
    return predicted


def reward_option(ctx: Any, method: str) -> str:
    """The ``reward`` pass option: ``model`` (default) or ``measured``; ``ValueError`` otherwise."""
    reward = str(ctx.option("reward", "model"))
    if reward not in ("model", "measured"):
        raise ValueError(f"{method}: reward must be 'model' or 'measured', got {reward!r}")
    return reward


def measured_reward(problem: lat.PlacementProblem, ctx: Any, singles: list[np.ndarray]) -> MeasuredLatency | None:
    """The :class:`MeasuredLatency` of ``reward=measured`` with the single-device placements timed first
    (so the choice is never slower than the best of them); ``None`` on the objective's warm-up instance,
    which has no model to run."""
    if ctx.option("warm_up", False):
        return None
    from onnx_sched.devices import openvino_core

    devices = run_devices_for(problem, ctx.option("run_devices", None), list(openvino_core().available_devices),
                              "reward=measured")
    measured = MeasuredLatency(problem, ctx.source, devices, budget=int(ctx.option("measure_budget", 8)),
                               margin=float(ctx.option("margin", 0.10)), seed=ctx.seed)
    for p in singles:
        measured.measure(p)
    return measured


def choose_placement(problem: lat.PlacementProblem, method: str, measured: MeasuredLatency | None,
                     candidates: list[tuple[np.ndarray, float]], singles: list[np.ndarray],
                     info: dict[str, Any]) -> Schedule:
    """The fastest timed placement (``measured``), else the best predicted of ``candidates``
    (placement, predicted latency) and ``singles``; ``info`` goes into the schedule."""
    if measured is not None:
        placement, predicted, seconds = measured.best()
        info.update(measured_latency_s=seconds, measured_best_single_s=min(measured.measure(p) for p in singles),
                    measured_candidates=len(measured.timed), measured_refused=len(measured.invalid),
                    measure_seconds=measured.seconds,
                    run_devices=",".join(measured.timer.devices), predicted_latency_s=predicted)
        return make_placement_schedule(problem, placement, method, **info)
    pool = [*candidates, *((p, float(lat.evaluate(problem, p))) for p in singles)]
    placement, value = min(pool, key=lambda t: t[1])
    return make_placement_schedule(problem, placement, method, predicted_latency_s=value, **info)


def run_devices_for(problem: lat.PlacementProblem, option: Any, available: list[str], what: str) -> list[str]:
    """OpenVINO device for each problem device: ``option`` (``"CPU,CPUB"``) or the problem's own names; ``what``
    (``"reward=measured"``, a method's name) starts the error that names devices this machine lacks."""
    devs = list(device_names(str(option), "run_devices") if option else problem.device_names)
    if len(devs) != problem.n_devices:
        raise ValueError(f"run_devices gives {len(devs)} OpenVINO devices for {problem.n_devices} placement devices "
                         f"{list(problem.device_names)}")
    missing = [d for d in devs if d not in available and not is_cpu_alias(d)]
    if missing:
        raise ValueError(f"{what}: {missing} not OpenVINO devices on this machine ({available}); map the "
                         f"profile's {problem.n_devices} devices with --option "
                         f"run_devices={','.join(cpu_devices(problem.n_devices))}")
    return devs


class MeasuredLatency:
    """``latency_of(placement, predicted)`` for the episodes (module docstring); keeps every timing."""

    def __init__(self, problem: lat.PlacementProblem, imported: Any, devices: list[str], *, budget: int = 8,
                 margin: float = 0.10, seed: int = 0) -> None:
        from onnx_sched.bench.runtimes.openvino import PlacementTimer

        if imported is None:
            raise ValueError("reward=measured runs the model: it needs the imported model (PassContext.source), "
                             "which `onnx-sched optimize` and onnx_sched.optimize pass")
        if budget < 0 or margin < 0:
            raise ValueError(f"measure_budget and margin must be >= 0, got {budget}, {margin}")
        self.problem, self.budget, self.margin = problem, int(budget), float(margin)
        self.timer = PlacementTimer(imported, devices, seed=seed)
        # key -> (placement, predicted, measured); measured is inf where the run was wrong or failed
        self.timed: dict[bytes, tuple[np.ndarray, float, float]] = {}
        self.invalid: list[str] = []  # why each such placement was refused
        self.seconds = 0.0

    def measure(self, placement: np.ndarray, predicted: float | None = None) -> float:
        """Time ``placement`` now (outside the budget) unless it was timed already; inf when OpenVINO failed
        on it or its outputs differ from the whole model's."""
        key = np.asarray(placement, np.int8).tobytes()
        if key not in self.timed:
            t0 = work_clock()
            pred = float(lat.evaluate(self.problem, placement)) if predicted is None else predicted
            report = self.timer.time_placement(placement)
            seconds = float(report["seconds"]) if report["outputs_equal"] else float("inf")
            if not report["outputs_equal"]:
                self.invalid.append(report.get("error") or f"outputs differ (max abs error {report['max_abs_error']})")
            self.timed[key] = (np.asarray(placement, np.int64), pred, seconds)
            self.seconds += work_clock() - t0
        return self.timed[key][2]

    def calibration(self) -> float:
        ratios = [m / p for _, p, m in self.timed.values() if p > 0 and np.isfinite(m)]
        return float(np.median(ratios)) if ratios else 1.0

    def _penalty(self) -> float:
        """The reward-time of a refused placement: twice the slowest valid time."""
        valid = [m for _, _, m in self.timed.values() if np.isfinite(m)]
        return 2.0 * max(valid) if valid else 1.0

    def __call__(self, placement: np.ndarray, predicted: float) -> float:
        key = np.asarray(placement, np.int8).tobytes()
        if key in self.timed:
            seconds = self.timed[key][2]
            return seconds if np.isfinite(seconds) else self._penalty()
        best_pred = min((p for _, p, _ in self.timed.values()), default=np.inf)
        timed_extra = len(self.timed) - self.problem.n_devices
        if timed_extra < self.budget and predicted <= (1.0 + self.margin) * best_pred:
            seconds = self.measure(placement, predicted)
            return seconds if np.isfinite(seconds) else self._penalty()
        return predicted * self.calibration()

    def best(self) -> tuple[np.ndarray, float, float]:
        """``(placement, predicted, measured)`` of the fastest timed placement whose outputs were right."""
        valid = [t for t in self.timed.values() if np.isfinite(t[2])]
        if not valid:
            raise ValueError(f"reward=measured: OpenVINO ran no placement correctly, not even on one device: "
                             f"{self.invalid[0] if self.invalid else 'nothing timed'}")
        return min(valid, key=lambda t: t[2])
