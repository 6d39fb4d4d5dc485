"""The interface every objective implements, and the options its problem is built from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.report import ReportTable
from onnx_sched.schedule import Schedule

if TYPE_CHECKING:  # the pass context is the passes' type; objectives only read it
    from onnx_sched.passes import PassContext

__all__ = ["META_PREFIX", "WARM_UP_OPS", "Objective", "ProblemOptions", "require_options", "warm_up_graph"]

#: Prefix of the metadata keys written into optimized models.
META_PREFIX = "onnx_sched."
#: Ops of the graph methods are warmed up on (:meth:`Objective.warm_up_instance`).
WARM_UP_OPS = 40


def require_options(objective: Objective, options: ProblemOptions) -> None:
    """``ValueError`` naming what to give when ``options`` lack a field ``objective`` cannot build its problem
    without: checked before a model is read, so a missing ``--machines`` costs no import.

    >>> from onnx_sched.objectives import get_objective
    >>> require_options(get_objective("makespan"), ProblemOptions())
    Traceback (most recent call last):
    ...
    ValueError: --objective makespan needs --machines M.json (see docs/machines.md)
    """
    for name, give in objective.needs.items():
        if not getattr(options, name):
            raise ValueError(f"--objective {objective.name} needs {give}")


def warm_up_graph(like: Graph | None = None) -> Graph:
    """The graph every objective's warm-up instance is built on: a random DAG of :data:`WARM_UP_OPS`
    ops on which no cheap heuristic is optimal and exact search hits its state cap, so the peak-memory
    portfolio runs every stage (beams, exact search, final beam).  With ``like``, op ``i`` takes the op
    type of ``like``'s op ``i mod n``, so machine files that restrict op types accept it."""
    from dataclasses import replace

    from onnx_sched.synth.random_dags import er_graph

    graph = er_graph(WARM_UP_OPS, 10_000)
    if like is None or like.n_ops == 0:
        return graph
    return replace(graph, op_types=tuple(like.op_types[i % like.n_ops] for i in range(graph.n_ops)))


@dataclass(frozen=True)
class ProblemOptions:
    """What users say about the target besides the model (CLI flags, API keywords).

    ``machines``: a machine description file (makespan).  ``profiles``: device profile
    files, ``devices``: the profiled devices to place on (default all) and
    ``latency_mode``: ``sequential`` or ``concurrent`` (latency).  ``devices`` and
    ``memory_limits`` (bytes per device name) also make peak memory a multi-device
    problem.  An objective reads what it needs (:attr:`Objective.reads`); an option it
    does not read is refused.
    """

    machines: str | os.PathLike | None = None
    profiles: tuple[str | os.PathLike, ...] = ()
    devices: tuple[str, ...] | None = None
    latency_mode: str = "sequential"
    memory_limits: Mapping[str, int] = field(default_factory=dict)

    def given(self) -> list[str]:
        """The fields set to something other than their default, in declaration order."""
        return [f.name for f in fields(self) if getattr(self, f.name) != (
            f.default if f.default is not MISSING else f.default_factory())]  # type: ignore[misc]

    def __post_init__(self) -> None:
        """Normalise (one profile path may come bare) and check the types, so API callers get a ``ValueError``
        naming the argument instead of an error from deep inside the objective."""
        profiles = self.profiles
        if profiles is None:
            profiles = ()
        elif isinstance(profiles, (str, os.PathLike)):
            profiles = (profiles,)
        profiles = tuple(profiles)
        for p in profiles:
            if not isinstance(p, (str, os.PathLike)):
                raise ValueError(f"profiles: expected paths of profile files, got {p!r}")
        object.__setattr__(self, "profiles", profiles)
        if self.machines is not None and not isinstance(self.machines, (str, os.PathLike)):
            raise ValueError(f"machines: expected the path of a machine description file, got {self.machines!r}")
        if self.latency_mode not in ("sequential", "concurrent"):
            raise ValueError(f"latency_mode must be 'sequential' or 'concurrent', got {self.latency_mode!r}")
        limits = self.memory_limits if self.memory_limits is not None else {}
        if not isinstance(limits, Mapping):
            raise ValueError(f"memory_limits: expected {{device name: bytes}}, got {limits!r}")
        for name, size in limits.items():
            if not isinstance(name, str) or isinstance(size, bool) or not isinstance(size, (int, np.integer)) \
                    or size <= 0:
                raise ValueError(f"memory_limits: {name!r}: expected a positive whole number of bytes, got {size!r}")
        object.__setattr__(self, "memory_limits", {name: int(size) for name, size in limits.items()})
        if self.devices is not None:
            object.__setattr__(self, "devices", tuple(self.devices))


class Objective(Protocol):
    """What a schedule is scored by.  Lower :meth:`evaluate` is better."""

    #: The name users type (``--objective``) and passes register under.
    name: str
    #: The folder of ``passes/`` whose modules register this objective's passes.
    pass_folder: str
    #: Whether :meth:`plot` draws anything (``--plot``).
    plots: bool
    #: The :class:`ProblemOptions` fields :meth:`build_problem` reads; giving another is an error
    #: (:func:`~onnx_sched.objectives.resolve_objective`), not silently ignored.
    reads: frozenset[str]
    #: The :class:`ProblemOptions` fields :meth:`build_problem` cannot do without, each with what to give
    #: (makespan: ``machines``, ``--machines M.json``); checked before a model is read
    #: (:func:`require_options`).
    needs: Mapping[str, str]

    def for_options(self, options: ProblemOptions) -> str:
        """The name of the objective that handles these options (usually this one's own)."""

    def build_problem(self, graph: Graph, options: ProblemOptions) -> Any:
        """The problem data passes get as ``ctx.problem`` (``None`` when the graph is enough)."""

    def prepare(self, imported: Any, ctx: PassContext, method: str, seconds: float,
                run: Any) -> tuple[Any, Any, list[dict[str, Any]]] | None:
        """Work on the imported model before its graph is scheduled, in at most ``seconds``: ``(imported, problem,
        report rows)`` to schedule instead, or ``None`` for nothing to do.  ``run`` is
        :func:`onnx_sched.api.schedule_graph`.  Peak memory orders the bodies of control-flow ops here
        (:mod:`onnx_sched.objectives.peak_mem_bodies`)."""

    def warm_up_instance(self, problem: Any) -> tuple[Graph, Any]:
        """A tiny graph and problem of the same kind as ``problem`` (same devices, machine kinds):
        running a method on it compiles every kernel the method uses (:mod:`onnx_sched.jit`)."""

    def check(self, graph: Graph, ctx: PassContext) -> None:
        """``ValueError`` with the missing option when ``ctx.problem`` does not fit this objective."""

    def evaluate(self, graph: Graph, ctx: PassContext, schedule: Schedule) -> float:
        """The objective value of ``schedule`` (bytes, seconds, time units)."""

    def target_seconds(self, graph: Graph, ctx: PassContext) -> float:
        """About how long scoring a pass's result on its target takes beyond the pass (real runs: ``--target
        measured``; 0 for a model): the caller holds it back from the pass's budget (``PassContext.measure_deadline``)."""

    def baseline(self, graph: Graph, ctx: PassContext, method: str, schedule: Schedule) -> Schedule:
        """The schedule a result must never be worse than (input order, list-CP, host only)."""

    def report(self, graph: Graph, ctx: PassContext, chosen: Schedule, baseline: Schedule) -> dict[str, Any]:
        """The objective's rows of the JSON report: values, bound, gap, proof."""

    def metadata(self, report: Mapping[str, Any]) -> dict[str, str]:
        """``onnx_sched.*`` model metadata written with the optimized model."""

    def table(self, report: Mapping[str, Any]) -> ReportTable:
        """The before/after table the CLI prints."""

    def plot(self, graph: Graph, ctx: PassContext, schedule: Schedule, path: str | os.PathLike) -> None:
        """Draw the schedule to a PNG; ``ValueError`` when :attr:`plots` is false."""
