"""``onnx-sched bench IN [OUT]``: measured peak memory and latency in a real runtime.

``--runtime ort``: each model runs in a fresh process per arena setting (CPU
arena off, then on), in file order (``PRIORITY_BASED``), on the same seeded
random inputs; with OUT given, its outputs must equal IN's bit for bit.
``--runtime openvino``: each model (ONNX or IR ``.xml``) runs in a fresh process,
compiled on CPU in f32, on the same inputs; OUT's outputs must equal IN's within
``rtol = atol = 1e-5`` (OpenVINO may pick other kernels for another graph).  The
ORT-only options are an error with OpenVINO.  Prints a table naming the runtime
and what its memory column measures; ``--report`` writes the full report.

With the heap tracker installed (``pip install 'onnx-sched[bench]'``), each run
also measures the live heap of one inference, and a second table sets each
model's measured heap peak beside the memory model's prediction for its file
order (caller-owned inputs apart), with predicted and measured saving of OUT
over IN and whether they agree; ``--plot`` draws both curves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from onnx_sched.bench.measure import RUNTIMES, BenchReport, RunResult, bench_models
from onnx_sched.bench.outputs import RTOL
from onnx_sched.bench.prediction import AGREEMENT_TOLERANCE
from onnx_sched.cli._common import OutputFile, refuse_ort_only, report_option
from onnx_sched.report import fmt_bytes

if TYPE_CHECKING:
    from rich.console import Console

_MB = 1e6


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / _MB:.2f}"


def _title(report: BenchReport) -> str:
    if report.runtime == "ort":
        return "onnx-sched bench (ONNX Runtime, CPU, PRIORITY_BASED order)"
    raw = report.runs[0].raw
    version = str(raw.get("openvino_version", "")).split("-")[0]
    return f"onnx-sched bench (OpenVINO {version}, CPU, f32, {raw.get('threads', '?')} thread(s))"


def _columns(report: BenchReport) -> list[tuple[str, str, Callable[[RunResult], str]]]:
    """(header, justify, cell) of each table column; arena and ORT level exist in ORT only."""
    cols: list[tuple[str, str, Callable[[RunResult], str]]] = [
        ("model", "left", lambda r: f"{r.label}: {Path(r.model).name}")]
    if report.runtime == "ort":
        cols += [("arena", "left", lambda r: "on" if r.arena else "off"), ("ORT opt", "left", lambda r: str(r.opt_level))]
    if report.heap_measured:
        cols += [("heap MB", "right", lambda r: _mb(r.heap_peak_bytes)),
                 ("reserved MB", "right", lambda r: _mb(r.heap_reserved_bytes))]
    runtime = report.runtime
    return cols + [
        ("peak RSS delta MB", "right", lambda r: f"{r.peak_rss_delta / _MB:.1f}"),
        ("median ms", "right", lambda r: f"{r.latency_median_s * 1e3:.2f}"),
        ("p90 ms", "right", lambda r: f"{r.latency_p90_s * 1e3:.2f}"),
        ("session s" if runtime == "ort" else "compile s", "right", lambda r: f"{r.session_create_s:.2f}"),
    ]


def _render(report: BenchReport) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    caption = f"peak RSS delta: {report.memory_measured}"
    if report.heap_measured:
        caption += f"\nheap: {report.heap_measured}"
    table = Table(title=_title(report), caption=caption)
    columns = _columns(report)
    for header, just, _ in columns:
        table.add_column(header, justify=just)
    for r in report.runs:
        table.add_row(*(escape(cell(r)) for _, _, cell in columns))
    console = Console()
    console.print(table)
    _render_prediction(report, console)
    if "out" not in {r.label for r in report.runs}:
        return
    for arena in sorted({r.arena for r in report.runs}, key=bool):
        a, b = report.run("in", arena), report.run("out", arena)
        prefix = "" if arena is None else f"arena {'on ' if arena else 'off'}: "
        console.print(f"{prefix}OUT peak RSS {(b.peak_rss_delta - a.peak_rss_delta) / _MB:+.1f} MB vs IN")
    bitwise = report.comparison == "bitwise"
    err = "" if report.max_abs_error is None else f"max abs error {report.max_abs_error:.3g}"
    if report.unchecked_outputs:
        console.print(f"not compared (an unseeded random op feeds them; their values follow the run order): "
                      f"{escape(', '.join(report.unchecked_outputs))}")
        compared = set(report.run("in").raw.get("outputs", ())) - set(report.unchecked_outputs)
        if not compared and not report.mismatched_outputs:
            return  # nothing compared, nothing to say
    if report.outputs_equal and bitwise:
        console.print("[green]outputs bitwise equal[/green]")
    elif report.outputs_equal:
        console.print(f"[green]outputs equal within rtol=atol={RTOL:g} ({err}); bitwise equality is not "
                      "expected: OpenVINO may pick other kernels for another graph[/green]")
    else:
        within = "" if bitwise else f" beyond rtol=atol={RTOL:g}"
        console.print(f"[red]outputs differ{within}: {escape(', '.join(report.mismatched_outputs))}"
                      f"{f' ({err})' if err else ''}[/red]")


def _render_prediction(report: BenchReport, console: Console) -> None:
    """Measured heap peak beside the memory model's prediction, per model, and the savings."""
    from rich.markup import escape
    from rich.table import Table

    if report.heap_note:
        console.print(f"[yellow]{escape(report.heap_note)}[/yellow]")
    if not report.predictions:
        return
    table = Table(title="predicted (memory model, file order) vs measured (heap)",
                  caption="inputs: caller-owned graph inputs, outside the heap window; same graph: the "
                          "runtime runs the graph predicted (ORT optimizations off)")
    for header in ("model", "predicted", "inputs", "predicted - inputs", "heap peak", "same graph"):
        table.add_column(header, justify="left" if header == "model" else "right")
    for label, m in report.models().items():
        pred = report.predictions.get(label)
        table.add_row(escape(f"{label}: {Path(m['model']).name}"), fmt_bytes(m["predicted_peak_bytes"]),
                      fmt_bytes(m["predicted_inputs_bytes"]), fmt_bytes(m["predicted_activation_bytes"]),
                      fmt_bytes(m["heap_peak_bytes"]), "-" if pred is None else ("yes" if pred.graph_is_run else "no"))
    console.print(table)
    for label, why in report.prediction_errors.items():
        console.print(f"{label}: no prediction: {why}", markup=False)
    s = report.savings
    if s is not None:
        if s.predicted_bytes == 0 and s.measured_bytes != 0:  # no relative error to give
            heap_in = report.models()["in"]["heap_peak_bytes"]
            share = f" = {s.measured_bytes / heap_in:.2%} of IN's heap peak" if heap_in else ""
            verdict = f"[yellow]no saving predicted; the measured heap moved by {s.measured_bytes:,} B{share}[/yellow]"
        else:
            verdict = (f"[green]agree within {AGREEMENT_TOLERANCE:.0%} ({s.error:.1%})[/green]" if s.agrees
                       else f"[red]differ by {s.error:.1%}[/red]")
        hint = _rewritten_hint(sorted(label for label, p in report.predictions.items() if not p.graph_is_run),
                               report.runtime)
        console.print(f"OUT saves {s.predicted_bytes:,} B predicted, {s.measured_bytes:,} B measured (heap): "
                      f"{verdict}{hint}")


def _rewritten_hint(rewritten: list[str], runtime: str = "ort") -> str:
    """Why a saving may differ: which models ran a graph the runtime rewrote, and how to compare like with like.

    >>> _rewritten_hint([])
    ''
    >>> print(_rewritten_hint(["in"]))  # doctest: +ELLIPSIS
     (IN ran a graph the runtime rewrote, not the one predicted: ... --ort-graph basic --method file` ...)
    >>> print(_rewritten_hint(["in", "out"], "openvino"))  # doctest: +ELLIPSIS
     (IN and OUT ran a graph the runtime rewrote, not the one predicted: OpenVINO ... its own op order, ...)
    """
    if not rewritten:
        return ""
    names = " and ".join(label.upper() for label in rewritten)
    if runtime == "openvino":
        return (f" ({names} ran a graph the runtime rewrote, not the one predicted: OpenVINO fuses ops and plans its "
                "own op order, so the file-order prediction is a reference, not what it runs)")
    fix = ("save ORT's own graph of IN, in its own order, with `optimize IN --ort-graph basic --method file` and "
           "bench OUT against that" if rewritten == ["in"] else
           "save ORT's own graph with `optimize --ort-graph basic` to compare like with like")
    return f" ({names} ran a graph the runtime rewrote, not the one predicted: {fix})"


def _plot(report: BenchReport, path: Path) -> None:
    from onnx_sched.plot import plot_heap

    measured = {}
    for label in ("in", "out"):
        run = report.heap_run(label)
        if run is not None:
            measured[f"{label}: {Path(run.model).name}"] = run.raw.get("heap_curve", [])
    predicted = {f"{label}: {Path(report.run(label).model).name}": p.curve for label, p in report.predictions.items()}
    if not measured:
        raise ValueError("--plot: no heap was measured (ORT: it needs the arena-off run, --arena both or off)")
    plot_heap(measured, predicted, path, title=_title(report))


@click.command("bench")
@click.argument("model_in", metavar="IN", type=click.Path(exists=True, dir_okay=False))
@click.argument("model_out", metavar="[OUT]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--runtime", type=click.Choice(RUNTIMES), default="ort", show_default=True,
              help="Runtime to measure in: ONNX Runtime or OpenVINO (CPU, f32; ONNX or IR .xml models).")
@click.option("--repeats", type=click.IntRange(min=1), default=10, show_default=True, help="Timed runs per model.")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True, help="Untimed runs first.")
@report_option("--json")
@click.option("--no-ort-opt", is_flag=True, help="ORT only: run with ORT graph optimizations off (ORT_DISABLE_ALL).")
@click.option("--threads", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Inference threads (ORT intra-op threads, OpenVINO INFERENCE_NUM_THREADS).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=INT", help="Value of a symbolic input dim (default 1).")
@click.option("--arena", type=click.Choice(["both", "off", "on"]), default="both", show_default=True,
              help="ORT only: CPU memory arena settings to measure.")
@click.option("--profile", is_flag=True, help="ORT only: also run once with ORT's profiler (executed order, byte counters).")
@click.option("--no-mem-pattern", is_flag=True,
              help="ORT only: memory pattern off (each tensor its own allocation instead of one planned block).")
@click.option("--heap/--no-heap", default=None,
              help="Measure live heap bytes (memray). Default: when memray is installed.")
@click.option("--plot", "plot_path", type=OutputFile(),
              help="PNG: measured live heap over one run beside the predicted curve, each model.")
def command(
    model_in: str,
    model_out: str | None,
    runtime: str,
    repeats: int,
    warmup: int,
    report_path: Path | None,
    no_ort_opt: bool,
    threads: int,
    seed: int,
    dims: tuple[str, ...],
    arena: str,
    profile: bool,
    no_mem_pattern: bool,
    heap: bool | None,
    plot_path: Path | None,
) -> None:
    """Measure peak memory and latency of IN (and its reordering OUT) in ONNX Runtime or OpenVINO.

    Each model runs in a fresh process on the same seeded random inputs; the
    table names the runtime and says what "peak RSS delta" measures.

    --runtime ort: arena off and on, file order (PRIORITY_BASED); OUT's outputs
    must equal IN's bit for bit.  A model saved by ``ort_optimized_model`` (ORT's
    own optimized graph) runs with ORT optimizations off automatically, so the
    order in the file is the order run.

    --runtime openvino: ONNX files or OpenVINO IR .xml, compiled on CPU with
    INFERENCE_PRECISION_HINT=f32; peak RSS covers compile and the runs; OUT's
    outputs must equal IN's within rtol=atol=1e-5 (OpenVINO may pick other
    kernels for another graph, so not bit for bit).  --arena, --no-ort-opt,
    --no-mem-pattern and --profile are ORT-only: with openvino, a value other than the default is an
    error (one line, exit status 2).

    Heap (with memray, the [bench] extra): each run also measures the live heap
    of one inference after warm-up; a second table shows each model's measured
    heap peak (ORT: arena off) beside the memory model's predicted peak of its
    file order, and OUT's predicted vs measured saving.
    """
    from onnx_sched.exporters.paths import check_output_paths, model_files

    inputs = [f for m in (model_in, model_out) if m is not None for f in model_files(m)]
    check_output_paths(inputs, {"--report": report_path, "--plot": plot_path})
    refuse_ort_only(runtime, (("--arena", arena != "both"), ("--no-ort-opt", no_ort_opt), ("--profile", profile),
                              ("--no-mem-pattern", no_mem_pattern)))
    if plot_path is not None and heap is False:
        raise ValueError("--plot draws the measured heap: it cannot go with --no-heap")
    if plot_path is not None:
        from onnx_sched.plot import check_plot_path

        check_plot_path(plot_path)
    from onnx_sched.importers.onnx import check_dim_names, is_utf8_path, load_model, parse_dims

    dim_values = parse_dims(dims)
    for m in (model_in, model_out):
        if m is not None and not is_utf8_path(m):
            raise ValueError(f"{m!s}: ONNX Runtime and OpenVINO open files by UTF-8 names only; rename the file")
        if m is not None and dim_values and Path(m).suffix.lower() == ".xml":
            raise ValueError(f"{m}: --dim names symbolic dimensions of ONNX inputs; an OpenVINO IR runs at the "
                             "input shapes it was saved with (reshape it with optimize --input-shape first)")
        if m is not None and dim_values:
            check_dim_names(load_model(m), dim_values)
    arenas = {"both": (False, True), "off": (False,), "on": (True,)}[arena]
    report = bench_models(
        model_in,
        model_out,
        runtime=runtime,
        repeats=repeats,
        warmup=warmup,
        ort_opt=not no_ort_opt,
        arenas=arenas,
        threads=threads,
        seed=seed,
        dims=dim_values,
        profile=profile,
        heap=True if plot_path is not None else heap,
        mem_pattern=not no_mem_pattern,
    )
    _render(report)
    if plot_path is not None:
        _plot(report, plot_path)
        click.echo(f"plot written to {plot_path}")
    if report_path:
        report.to_json(report_path)
        click.echo(f"report written to {report_path}")
    if report.outputs_equal is False:
        raise click.ClickException("OUT's outputs differ from IN's")
