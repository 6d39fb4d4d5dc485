"""``onnx-sched optimize``: reorder (and place) a model's ops for an objective."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.cli._common import fmt_bytes, import_options, write_json_atomic
from onnx_sched.passes import OBJECTIVES

__all__ = ["command"]


def _peak_table(report: dict) -> Table:
    pk = report["peak_bytes"]
    table = Table(title=f"onnx-sched: {report['model']} ({report['ops']} ops, {report['objective']}, {report['memory_model']})")
    table.add_column("")
    table.add_column("Original", justify="right")
    table.add_column("Optimized", justify="right")
    bound = pk["lower_bound"]
    gap_in = (pk["input"] - bound) / bound if bound else 0.0
    table.add_row("Peak memory", fmt_bytes(pk["input"]), fmt_bytes(pk["output"]))
    table.add_row("Lower bound", fmt_bytes(bound), fmt_bytes(bound))
    table.add_row("Gap to bound", f"{gap_in:.1%}", f"{report['gap']:.1%}")
    table.add_row("Proven optimal", "-", "yes" if report["optimal"] else "no")
    table.add_row("Method", "file order", report["method_used"] + (" (input kept)" if report["kept_input_order"] else ""))
    table.add_row("Seconds", "-", f"{report['seconds']:.2f}")
    return table


def _makespan_table(report: dict) -> Table:
    ms = report["makespan"]
    table = Table(title=f"onnx-sched: {report['model']} ({report['ops']} ops, makespan)")
    table.add_column("")
    table.add_column("List (CP)", justify="right")
    table.add_column("Optimized", justify="right")
    table.add_row("Makespan", f"{ms['list_cp']:.6g}", f"{ms['output']:.6g}")
    table.add_row("Lower bound", f"{ms['lower_bound']:.6g}", f"{ms['lower_bound']:.6g}")
    table.add_row("Gap to bound", "-", f"{report['gap']:.1%}")
    table.add_row("Speedup (work / makespan)", "-", f"{report['speedup']:.3f}")
    table.add_row("Proven optimal", "-", "yes" if report["optimal"] else "no")
    table.add_row("Method", "list-cp", report["method_used"])
    table.add_row("Seconds", "-", f"{report['seconds']:.2f}")
    return table


def _latency_table(report: dict) -> Table:
    lat = report["latency_s"]
    label = " (SIMULATED device profiles)" if report["simulated"] else ""
    table = Table(title=f"onnx-sched: {report['model']} ({report['ops']} ops, latency, {report['mode']}){label}")
    table.add_column("")
    table.add_column("Host only", justify="right")
    table.add_column("Placed", justify="right")
    table.add_row("Predicted latency", f"{lat['host_only'] * 1e3:.3f} ms", f"{lat['output'] * 1e3:.3f} ms")
    table.add_row("Speedup", "1.000", f"{report['speedup_vs_host']:.3f}")
    table.add_row("Ops per device", "-", ", ".join(f"{d}: {c}" for d, c in report["ops_per_device"].items()))
    table.add_row("Proven optimal", "-", "yes" if report["optimal"] else "no")
    table.add_row("Method", "-", report["method_used"])
    table.add_row("Seconds", "-", f"{report['seconds']:.2f}")
    return table


@click.command("optimize")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Where to write the optimized model.")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="peak-mem", show_default=True)
@click.option("--method", default="auto", show_default=True, help="Pass name (see `onnx-sched methods`).")
@click.option("--time-limit", type=float, default=10.0, show_default=True, help="Seconds for search methods.")
@click.option("--inplace/--no-inplace", default=False, help="Memory model with in-place reuse of dying inputs.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--beam", "beam", type=int, default=None, help="Beam width (beam, learned).")
@click.option("--samples", type=int, default=None, help="Samples (random, learned, hsdag draws per episode).")
@click.option("--option", "pass_options", multiple=True, metavar="KEY=VALUE",
              help="Extra pass option, repeatable (e.g. hsdag: episodes=200, temperature=3; cpsat: workers=4).")
@click.option("--machines", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Machine description JSON (makespan / latency).")
@click.option("--profiles", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
              help="Device profile JSON, repeatable (objective latency; see `onnx-sched profile`).")
@click.option("--devices", default=None, help="Comma list of profiled devices to place on (default: all).")
@click.option("--latency-mode", type=click.Choice(["sequential", "concurrent"]), default="sequential", show_default=True,
              help="sequential: sub-models run one after another (OpenVINO HETERO); concurrent: they overlap.")
@click.option("--ort-graph", type=click.Choice(["basic", "extended", "all"]), default=None,
              help="Reorder the graph ONNX Runtime executes after its rewrites at this level; run the result "
                   "with graph optimizations off and PRIORITY_BASED execution order.")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, help="Write a JSON report.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None,
              help="Draw memory over steps (peak-mem) or a Gantt chart (makespan) to a PNG.")
@import_options
def command(model: Path, output: Path, objective: str, method: str, time_limit: float, inplace: bool, seed: int,
            beam: int | None, samples: int | None, machines: Path | None, profiles: tuple[Path, ...], devices: str | None, latency_mode: str,
            ort_graph: str | None, report_path: Path | None,
            plot_path: Path | None, input_shapes: tuple[str, ...], dims: tuple[str, ...],
            pass_options: tuple[str, ...] = ()) -> None:
    """Reorder MODEL's operators for OBJECTIVE and write the result to -o."""
    from onnx_sched.importers.onnx import parse_dims, parse_input_shapes

    if output.exists() and model.exists() and output.resolve() == model.resolve():
        raise ValueError(f"{output}: output path is the input model; choose another -o path")
    if time_limit <= 0:
        raise ValueError(f"--time-limit must be positive, got {time_limit}")
    shapes, dim_values = parse_input_shapes(input_shapes), parse_dims(dims)
    with tempfile.TemporaryDirectory(prefix="onnx_sched_") as tmp:
        source = model
        if ort_graph is not None:
            from onnx_sched.bench.measure import ort_optimized_model
            from onnx_sched.importers.onnx import load_model

            load_model(model)  # one-line errors for unreadable files before ORT sees them
            source = ort_optimized_model(model, Path(tmp) / model.name, level=ort_graph)
        _optimize(source, model, output, objective, method, time_limit, inplace, seed, beam, samples, machines,
                  report_path, plot_path, shapes, dim_values, profiles, latency_mode, devices,
                  parse_pass_options(pass_options))


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


def _optimize(source: Path, model: Path, output: Path, objective: str, method: str, time_limit: float, inplace: bool,
              seed: int, beam: int | None, samples: int | None, machines: Path | None, report_path: Path | None,
              plot_path: Path | None, shapes: dict, dim_values: dict, profiles: tuple[Path, ...] = (),
              latency_mode: str = "sequential", devices: str | None = None,
              extra_options: dict[str, object] | None = None) -> None:
    from onnx_sched.api import optimize_model
    from onnx_sched.exporters.onnx import save_model_atomic
    from onnx_sched.importers.onnx import import_onnx

    problem = None
    if objective == "latency":
        if not profiles:
            raise ValueError("--objective latency needs --profiles P.json (write one with `onnx-sched profile`)")
        from onnx_sched.cost.latency import placement_problem
        from onnx_sched.profiling import load_profiles

        graph = import_onnx(source, input_shapes=shapes, dims=dim_values).graph
        wanted = [d.strip() for d in devices.split(",") if d.strip()] if devices else None
        problem = placement_problem(graph, load_profiles(list(profiles)), mode=latency_mode, devices=wanted)
    elif objective != "peak-mem":
        if machines is None:
            raise ValueError(f"--objective {objective} needs --machines M.json (see docs/machines.md)")
        from onnx_sched.cost.makespan import makespan_problem
        from onnx_sched.machines import load_machines

        graph = import_onnx(source, input_shapes=shapes, dims=dim_values).graph
        problem = makespan_problem(graph, load_machines(machines))
    options = {"beam_width": beam, "beam": beam, "samples": samples, **(extra_options or {})}
    result = optimize_model(source, objective, method, time_limit, inplace, seed, shapes, dim_values, options, problem)
    save_model_atomic(result.model, output, source_path=source)
    console = Console()
    report = dict(result.report)
    report["input"], report["output"] = str(model), str(output)
    tables = {"peak-mem": _peak_table, "makespan": _makespan_table, "latency": _latency_table}
    console.print(tables[objective](report))
    if report.get("kept_input_order"):
        console.print("No method beat the input order: kept it.")
    if report_path is not None:
        write_json_atomic(report, report_path)
    if plot_path is not None:
        g = result.imported.graph
        if objective == "peak-mem":
            from onnx_sched.cost.memory import profile
            from onnx_sched.plot import plot_memory

            plot_memory(
                {"input order": profile(g, np.arange(g.n_ops), inplace), result.schedule.method: profile(g, result.schedule.order, inplace)},
                plot_path,
                title=f"{g.name}: live activation memory",
            )
        elif objective == "makespan":
            from onnx_sched.cost.gantt import plot_gantt

            plot_gantt(problem, result.schedule, plot_path)
    console.print(f"wrote {output}")
