"""``onnx-sched bench IN [OUT]``: measured peak memory and latency in a real runtime.

Each model runs in a fresh process per arena setting (CPU arena off, then on),
in file order (``PRIORITY_BASED``), on the same seeded random inputs; with OUT
given, its outputs must equal IN's bit for bit.  Prints a table; ``--report``
writes the full report.
"""

from __future__ import annotations

from pathlib import Path

import click

from onnx_sched.bench.measure import BenchReport, bench_models
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


def _render(report: BenchReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="onnx-sched bench (ONNX Runtime, CPU, PRIORITY_BASED order)")
    for col, just in (
        ("model", "left"),
        ("arena", "left"),
        ("ORT opt", "left"),
        ("peak RSS delta MB", "right"),
        ("median ms", "right"),
        ("p90 ms", "right"),
        ("session s", "right"),
    ):
        table.add_column(col, justify=just)
    for r in report.runs:
        table.add_row(
            f"{r.label}: {Path(r.model).name}",
            "on" if r.arena else "off",
            r.opt_level,
            f"{r.peak_rss_delta / _MB:.1f}",
            f"{r.latency_median_s * 1e3:.2f}",
            f"{r.latency_p90_s * 1e3:.2f}",
            f"{r.session_create_s:.2f}",
        )
    console = Console()
    console.print(table)
    labels = {r.label for r in report.runs}
    if "out" in labels:
        for arena in sorted({r.arena for r in report.runs}):
            a, b = report.run("in", arena), report.run("out", arena)
            delta = (b.peak_rss_delta - a.peak_rss_delta) / _MB
            console.print(f"arena {'on ' if arena else 'off'}: OUT peak RSS {delta:+.1f} MB vs IN")
        if report.outputs_equal:
            console.print("[green]outputs bitwise equal[/green]")
        else:
            console.print(f"[red]outputs differ: {', '.join(report.mismatched_outputs)}[/red]")


@click.command("bench")
@click.argument("model_in", metavar="IN", type=click.Path(exists=True, dir_okay=False))
@click.argument("model_out", metavar="[OUT]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--runtime", type=click.Choice(["ort"]), default="ort", show_default=True, help="Runtime to measure in.")
@click.option("--repeats", type=click.IntRange(min=1), default=10, show_default=True, help="Timed runs per model.")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True, help="Untimed runs first.")
@report_option("--json")
@click.option("--no-ort-opt", is_flag=True, help="Run with ORT graph optimizations off (ORT_DISABLE_ALL).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="ORT intra-op threads.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=INT", help="Value of a symbolic input dim (default 1).")
@click.option("--arena", type=click.Choice(["both", "off", "on"]), default="both", show_default=True,
              help="CPU memory arena settings to measure.")
@click.option("--profile", is_flag=True, help="Also run once with ORT's profiler (executed order, byte counters).")
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
    """Measure peak memory and latency of IN (and its reordering OUT) in ONNX Runtime.

    A model saved by ``ort_optimized_model`` (ORT's own optimized graph) runs with
    ORT optimizations off automatically, so the order in the file is the order run.
    """
    arenas = {"both": (False, True), "off": (False,), "on": (True,)}[arena]
    report = bench_models(
        model_in,
        model_out,
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
