"""``onnx-sched bench IN [OUT]``: measured peak memory and latency in a real runtime.

``--runtime ort``: each model runs in a fresh process per arena setting (CPU
arena off, then on), in file order (``PRIORITY_BASED``), on the same seeded
random inputs; with OUT given, its outputs must equal IN's bit for bit.
``--runtime openvino``: each model (ONNX or IR ``.xml``) runs in a fresh process,
compiled on CPU in f32, on the same inputs; OUT's outputs must equal IN's within
``rtol = atol = 1e-5`` (OpenVINO may pick other kernels for another graph).  The
ORT-only options are an error with OpenVINO.  Prints a table naming the runtime
and what its memory column measures; ``--report`` writes the full report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from onnx_sched.bench.measure import RUNTIMES, BenchReport, RunResult, bench_models
from onnx_sched.bench.outputs import RTOL
from onnx_sched.cli._common import report_option

_MB = 1e6


def _parse_dims(values: tuple[str, ...]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit():
            raise ValueError(f"--dim expects NAME=INT, got {item!r}")
        dims[name] = int(value)
    return dims


def _title(report: BenchReport) -> str:
    if report.runtime == "ort":
        return "onnx-sched bench (ONNX Runtime, CPU, PRIORITY_BASED order)"
    raw = report.runs[0].raw
    version = str(raw.get("openvino_version", "")).split("-")[0]
    return f"onnx-sched bench (OpenVINO {version}, CPU, f32, {raw.get('threads', '?')} thread(s))"


def _columns(runtime: str) -> list[tuple[str, str, Callable[[RunResult], str]]]:
    """(header, justify, cell) of each table column; arena and ORT level exist in ORT only."""
    cols: list[tuple[str, str, Callable[[RunResult], str]]] = [
        ("model", "left", lambda r: f"{r.label}: {Path(r.model).name}")]
    if runtime == "ort":
        cols += [("arena", "left", lambda r: "on" if r.arena else "off"), ("ORT opt", "left", lambda r: str(r.opt_level))]
    return cols + [
        ("peak RSS delta MB", "right", lambda r: f"{r.peak_rss_delta / _MB:.1f}"),
        ("median ms", "right", lambda r: f"{r.latency_median_s * 1e3:.2f}"),
        ("p90 ms", "right", lambda r: f"{r.latency_p90_s * 1e3:.2f}"),
        ("session s" if runtime == "ort" else "compile s", "right", lambda r: f"{r.session_create_s:.2f}"),
    ]


def _render(report: BenchReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=_title(report), caption=f"peak RSS delta: {report.memory_measured}")
    columns = _columns(report.runtime)
    for header, just, _ in columns:
        table.add_column(header, justify=just)
    for r in report.runs:
        table.add_row(*(cell(r) for _, _, cell in columns))
    console = Console()
    console.print(table)
    if "out" not in {r.label for r in report.runs}:
        return
    for arena in sorted({r.arena for r in report.runs}, key=bool):
        a, b = report.run("in", arena), report.run("out", arena)
        prefix = "" if arena is None else f"arena {'on ' if arena else 'off'}: "
        console.print(f"{prefix}OUT peak RSS {(b.peak_rss_delta - a.peak_rss_delta) / _MB:+.1f} MB vs IN")
    bitwise = report.comparison == "bitwise"
    err = "" if report.max_abs_error is None else f"max abs error {report.max_abs_error:.3g}"
    if report.outputs_equal and bitwise:
        console.print("[green]outputs bitwise equal[/green]")
    elif report.outputs_equal:
        console.print(f"[green]outputs equal within rtol=atol={RTOL:g} ({err}); bitwise equality is not "
                      "expected: OpenVINO may pick other kernels for another graph[/green]")
    else:
        within = "" if bitwise else f" beyond rtol=atol={RTOL:g}"
        console.print(f"[red]outputs differ{within}: {', '.join(report.mismatched_outputs)}"
                      f"{f' ({err})' if err else ''}[/red]")


@click.command("bench")
@click.argument("model_in", metavar="IN", type=click.Path(exists=True, dir_okay=False))
@click.argument("model_out", metavar="[OUT]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--runtime", type=click.Choice(RUNTIMES), default="ort", show_default=True,
              help="Runtime to measure in: ONNX Runtime or OpenVINO (CPU, f32; ONNX or IR .xml models).")
@click.option("--repeats", type=click.IntRange(min=1), default=10, show_default=True, help="Timed runs per model.")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True, help="Untimed runs first.")
@report_option("--json")
@click.option("--no-ort-opt", is_flag=True, help="ORT only: run with ORT graph optimizations off (ORT_DISABLE_ALL).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Inference threads (ORT intra-op threads, OpenVINO INFERENCE_NUM_THREADS).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=INT", help="Value of a symbolic input dim (default 1).")
@click.option("--arena", type=click.Choice(["both", "off", "on"]), default="both", show_default=True,
              help="ORT only: CPU memory arena settings to measure.")
@click.option("--profile", is_flag=True, help="ORT only: also run once with ORT's profiler (executed order, byte counters).")
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
    kernels for another graph, so not bit for bit).  --arena, --no-ort-opt and
    --profile are ORT-only: with openvino, a value other than the default is an
    error (one line, exit status 2).
    """
    ort_only = [flag for flag, used in (("--arena", arena != "both"), ("--no-ort-opt", no_ort_opt),
                                        ("--profile", profile)) if used]
    if runtime != "ort" and ort_only:
        raise ValueError(f"{', '.join(ort_only)}: ONNX Runtime option(s), not for --runtime {runtime}")
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
        dims=_parse_dims(dims),
        profile=profile,
    )
    _render(report)
    if report_path:
        report.to_json(report_path)
        click.echo(f"report written to {report_path}")
    if report.outputs_equal is False:
        raise click.ClickException("OUT's outputs differ from IN's")
