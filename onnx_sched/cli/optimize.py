"""``onnx-sched optimize``: reorder (and place) a model's ops for an objective.

The model is ONNX or OpenVINO IR (``.xml`` + ``.bin``) and is written back in its
own format (:mod:`onnx_sched.exporters.dispatch`); for an IR the report says that
OpenVINO plans its own op order.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnx_sched.cli._common import SECONDS, OutputFile, import_options, report_option, write_json_atomic
from onnx_sched.deadline import Deadline
from onnx_sched.devices import parse_memory_limits
from onnx_sched.errors import NothingToScheduleError, UnknownOpError, UnknownShapeError
from onnx_sched.objectives import OBJECTIVES, get_objective
from onnx_sched.report import ReportTable

__all__ = ["command"]


def render(table: ReportTable) -> Table:
    """An objective's before/after table as a rich Table."""
    out = Table(title=Text(table.title))  # Text: names with brackets are not rich markup
    out.add_column("")
    for name in table.columns:
        out.add_column(Text(name), justify="right")
    for row in table.rows:
        out.add_row(*map(Text, row))
    return out


@click.command("optimize")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=OutputFile(), required=True, help="Where to write the optimized model.")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="peak-mem", show_default=True)
@click.option("--method", default="auto", show_default=True, help="Pass name (see `onnx-sched methods`).")
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True, help="Seconds for search methods.")
@click.option("--inplace/--no-inplace", default=False, help="Memory model with in-place reuse of dying inputs.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--beam", "beam", type=int, default=None, help="Beam width (beam, learned).")
@click.option("--samples", type=int, default=None, help="Samples (random, learned, hsdag draws per episode).")
@click.option("--option", "pass_options", multiple=True, metavar="KEY=VALUE",
              help="Extra pass option, repeatable (e.g. hsdag: episodes=200, rounds=6; cpsat: workers=4).")
@click.option("--machines", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Machine description JSON (objective makespan).")
@click.option("--profiles", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
              help="Device profile JSON, repeatable (objective latency; see `onnx-sched profile`).")
@click.option("--devices", default=None,
              help="Comma list of devices. latency: profiled devices to place on (default: all); peak-mem: split "
                   "the model over two or more devices, the first being the host (paper 003).")
@click.option("--memory-limit", "memory_limits", multiple=True, metavar="DEVICE=SIZE",
              help="peak-mem over --devices: a device's memory, e.g. GPU=4GiB (repeatable); overflows are infeasible.")
@click.option("--latency-mode", type=click.Choice(["sequential", "concurrent"]), default="sequential", show_default=True,
              help="sequential: sub-models run one after another (OpenVINO HETERO); concurrent: they overlap.")
@click.option("--ort-graph", type=click.Choice(["basic", "extended", "all"]), default=None,
              help="Reorder the graph ONNX Runtime executes after its rewrites at this level; run the result "
                   "with graph optimizations off and PRIORITY_BASED execution order.")
@click.option("--candidates", type=int, default=None,
              help="makespan: generate this many candidate schedules (gflownet, brkga, learned), keep the proxy's "
                   "--top-k, choose on --target (paper 002).")
@click.option("--top-k", "top_k", type=int, default=None, help="Candidates evaluated on the target (default 100).")
@click.option("--target", type=click.Choice(["proxy", "noisy", "bandwidth", "latency", "measured"]), default=None,
              help="makespan and latency: what chooses among candidates and scores the result: the cost model "
                   "(proxy), a target model, or real split-executor runs (measured). Default proxy.")
@click.option("--temperature", type=float, default=None, help="gflownet: sampling temperature sigma (default 0.005).")
@report_option()
@click.option("--plot", "plot_path", type=OutputFile(), default=None,
              help="Draw memory over steps (peak-mem; per device with --devices), a Gantt chart (makespan) or the "
                   "placement's timeline (latency) to a PNG.")
@import_options
def command(model: Path, output: Path, objective: str, method: str, time_limit: float, inplace: bool, seed: int,
            beam: int | None, samples: int | None, machines: Path | None, profiles: tuple[Path, ...], devices: str | None,
            memory_limits: tuple[str, ...], latency_mode: str,
            ort_graph: str | None, report_path: Path | None,
            plot_path: Path | None, input_shapes: tuple[str, ...], dims: tuple[str, ...],
            pass_options: tuple[str, ...] = (), candidates: int | None = None, top_k: int | None = None,
            target: str | None = None, temperature: float | None = None) -> None:
    """Reorder MODEL's operators for OBJECTIVE and write the result to -o.

    MODEL is an ONNX file or an OpenVINO IR .xml (with its .bin); the output has the
    same format.  --time-limit covers the whole command (import, pass, export);
    compiling numba kernels on a first run is done before the clock starts and
    reported separately.
    """
    clock = Deadline(time_limit)  # first: reading the model counts against the budget
    from onnx_sched.exporters.dispatch import check_output
    from onnx_sched.exporters.paths import check_output_paths, copy_targets, model_files
    from onnx_sched.importers.onnx import parse_dims, parse_input_shapes
    from onnx_sched.importers.openvino import is_openvino_source

    inputs = model_files(model)
    copies = [] if is_openvino_source(model) else copy_targets(model, inputs[1:], output)
    written_model = dict(zip(("-o", "-o (its .bin)"), model_files(output, external=False) if is_openvino_source(model)
                             else [output]))
    check_output_paths([*inputs, *profiles, *([machines] if machines else [])],
                       {**written_model, "--report": report_path, "--plot": plot_path},
                       reserved=[dst for _, dst in copies])
    check_output(model, output)
    if ort_graph is not None and is_openvino_source(model):
        raise ValueError("--ort-graph reorders the graph ONNX Runtime executes; it needs an ONNX model, not an IR")
    if time_limit <= 0:
        raise ValueError(f"--time-limit must be positive, got {time_limit}")
    if plot_path is not None and not get_objective(objective).plots:
        raise ValueError(f"--plot: objective {objective!r} has no plot")
    if plot_path is not None:
        from onnx_sched.plot import check_plot_path

        check_plot_path(plot_path)
    shapes, dim_values = parse_input_shapes(input_shapes), parse_dims(dims)
    if ort_graph is not None:  # ONNX Runtime's rewrite reads the model first: a missing --machines / --profiles now
        from onnx_sched.devices import device_names
        from onnx_sched.objectives import ProblemOptions, resolve_objective
        from onnx_sched.objectives.objective import require_options

        given = ProblemOptions(machines=machines, profiles=profiles, devices=device_names(devices, "--devices"))
        require_options(resolve_objective(objective, given), given)
    with tempfile.TemporaryDirectory(prefix="onnx_sched_") as tmp:
        source, inline, rewrite = model, False, None
        if ort_graph is not None:
            from onnx_sched.bench.measure import ort_optimized_model
            from onnx_sched.onnx_wire import file_uses_external_data

            given = _weight_bytes(model)  # its read gives unreadable files one-line errors before ORT sees them
            # ORT's graph of a model with inline weights keeps them in a data file; the output has them inline
            inline = not file_uses_external_data(model)
            t0 = clock.elapsed()
            source = ort_optimized_model(model, Path(tmp) / model.name, level=ort_graph, weights_file=inline)
            rewrite = {"level": ort_graph, "seconds": clock.elapsed() - t0,
                       "weight_bytes": {"input": given, "ort_graph": _weight_bytes(source)}}
        try:
            _optimize(source, model, output, objective, method, clock, inplace, seed, beam, samples, machines,
                      report_path, plot_path, shapes, dim_values, profiles, latency_mode, devices,
                      {**parse_pass_options(pass_options),
                       **{k: v for k, v in (("candidates", candidates), ("top_k", top_k), ("target", target),
                                            ("temperature", temperature)) if v is not None}},
                      parse_memory_limits(memory_limits), inline, rewrite)
        except NothingToScheduleError:
            if ort_graph is None:
                raise
            # ONNX Runtime dropped or folded every operator (the input may have some)
            raise NothingToScheduleError(f"{model}: ONNX Runtime's --ort-graph {ort_graph} graph has no operators "
                                         "left (it computes every output ahead of the run); there is nothing to "
                                         "order or place in it: run without --ort-graph to order the input's own "
                                         "ops") from None
        except (UnknownShapeError, UnknownOpError) as exc:
            if ort_graph is None:
                raise
            # ORT's rewritten graph lives in a temporary file: name the user's model, and say what ORT did
            why = ("graph has ops whose output sizes neither onnx's shape inference nor a run of it gave"
                   if isinstance(exc, UnknownShapeError) else
                   "rewrite put one of its own ops in the ONNX domain, which onnx.checker rejects (so the written "
                   "model could not pass it)")
            hint = "" if ort_graph == "basic" else "; --ort-graph basic keeps portable ONNX ops"
            raise type(exc)(f"{str(exc).replace(str(source), str(model))}: ONNX Runtime's --ort-graph {ort_graph} "
                            f"{why}{hint}") from None


def parse_pass_options(items: tuple[str, ...]) -> dict[str, object]:
    """``("episodes=200", "temperature=2.5", "mode=race")`` -> ``{"episodes": 200, "temperature": 2.5, "mode": "race"}``."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--option expects KEY=VALUE, got {item!r}")
        value: object = raw.strip()
        for conv in (int, float):
            try:
                value = conv(raw)
                break
            except ValueError:
                continue
        out[key.strip()] = value
    return out


def _overrun_reason(report: dict, limit: float) -> str:
    """Why a run took longer than its time limit, from its report's seconds."""
    from onnx_sched.api import MIN_PASS_SECONDS

    rest = report["total_seconds"] - report["seconds"]  # reading, preparing, scoring, writing
    measure = report.get("measure_seconds", 0.0)  # real runs on a measured target, estimated before the search
    if measure and measure + MIN_PASS_SECONDS >= limit:
        return f"measuring on the target alone needs about {measure:.1f} s; the search got its minimum"
    rewrite = report.get("ort_graph", {}).get("seconds", 0.0)  # ONNX Runtime's own graph made first (--ort-graph)
    if rest + MIN_PASS_SECONDS >= limit:
        what = "starting the target's devices, reading and writing" if measure else "reading and writing"
        if rewrite:
            what = f"ONNX Runtime's --ort-graph rewrite ({rewrite:.1f} s), {what}"
        return f"{what} this model alone need more; the search got its minimum"
    timed = report.get("details", {}).get("measure_seconds", 0.0)  # a pass's own real runs (reward=measured)
    of_it = f" ({timed:.1f} s of it timing placements for real, the single devices first)" if timed else ""
    return f"{report['seconds']:.1f} s searching{of_it}, {rest:.1f} s reading, preparing" \
           f"{', measuring' if measure else ''} and writing"


#: Weight bytes ONNX Runtime's graph may add to the input's before ``--ort-graph`` says so (and at least doubling).
FOLDED_WEIGHTS_NOTE_BYTES = 1 << 20


def _weight_bytes(path: Path) -> int:
    """The weights of an ONNX file by their shapes (:func:`~onnx_sched.importers.onnx.weight_nbytes`), none read."""
    from onnx_sched.importers.onnx import load_model_by_reference, weight_nbytes

    return weight_nbytes(load_model_by_reference(path))


def _folded_weights_note(rewrite: dict) -> str | None:
    """A note when ONNX Runtime's graph (``--ort-graph``) holds far more weight bytes than the input: its constant
    folding made weights of tensors the input computes at run time (``ConstantOfShape``, ``Expand``, ``Tile`` of
    constants ...), and the output carries them.  ORT makes the same tensors when it loads the input with its
    optimizations on, so memory at run time is the same; the file is not."""
    sizes = rewrite.get("weight_bytes")
    if not sizes:
        return None
    grown = sizes["ort_graph"] - sizes["input"]
    if grown <= max(FOLDED_WEIGHTS_NOTE_BYTES, sizes["input"]):
        return None
    from onnx_sched.report import fmt_bytes

    return (f"ONNX Runtime's graph holds {fmt_bytes(sizes['ort_graph'])} of weights, the input "
            f"{fmt_bytes(sizes['input'])}: its constant folding made weights of tensors the input computes at run "
            "time, and the output carries them (ORT makes the same tensors when it loads the input optimized; "
            "without --ort-graph the file keeps the input's ops)")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """``(size, modification time, inode)`` of a file, to tell whether it changed; None where it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _optimize(source: Path, model: Path, output: Path, objective: str, method: str, clock: Deadline, inplace: bool,
              seed: int, beam: int | None, samples: int | None, machines: Path | None, report_path: Path | None,
              plot_path: Path | None, shapes: dict, dim_values: dict, profiles: tuple[Path, ...] = (),
              latency_mode: str = "sequential", devices: str | None = None,
              extra_options: dict[str, object] | None = None, memory_limits: dict[str, int] | None = None,
              inline: bool = False, ort_graph: dict[str, object] | None = None) -> None:
    """``ort_graph``: ``{"level", "seconds"}`` of ONNX Runtime's rewrite that made ``source`` (``--ort-graph``)."""
    from onnx_sched.api import optimize_model
    from onnx_sched.devices import device_names
    from onnx_sched.errors import OnnxSchedError
    from onnx_sched.exporters.dispatch import save_model
    from onnx_sched.jit import announce_compilation

    wanted = device_names(devices, "--devices")
    options = {"beam_width": beam, "samples": samples, **(extra_options or {})}
    console = Console()
    spinner = Console(stderr=True).status("compiling kernels, first run only")
    read = _stamp(source)
    with announce_compilation(spinner.start, spinner.stop):
        result = optimize_model(source, objective, method, clock.seconds, inplace, seed, shapes, dim_values, options,
                                machines=machines, profiles=profiles, devices=wanted, latency_mode=latency_mode,
                                memory_limits=memory_limits, deadline=clock, reuse_input=True, weights_in_file=True)
    if _stamp(source) != read:  # its weights are read from it again for the output
        raise OnnxSchedError(f"{model}: the file changed while it was being optimized; nothing was written")
    written = save_model(result.model, output, source_path=source, inline=inline)
    report = dict(result.report)
    report["input"], report["output"] = str(model), str(output)
    if ort_graph is not None:
        report["ort_graph"] = ort_graph
        note = _folded_weights_note(ort_graph)
        if note:
            report["notes"] = [*report.get("notes", ()), note]
    report["total_seconds"] = clock.elapsed()  # the whole command so far, kernel warm-up excluded
    obj = get_objective(report["objective"])  # peak-mem over several devices is peak-mem-devices
    console.print(render(obj.table(report)))
    if report.get("kept_input_order"):
        console.print("No method beat the input order: kept it.")
    for note in report.get("notes", ()):
        console.print(f"Note: {note}", markup=False)
    over = report["total_seconds"] - clock.seconds
    if over > max(0.1, 0.02 * clock.seconds):  # more than timer granularity and a last step's overshoot
        console.print(f"Took {report['total_seconds']:.1f} s of a {clock.seconds:g} s --time-limit: "
                      f"{_overrun_reason(report, clock.seconds)}.")
    if report["compile_seconds"] > 1.0:
        console.print(f"Compiled or loaded kernels in {report['compile_seconds']:.1f} s before the time limit started.")
    if report_path is not None:
        write_json_atomic(report, report_path)
    if plot_path is not None:
        result.plot(plot_path)
    console.print("wrote " + ", ".join(str(p) for p in written), markup=False)
