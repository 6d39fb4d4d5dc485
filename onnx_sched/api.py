"""The one entry point the CLI and every plugin call: ``optimize``.

``optimize_model`` imports a model once, has the objective
(:mod:`onnx_sched.objectives`) build its problem, runs a registered pass, scores the
result against the objective's baseline with the same cost model, keeps the baseline
when nothing beats it, and exports the model in the format it came in (ONNX, or
OpenVINO IR / ``ov.Model``: :mod:`onnx_sched.importers.dispatch`,
:mod:`onnx_sched.exporters.dispatch`).  Nothing here depends on which objective runs.
``optimize`` is the thin wrapper that takes and returns ``onnx.ModelProto``,
``onnx_ir.Model`` or ``openvino.Model``.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import onnx

from onnx_sched import jit
from onnx_sched.deadline import Deadline, positive_seconds
from onnx_sched.devices import device_names
from onnx_sched.errors import NothingToScheduleError, OnnxSchedError, TimeLimitError
from onnx_sched.exporters.dispatch import export_model
from onnx_sched.exporters.paths import external_data_files, model_files
from onnx_sched.graph import Graph
from onnx_sched.importers.dispatch import Imported, import_model
from onnx_sched.importers.openvino import is_openvino_source
from onnx_sched.objectives import Objective, ProblemOptions, get_objective, resolve_objective
from onnx_sched.objectives.objective import META_PREFIX, require_options
from onnx_sched.objectives.peak_mem import memory_model_name
from onnx_sched.onnx_structure import STRING_ELEMENT_BYTES
from onnx_sched.passes import PassContext, TrackedOptions, get_pass
from onnx_sched.schedule import Schedule

__all__ = ["OptimizeResult", "check_model_arguments", "check_seed", "checked_arguments", "export_seconds", "optimize",
           "optimize_model", "require_operators", "schedule_graph", "memory_model_name", "warm_up_method"]

#: Work-clock seconds a method gets on its warm-up instance (compilation is not counted).
WARM_UP_SECONDS = 0.3
#: At most this many warm-up runs (each compiles what the previous ones did not reach).
WARM_UP_ROUNDS = 6
#: The pass always gets at least this long, even when import used up the budget.
MIN_PASS_SECONDS = 0.05
EXPORT_SECONDS_BASE = 0.05
#: Exporting, scoring the result and writing it took 26-47 us per op on 20,000-op graphs here (session 47).
EXPORT_SECONDS_PER_OP = 40e-6
#: Writing the output's weights (an IR's ``.bin``, inline ONNX weights, external data copied to another folder):
#: OpenVINO wrote a 2.9 GB ``.bin`` in 4.2-9.1 s here (session 26), so 2 ns per byte of the input's files.
EXPORT_SECONDS_PER_BYTE = 2e-9


@dataclass(frozen=True, eq=False)
class OptimizeResult:
    """What ``optimize_model`` produced: the model (``onnx.ModelProto``, or ``openvino.Model`` for
    OpenVINO input), the schedule, the report, the problem solved and the ``onnx_sched.*``
    metadata written into the model."""

    model: Any
    schedule: Schedule
    report: Mapping[str, Any]
    imported: Imported
    input_schedule: Schedule = field(repr=False, default=None)  # type: ignore[assignment]
    problem: Any = field(repr=False, default=None)
    metadata: Mapping[str, str] = field(repr=False, default_factory=dict)
    context: PassContext | None = field(repr=False, default=None)  # the pass's context (its problem and options)

    def plot(self, path: str | os.PathLike) -> None:
        """Draw the result to a PNG, as ``optimize --plot`` does: live memory over steps (peak-mem, per device when
        split), a Gantt chart (makespan), the placement's timeline (latency)."""
        from onnx_sched.plot import check_plot_path

        check_plot_path(path)
        context = self.context if self.context is not None else PassContext(problem=self.problem)
        get_objective(self.report["objective"]).plot(self.imported.graph, context, self.schedule, path)


def schedule_graph(
    graph: Graph,
    objective: str = "peak-mem",
    method: str = "auto",
    ctx: PassContext | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """Run ``method`` on ``graph`` and return (schedule, report); never worse than the objective's baseline.

    The baseline (:meth:`~onnx_sched.objectives.objective.Objective.baseline`) is the
    input order for peak memory, list-CP for makespan (on a ``--target`` other than the proxy, the better there
    of list-CP and the model not split) and host-only for latency; when
    the pass's schedule scores worse, the baseline is returned and the report says so.
    """
    obj = get_objective(objective)
    ctx = ctx or PassContext()
    options = TrackedOptions(ctx.options)
    ctx = replace(ctx, options=options)
    obj.check(graph, ctx)
    start = time.perf_counter()
    schedule = get_pass(method, obj.name)(graph, ctx)
    seconds = time.perf_counter() - start
    baseline = obj.baseline(graph, ctx, method, schedule)
    kept = obj.evaluate(graph, ctx, schedule) > obj.evaluate(graph, ctx, baseline)
    if kept:
        schedule = baseline
    report = {
        "objective": obj.name,
        "method": method,
        "method_used": schedule.method,
        **obj.report(graph, ctx, schedule, baseline),
        "kept_input_order": kept or bool(schedule.info.get("kept_input_order", False)),
        "seconds": seconds,
        "unused_options": options.unused(),
    }
    return schedule, report


def warm_up_method(obj: Objective, method: str, problem: Any, *, seed: int = 0, inplace: bool = False,
                   options: Mapping[str, Any] | None = None) -> float:
    """Run ``method`` on the objective's tiny warm-up instance until a run compiles nothing new, so the
    kernels it uses are compiled (or loaded from numba's cache) now; returns the wall seconds spent.

    One short run may stop before its later stages on a cold cache (first calls have costs beyond
    compiling); each further run reaches further, and a warm cache needs one run."""
    graph, tiny = obj.warm_up_instance(problem)
    run = get_pass(method, obj.name)
    # "warm_up" tells passes that run the model for real (hsdag reward=measured, openvino-auto-*) to skip the run
    ctx = PassContext(time_limit=WARM_UP_SECONDS, seed=seed, inplace=inplace, options={**(options or {}), "warm_up": True},
                      problem=tiny)
    def attempt() -> None:
        try:
            run(graph, ctx)
        except TimeLimitError:  # the warm-up's own budget ran out (a loaded machine): what it compiled stays compiled
            pass

    total = 0.0
    for _ in range(WARM_UP_ROUNDS):
        seconds, compiled = jit.warm_up(attempt)
        total += seconds
        if compiled == 0.0:
            break
    return total


def export_seconds(graph: Graph, written_bytes: int = 0) -> float:
    """Time kept back from the pass for exporting and writing the model (measured: see docs/results.md);
    ``written_bytes``: about what the output's files hold (:func:`source_bytes`)."""
    return EXPORT_SECONDS_BASE + EXPORT_SECONDS_PER_OP * graph.n_ops + EXPORT_SECONDS_PER_BYTE * written_bytes


def source_bytes(imported: Imported) -> int:
    """The size of the files the model was read from (an IR's ``.xml`` + ``.bin``, an ONNX file and its external
    data), about what writing the output takes; 0 for a model given in memory."""
    path = imported.path
    if path is None:
        return 0
    files = model_files(path, external=False)  # an IR's .xml and .bin; external data from the model in hand
    if isinstance(imported.model, onnx.ModelProto):
        files += external_data_files(imported.model, path)
    return sum(f.stat().st_size for f in files if f.is_file())


def _scalars(info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-ready scalar entries of a schedule's ``info`` (decoder, episodes, solver status...)."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or isinstance(v, (str, int, float, bool)):
            out[str(k)] = v
    return out


def require_operators(graph: Graph, what: str = "order or place") -> None:
    """:class:`NothingToScheduleError` for a model without operators: nothing to ``what`` (order, place, profile,
    run split)."""
    if graph.n_ops == 0:
        raise NothingToScheduleError(f"{graph.name}: the model has no operators (its outputs are its "
                                     f"inputs or constants); there is nothing to {what}")


def optimize_model(
    source: str | os.PathLike | onnx.ModelProto | Any,
    objective: str = "peak-mem",
    method: str = "auto",
    time_limit: float = 10.0,
    inplace: bool = False,
    seed: int = 0,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    dims: Mapping[str, int] | None = None,
    options: Mapping[str, Any] | None = None,
    problem: Any = None,
    *,
    machines: str | os.PathLike | None = None,
    profiles: Sequence[str | os.PathLike] = (),
    devices: Sequence[str] | str | None = None,
    latency_mode: str = "sequential",
    memory_limits: Mapping[str, int] | None = None,
    warm_up: bool = True,
    deadline: Deadline | None = None,
    reuse_input: bool = False,
    weights_in_file: bool = False,
) -> OptimizeResult:
    """Import ``source`` once, schedule it for ``objective`` with ``method`` and export it.

    ``source`` is an ONNX file or ``onnx.ModelProto`` (the result is a reordered
    ``onnx.ModelProto``), or an OpenVINO IR ``.xml`` or ``openvino.Model`` (the result is an
    ``openvino.Model`` carrying the schedule in rt_info; OpenVINO plans its own op order, so
    the report's ``notes`` say the order is recorded, not applied).

    ``problem`` is the objective's problem data when the caller built it; otherwise the
    objective builds it from ``machines`` (makespan), ``profiles`` / ``devices`` /
    ``latency_mode`` (latency) or ``devices`` / ``memory_limits`` (peak memory split over
    two or more devices: objective ``peak-mem-devices``, paper 003).

    ``time_limit`` covers the whole call -- import, pass and export -- except compiling
    numba kernels: with ``warm_up`` the method first runs on a tiny instance of the same
    kind (:func:`warm_up_method`), off the clock, so the first call in a process (or on
    a fresh install with an empty numba cache) gives the same answer as later ones.  The
    report says ``compile_seconds`` (that warm-up) and ``total_seconds`` (the rest).  A
    caller whose budget started earlier (the CLI, which also counts reading and writing
    files) passes its running ``deadline``; ``time_limit`` is then ignored.  ``devices`` is a sequence of names
    or a comma list (``"CPU,GPU"``).  A time limit that is not a positive, finite number, a negative seed or an
    empty device list is a ``ValueError`` before any work.

    ``reuse_input`` lets the result be the model read from a path ``source``, reordered in place, instead of a copy:
    a model with its weights inline is then held once, not twice (the CLI's way).  ``result.imported`` no longer
    describes the model's node order then.  A model passed in memory is never changed.

    ``weights_in_file`` leaves the large inline weights of an ONNX file in it: the result refers to them there
    (:func:`~onnx_sched.importers.onnx.load_model_by_reference`) instead of holding them, so write it with
    :func:`onnx_sched.exporters.dispatch.save_model` and ``source_path=source``, which writes them inline again
    (the CLI's way; ``onnx.save`` would write the references).
    """
    clock = deadline if deadline is not None else Deadline(positive_seconds(time_limit))
    seed = check_seed(seed)
    check_model_arguments(input_shapes, dims, options)
    problem_options = ProblemOptions(machines=machines, profiles=profiles, devices=device_names(devices),
                                     latency_mode=latency_mode, memory_limits=memory_limits)
    obj = resolve_objective(objective, problem_options)
    if problem is None:
        require_options(obj, problem_options)  # before the model is read
    imported = import_model(source, input_shapes=input_shapes, dims=dims, weights_in_file=weights_in_file)
    require_operators(imported.graph)
    if problem is None:
        problem = obj.build_problem(imported.graph, problem_options)
    compile_s = 0.0
    if warm_up:
        with clock.paused():
            compile_s = warm_up_method(obj, method, problem, seed=seed, inplace=inplace, options=options)
    ctx = PassContext(seed=seed, inplace=inplace, options=dict(options or {}), problem=problem, source=imported)
    obj.check(imported.graph, ctx)
    compiled_before = jit.compile_seconds()
    measure = 0.0
    body_rows: list[dict[str, Any]] = []
    try:
        prepared = obj.prepare(imported, ctx, method,
                               clock.left() - export_seconds(imported.graph, source_bytes(imported)), schedule_graph)
        if prepared is not None:  # e.g. peak-mem ordered the bodies of control-flow ops
            imported, problem, body_rows = prepared
            ctx = replace(ctx, source=imported, problem=problem)
        measure = obj.target_seconds(imported.graph, ctx)  # runs on a measured target, timed once on this model
        left = clock.left() - export_seconds(imported.graph, source_bytes(imported))
        budget = max(left - measure, MIN_PASS_SECONDS)
        ctx = replace(ctx, time_limit=budget, measure_deadline=Deadline(max(left, budget)) if measure else None)
        schedule, report = schedule_graph(imported.graph, obj.name, method, ctx)
    finally:
        if ctx.options.get("target") == "measured":  # the estimate's executors, the model's measurements
            from onnx_sched.bench.runtimes.placement_timing import release

            release()
    compile_s += jit.compile_seconds() - compiled_before  # kernels the warm-up did not reach (off the clock too)
    if any(row["reordered"] for row in body_rows):
        report["kept_input_order"] = False  # the bodies' order is not the input's
    if body_rows:
        report["bodies"] = body_rows
    report = {"model": imported.graph.name, "ops": imported.graph.n_ops, **report, "time_limit": clock.seconds,
              **({"measure_seconds": measure} if measure else {}), "compile_seconds": compile_s,
              "details": _scalars(schedule.info)}
    meta = {
        f"{META_PREFIX}objective": obj.name,
        f"{META_PREFIX}method": str(report["method_used"]),
        f"{META_PREFIX}optimal": str(report["optimal"]).lower(),
        **obj.metadata(report),
    }
    exported = export_model(imported, schedule, meta, device_names=getattr(problem, "device_names", None),
                            in_place=reuse_input and imported.model is not source)
    report["output_format"] = exported.format
    report["notes"] = [*report.get("notes", ()), *exported.notes,  # the objective's, the exporter's, the pass's
                       *(str(note) for note in schedule.info.get("notes", ()))]
    if report["unused_options"]:
        report["notes"].append(f"method {method!r} of objective {obj.name!r} did not use the option(s) "
                               f"{', '.join(report['unused_options'])}")
    bounded = int(imported.graph.metadata.get("upper_bound_tensors", 0))
    if bounded:
        report["notes"].append(f"{bounded} tensors have data-dependent shapes (e.g. NonZero, NonMaxSuppression, an element "
                               "read out of a sequence): "
                               "sized at their upper bound, so the memory figures are worst-case bounds")
    unsized = int(imported.graph.metadata.get("unsized_bodies", 0))
    if unsized:
        report["notes"].append(f"{unsized} control-flow bod{'ies' if unsized > 1 else 'y'} (If / Loop / Scan "
                               "subgraphs) could not be sized (sizes fixed only at run time): not counted in the "
                               "memory figures, and kept in their order")
    strings = int(imported.graph.metadata.get("string_tensors", 0))
    if strings:
        report["notes"].append(f"{strings} string tensor{'s are' if strings > 1 else ' is'} sized at "
                               f"{STRING_ELEMENT_BYTES} bytes per element (the "
                               "std::string objects ONNX Runtime allocates), not counting characters beyond 15 per "
                               "string (separate heap blocks)")
    report["total_seconds"] = clock.elapsed()
    return OptimizeResult(model=exported.model, schedule=schedule, report=report, imported=imported, problem=problem,
                          metadata=meta, context=ctx)


def checked_arguments(what: str, objective: str, method: str, **kwargs: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`optimize_model` with ``time_limit``, ``seed`` and ``devices`` checked and
    normalised, once ``objective`` (with the problem options among them) and ``method`` are known to exist; each
    ``ValueError`` names ``what`` or the argument.  A pipeline pass calls this when it is built, so a mistake shows
    there, not inside the pipeline's run."""
    out = dict(kwargs)
    known = set(inspect.signature(optimize_model).parameters) - {"source", "objective", "method"}
    unknown = sorted(set(out) - known)
    if unknown:
        raise ValueError(f"{what}: unknown argument(s) {', '.join(unknown)}; optimize_model takes "
                         f"{', '.join(sorted(known))}")
    check_model_arguments(out.get("input_shapes"), out.get("dims"), out.get("options"), f"{what}: ")
    if "time_limit" in out:
        out["time_limit"] = positive_seconds(out["time_limit"], f"{what}: time_limit")
    if "seed" in out:
        out["seed"] = check_seed(out["seed"], f"{what}: seed")
    if out.get("devices") is not None:
        out["devices"] = device_names(out["devices"], f"{what}: devices")
    given = ProblemOptions(**{f.name: out[f.name] for f in fields(ProblemOptions) if out.get(f.name) is not None})
    resolved = resolve_objective(objective, given)
    get_pass(method, resolved.name)
    for name, path in [("machines", given.machines), *(("profiles", p) for p in given.profiles)]:
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"{what}: {name} {os.fspath(path)}: no such file")
    if given.machines is not None:  # the files' content too, now rather than inside the pipeline's run
        from onnx_sched.machines import load_machines

        load_machines(given.machines)
    if given.profiles:
        from onnx_sched.profiling import load_profiles

        try:
            load_profiles(list(given.profiles))
        except OnnxSchedError as exc:
            raise ValueError(f"{what}: {exc}") from None
    if out.get("problem") is None:
        try:
            require_options(resolved, given)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    return out


def check_model_arguments(input_shapes: object, dims: object, options: object, where: str = "") -> None:
    """``ValueError`` naming the argument when ``input_shapes`` is not ``{input: positive sizes}``, ``dims`` not
    ``{name: positive size}`` or ``options`` not a mapping (the CLI's parsers check the same for its flags).

    >>> check_model_arguments({"x": (1, 3)}, {"N": 0}, None)
    Traceback (most recent call last):
    ...
    ValueError: dims: 'N': expected a positive whole number, got 0
    """
    def size(value: object) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1

    for what, given in (("input_shapes", input_shapes), ("dims", dims), ("options", options)):
        if given is not None and not isinstance(given, Mapping):
            raise ValueError(f"{where}{what}: expected a mapping, got {given!r}")
    for name, shape in (input_shapes or {}).items():
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not all(size(d) for d in shape):
            raise ValueError(f"{where}input_shapes: {name!r}: expected a sequence of positive whole sizes, got {shape!r}")
    for name, value in (dims or {}).items():
        if not size(value):
            raise ValueError(f"{where}dims: {name!r}: expected a positive whole number, got {value!r}")


def check_seed(seed: object, what: str = "seed") -> int:
    """``seed`` as a non-negative ``int`` (numpy's generators refuse negative seeds), else a ``ValueError``
    naming ``what``.

    >>> check_seed(3)
    3
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be a non-negative integer, got -1
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {seed!r}")
    return int(seed)


def optimize(model: Any, objective: str = "peak-mem", method: str = "auto", **kwargs: Any) -> Any:
    """Reorder an ``onnx.ModelProto`` or ``onnx_ir.Model`` (returns the same type), or schedule an
    ``openvino.Model`` (returns an annotated copy: see :func:`optimize_model`).  A path returns
    what its format gives (``.xml``: ``openvino.Model``).

    Keyword arguments are those of :func:`optimize_model` (``time_limit``,
    ``inplace``, ``seed``, ``input_shapes``, ``dims``, ``options``, ``problem``,
    ``machines``, ``profiles``, ``devices``, ``latency_mode``, ``memory_limits``).

    A model without operators (outputs that are inputs or constants) comes back unchanged, so a
    pipeline step never fails on one; :func:`optimize_model` raises ``NothingToScheduleError``.

    Example:
        >>> import onnx_sched, onnx                                  # doctest: +SKIP
        >>> out = onnx_sched.optimize(onnx.load("m.onnx"), objective="peak-mem")  # doctest: +SKIP
    """
    try:
        return _optimize_any(model, objective, method, **kwargs)
    except NothingToScheduleError:
        return model


def _optimize_any(model: Any, objective: str, method: str, **kwargs: Any) -> Any:
    if isinstance(model, onnx.ModelProto):
        return optimize_model(model, objective, method, **kwargs).model
    try:
        import onnx_ir as ir
    except ImportError:  # pragma: no cover - onnx-ir is a dependency
        ir = None
    if ir is not None and isinstance(model, ir.Model):
        proto = ir.serde.serialize_model(model)
        return ir.serde.deserialize_model(optimize_model(proto, objective, method, **kwargs).model)
    if isinstance(model, (str, os.PathLike)) or is_openvino_source(model):  # only the model comes back: no copy
        return optimize_model(model, objective, method, **{"reuse_input": True, **kwargs}).model
    raise TypeError(
        f"optimize expects onnx.ModelProto, onnx_ir.Model, openvino.Model or a path, got {type(model).__name__}"
    )
