"""Objective ``peak-mem-devices``: the largest per-device peak of a joint placement + schedule (paper 003).

What ``--objective peak-mem --devices CPU,GPU`` becomes (:meth:`PeakMemory.for_options`
picks it when two or more devices are named): every op gets a device, transfers carry
tensors between devices, and one total order runs ops and transfers.  Scored by
:mod:`onnx_sched.cost.device_memory`, which reads the single-device memory model's
arrays.  Optional capacities (``--memory-limit GPU=4GiB``) make placements that
overflow a device infeasible; the report says so.  The baseline runs every op on the
first device in input order.  Passes live in ``passes/device_memory/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from onnx_sched.cost import device_memory as dm
from onnx_sched.exporters.onnx import TRANSFER_STEPS_KEY
from onnx_sched.graph import Graph
from onnx_sched.objectives.objective import META_PREFIX, ProblemOptions, warm_up_graph
from onnx_sched.report import ReportTable, fmt_bytes, yes_no
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:
    from onnx_sched.passes import PassContext

__all__ = ["OBJECTIVE", "PeakMemoryDevices", "placed_steps", "schedule_json", "steps_from_json",
           "steps_in_file_order", "transfer_positions"]


def schedule_json(problem: dm.DeviceMemoryProblem, steps: tuple[dm.Step, ...]) -> list[dict[str, str]]:
    """Every step as the report writes it: ``{"op", "output", "device"}`` or ``{"transfer", "from", "to"}``,
    by the names in the model, so the schedule can be re-evaluated without onnx-sched's ids."""
    g = problem.graph
    out: list[dict[str, str]] = []
    for s in steps:
        if s.kind == "op":
            outs = g.op_outputs.row(s.item)
            out.append({"op": g.op_names[s.item], "output": g.tensor_names[outs[0]] if len(outs) else "",
                        "device": problem.devices[s.device]})
        else:
            out.append({"transfer": g.tensor_names[s.item], "from": problem.devices[s.source],
                        "to": problem.devices[s.device]})
    return out


def steps_from_json(problem: dm.DeviceMemoryProblem, schedule: list[Mapping[str, str]]) -> tuple[dm.Step, ...]:
    """The steps of a report's ``schedule`` (by op, tensor and device names), to re-evaluate it
    with :func:`onnx_sched.cost.device_memory.walk`; ``ValueError`` names an unknown entry."""
    g = problem.graph
    ops = {name: i for i, name in enumerate(g.op_names)}
    tensors = {name: i for i, name in enumerate(g.tensor_names)}
    devices = {name: i for i, name in enumerate(problem.devices)}
    steps = []
    try:
        for entry in schedule:
            if "op" in entry:
                steps.append(dm.Step("op", ops[entry["op"]], devices[entry["device"]]))
            else:
                steps.append(dm.Step("transfer", tensors[entry["transfer"]], devices[entry["to"]],
                                     devices[entry["from"]]))
    except KeyError as exc:
        raise ValueError(f"schedule entry names an unknown op, tensor or device: {exc}") from None
    return tuple(steps)


def transfer_positions(schedule: list[Mapping[str, str]]) -> list[list[str | int]]:
    """The transfers of a report's ``schedule``, each ``[tensor, from, to, ops run before it]``: what the written
    model records (``onnx_sched.transfer_steps``) beside its node order and per-node devices.

    >>> transfer_positions([{"op": "a", "output": "x", "device": "CPU"}, {"transfer": "x", "from": "CPU", "to": "GPU"},
    ...                     {"op": "b", "output": "y", "device": "GPU"}])
    [['x', 'CPU', 'GPU', 1]]
    """
    out: list[list[str | int]] = []
    ops = 0
    for entry in schedule:
        if "op" in entry:
            ops += 1
        else:
            out.append([entry["transfer"], entry["from"], entry["to"], ops])
    return out


def steps_in_file_order(problem: dm.DeviceMemoryProblem, placement: np.ndarray,
                        transfers: Sequence[Sequence[str | int]] | None = None) -> tuple[dm.Step, ...]:
    """The steps of a placed model: its ops in the graph's (the file's) order on ``placement``'s devices, each
    transfer of ``transfers`` (:func:`transfer_positions`) where the schedule ran it, or, with ``transfers`` None,
    every transfer as early as it can run.  ``ValueError`` names a transfer that does not fit this graph."""
    n = problem.graph.n_ops
    placement = np.asarray(placement, dtype=np.int64)
    if transfers is None:
        return dm.decode(problem, placement, np.arange(n, 0, -1, dtype=np.float64))  # file order first
    tensors = {name: i for i, name in enumerate(problem.graph.tensor_names)}
    devices = {name: i for i, name in enumerate(problem.devices)}
    at: list[list[dm.Step]] = [[] for _ in range(n + 1)]
    for entry in transfers:
        try:
            tensor, source, dest, ops = entry
            if not 0 <= int(ops) <= n:
                raise IndexError(ops)
            at[int(ops)].append(dm.Step("transfer", tensors[tensor], devices[dest], devices[source]))
        except (KeyError, IndexError, TypeError, ValueError):
            raise ValueError(f"recorded transfer {entry!r} does not fit this graph ({n} ops, devices "
                             f"{list(problem.devices)})") from None
    steps = list(at[0])
    for j in range(n):
        steps.append(dm.Step("op", j, int(placement[j])))
        steps += at[j + 1]
    return tuple(steps)


def placed_steps(problem: dm.DeviceMemoryProblem, placement: np.ndarray,
                 recorded: Sequence[Sequence[str | int]] | None = None) -> tuple[tuple[dm.Step, ...], bool]:
    """A placed model's steps (:func:`steps_in_file_order`) and whether they follow ``recorded``: the transfers where
    ``recorded`` puts them when that is a valid schedule of this graph, else as early as possible (no record, or
    nodes reordered since it was written)."""
    if recorded is not None:
        try:
            steps = steps_in_file_order(problem, placement, recorded)
            dm.walk(problem, steps)
            return steps, True
        except ValueError:
            pass
    return steps_in_file_order(problem, placement), False


@dataclass(frozen=True)
class PeakMemoryDevices:
    """Minimise the largest per-device peak memory over placement and schedule."""

    name: str = "peak-mem-devices"
    pass_folder: str = "device_memory"
    plots: bool = True
    reads: frozenset[str] = frozenset({"devices", "memory_limits"})
    needs: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def for_options(self, options: ProblemOptions) -> str:
        return self.name

    def build_problem(self, graph: Graph, options: ProblemOptions) -> dm.DeviceMemoryProblem:
        if not options.devices or len(options.devices) < 2:
            raise ValueError(f"--objective {self.name} needs two or more devices (--devices CPU,GPU)")
        return dm.DeviceMemoryProblem.build(graph, options.devices, options.memory_limits)

    def prepare(self, imported: Any, ctx: PassContext, method: str, seconds: float, run: Any) -> None:
        return None  # a control-flow op is one op here: its bodies stay as they are

    def warm_up_instance(self, problem: dm.DeviceMemoryProblem) -> tuple[Graph, dm.DeviceMemoryProblem]:
        graph = warm_up_graph()
        return graph, dm.DeviceMemoryProblem(graph=graph, devices=problem.devices, capacity=problem.capacity)

    def check(self, graph: Graph, ctx: PassContext) -> None:
        if not isinstance(ctx.problem, dm.DeviceMemoryProblem):
            raise ValueError(f"objective {self.name!r} needs its devices (--devices CPU,GPU)")

    def _walk(self, ctx: PassContext, schedule: Schedule) -> dm.Walk:
        steps = schedule.steps if schedule.steps is not None else tuple(
            dm.Step("op", int(j), 0) for j in schedule.order)  # a single-device order: all on the host
        return dm.walk(ctx.problem, steps)

    def evaluate(self, graph: Graph, ctx: PassContext, schedule: Schedule) -> float:
        return float(dm.fitness(ctx.problem, self._walk(ctx, schedule).per_device_peak)[0])

    def target_seconds(self, graph: Graph, ctx: PassContext) -> float:
        return 0.0  # the memory model is the target: nothing runs

    def baseline(self, graph: Graph, ctx: PassContext, method: str, schedule: Schedule) -> Schedule:
        """Every op on the first device, in input order."""
        steps = tuple(dm.Step("op", j, 0) for j in range(graph.n_ops))
        return Schedule(order=np.arange(graph.n_ops), method=f"{ctx.problem.devices[0]}-only",
                        placement=np.zeros(graph.n_ops, dtype=np.int64), steps=steps)

    def report(self, graph: Graph, ctx: PassContext, chosen: Schedule, baseline: Schedule) -> dict[str, Any]:
        problem: dm.DeviceMemoryProblem = ctx.problem
        before, after = self._walk(ctx, baseline), self._walk(ctx, chosen)
        bound = max(dm.lower_bound(problem), int(chosen.lower_bound or 0))
        cap = {d: int(c) for d, c in zip(problem.devices, problem.capacity) if c > 0}
        over = {d: int(p - problem.capacity[i]) for i, (d, p) in enumerate(zip(problem.devices, after.per_device_peak))
                if problem.capacity[i] > 0 and p > problem.capacity[i]}
        steps = after.steps
        counts = np.bincount(chosen.placement if chosen.placement is not None else np.zeros(graph.n_ops, np.int64),
                             minlength=problem.n_devices)
        return {
            "memory_model": "tensor-lifetime, per device, with transfers",
            "devices": list(problem.devices),
            "per_device_peak_bytes": {d: int(v) for d, v in zip(problem.devices, after.per_device_peak)},
            "peak_bytes": {"input": before.peak, "output": after.peak, "lower_bound": int(bound)},
            "gap": (after.peak - bound) / bound if bound else 0.0,
            "reduction": (before.peak - after.peak) / before.peak if before.peak else 0.0,
            "memory_limits": cap,
            "feasible": not over,
            "over_limit_bytes": over,
            "ops_per_device": {d: int(c) for d, c in zip(problem.devices, counts)},
            "transfers": sum(s.kind == "transfer" for s in steps),
            "transferred_bytes": int(sum(problem.arrays.size[s.item] for s in steps if s.kind == "transfer")),
            "optimal": bool(chosen.optimal or after.peak == bound),
            "schedule": schedule_json(problem, steps),
            **({"notes": ["no placement found fits the memory limits (over: " + ", ".join(
                f"{d} by {fmt_bytes(b)}" for d, b in over.items()) + "); the model written is the best split found, "
                "over the limits"]} if over else {}),
        }

    def metadata(self, report: Mapping[str, Any]) -> dict[str, str]:
        return {
            f"{META_PREFIX}predicted_peak_bytes": str(report["peak_bytes"]["output"]),
            f"{META_PREFIX}per_device_peak_bytes": ",".join(f"{d}={v}" for d, v in report["per_device_peak_bytes"].items()),
            f"{META_PREFIX}transfers": str(report["transfers"]),
            TRANSFER_STEPS_KEY: json.dumps(transfer_positions(report["schedule"]), separators=(",", ":")),
            **({f"{META_PREFIX}memory_limits_met": str(report["feasible"]).lower()}
               if report.get("memory_limits") else {}),
        }

    def table(self, report: Mapping[str, Any]) -> ReportTable:
        pk = report["peak_bytes"]
        devices = report["devices"]
        kept = " (input kept)" if report["kept_input_order"] else ""
        rows = [("Peak memory (largest device)", fmt_bytes(pk["input"]), fmt_bytes(pk["output"]))]
        rows += [(f"  {d}", fmt_bytes(pk["input"]) if i == 0 else fmt_bytes(0),
                  fmt_bytes(report["per_device_peak_bytes"][d])) for i, d in enumerate(devices)]
        rows += [("Lower bound", fmt_bytes(pk["lower_bound"]), fmt_bytes(pk["lower_bound"])),
                 ("Ops per device", f"{devices[0]}: all", ", ".join(f"{d}: {n}" for d, n in report["ops_per_device"].items())),
                 ("Transfers", "0", f"{report['transfers']} ({fmt_bytes(report['transferred_bytes'])})")]
        if report["memory_limits"]:
            limits = report["memory_limits"]
            shown = ", ".join(f"{d} {fmt_bytes(v)}" for d, v in limits.items())
            input_fits = pk["input"] <= limits.get(devices[0], pk["input"])  # every op on the first device
            rows += [("Memory limits", shown, shown),
                     ("Fits the limits", yes_no(input_fits), yes_no(report["feasible"])
                      + ("" if report["feasible"] else " (over: " + ", ".join(
                          f"{d} by {fmt_bytes(b)}" for d, b in report["over_limit_bytes"].items() if b > 0) + ")"))]
        rows += [("Method", f"{devices[0]} only, input order", report["method_used"] + kept),
                 ("Seconds", "-", f"{report['seconds']:.2f}")]
        return ReportTable(
            title=f"onnx-sched: {report['model']} ({report['ops']} ops, peak memory over {', '.join(devices)})",
            columns=("Original", "Optimized"), rows=tuple(rows))

    def plot(self, graph: Graph, ctx: PassContext, schedule: Schedule, path: str | os.PathLike) -> None:
        """Memory per device over the steps (at each step the most it holds while the step runs, as the peak
        counts it), each device's peak marked."""
        from onnx_sched.plot import pyplot, save_figure

        walked = self._walk(ctx, schedule)
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(9, 4))
        for d, name in enumerate(ctx.problem.devices):
            mib = walked.during[:, d] / 2**20
            line, = ax.plot(range(len(mib)), mib, linewidth=1,
                            label=f"{name} (peak {walked.per_device_peak[d] / 2**20:.2f} MiB)")
            if len(mib):
                ax.scatter([int(mib.argmax())], [mib.max()], s=14, color=line.get_color())
        ax.set_xlabel("step (ops and transfers)")
        ax.set_ylabel("live memory (MiB)")
        ax.set_title(f"{graph.name}: live memory per device ({schedule.method})")
        ax.legend(loc="best")
        fig.tight_layout()
        save_figure(fig, path)


OBJECTIVE = PeakMemoryDevices()
