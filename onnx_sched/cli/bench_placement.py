"""``onnx-sched bench-placement``: run a placed model for real (OpenVINO HETERO or ORT split).

MODEL is ONNX or an OpenVINO IR ``.xml`` (IR: ``--runtime openvino`` only).  The
placement comes from ``--placement`` (a placement JSON, an ONNX model exported with
per-node device metadata, or an IR written by ``onnx-sched optimize`` with a placement
in its rt_info) or is computed here with ``--method`` from ``--profiles``.  A model
written with a placement needs neither: an ONNX model's own per-node device metadata,
an IR's sidecar placement file (else its rt_info) is applied
(:func:`~onnx_sched.bench.placement_file.placement_of_ir`).  Placement device ``i`` runs on runtime device ``i`` of
``--devices``: OpenVINO device names (default ``CPU,CPUB``: the CPU plugin twice,
see :mod:`onnx_sched.devices`) or, for ``ort``, that many CPU "devices" of
``--threads`` threads each, pinned to distinct cores with ``--pin``.  With ``ort``
a device label ``cuda:N`` runs that device's parts through PyTorch on CUDA device
N, and ``torch:cpu`` through PyTorch on the CPU (the same path, testable without a
GPU); tensors crossing devices are copied, outputs are compared with one ONNX
Runtime session within the torch tolerance
(:data:`~onnx_sched.bench.runtimes.torch_parts.TOLERANCE`).  These need the
``[gpu]`` extra (torch, onnx2torch); plain labels never import torch.

``--memory`` (``ort``) also runs the placement with one OS process per device
(:mod:`onnx_sched.bench.runtimes.device_processes`) and measures each device's heap peak against the
``peak-mem-devices`` model's prediction: ops in MODEL's order, the transfers where MODEL records them (an
``optimize --devices`` output read as its own placement), else each as early as it can.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from onnx_sched.cli._common import SECONDS, OutputFile, import_options, refuse_ort_only, report_option, runtime_hint
from onnx_sched.errors import OnnxSchedError
from onnx_sched.report import fmt_bytes

__all__ = ["command"]


@click.command("bench-placement")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--placement", "placement_path", type=click.Path(dir_okay=False),
              help="Placement JSON, ONNX model with pkg.onnx_sched.device node metadata, or IR .xml with a "
                   "placement (default: MODEL's own: an ONNX model's node metadata; an IR's sidecar "
                   "NAME.placement.json, else its rt_info).")
@click.option("--method", default=None, help="Compute the placement with this latency pass instead (needs --profiles).")
@click.option("--profiles", multiple=True, type=click.Path(dir_okay=False), help="Profile file(s) for --method.")
@click.option("--profile-devices", default=None, help="Devices of the profiles to place on, e.g. CPU,GPU.1.")
@click.option("--mode", type=click.Choice(["sequential", "concurrent"]), default="sequential", show_default=True,
              help="The latency --method plans for: sub-models one after another (OpenVINO HETERO) or overlapping.")
@click.option("--runtime", type=click.Choice(["openvino", "ort"]), default="openvino", show_default=True)
@click.option("--devices", default=None,
              help="Runtime devices, one per placement device (default CPU,CPUB / A,B). ort: any label is an ORT "
                   "CPU device, except cuda:N (PyTorch on CUDA device N) and torch:cpu (PyTorch on the CPU).")
@click.option("--threads", type=click.IntRange(1, 1024), default=1, show_default=True, help="ORT threads per device.")
@click.option("--pin/--no-pin", default=True, show_default=True, help="ORT: pin device i to core i.")
@click.option("--sequential", is_flag=True, help="ORT: run parts one after another (HETERO-like).")
@click.option("--warmup", type=click.IntRange(0, 1000), default=2, show_default=True)
@click.option("--repeats", type=click.IntRange(1, 100_000), default=10, show_default=True)
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True, help="Seconds for --method.")
@click.option("--save-placement", type=OutputFile(), default=None, help="Write the placement used.")
@click.option("--memory", is_flag=True,
              help="ort: also run the placement with one OS process per device and measure each device's peak "
                   "memory (memray) next to the predicted one (ops in MODEL's order, transfers where MODEL records "
                   "them, else as early as possible).")
@report_option("-o", "--output")
@import_options
def command(model: str, placement_path: str | None, method: str | None, profiles: tuple[str, ...],
            profile_devices: str | None, mode: str, runtime: str, devices: str | None, threads: int, pin: bool,
            sequential: bool, warmup: int, repeats: int, time_limit: float, save_placement: Path | None,
            memory: bool, report_path: Path | None, input_shapes: tuple[str, ...], dims: tuple[str, ...]) -> None:
    """Run MODEL split by a device placement; report latency, sub-models and output equality."""
    from onnx_sched.api import require_operators
    from onnx_sched.bench.placement_file import load_placement, placement_of_ir
    from onnx_sched.bench.placement_file import save_placement as write_placement
    from onnx_sched.bench.runtimes.openvino import bench_openvino
    from onnx_sched.bench.runtimes.openvino_inputs import output_names
    from onnx_sched.bench.runtimes.ort import bench_ort
    from onnx_sched.devices import cpu_devices, device_names
    from onnx_sched.exporters.paths import check_output_paths, model_files
    from onnx_sched.importers.dispatch import import_model
    from onnx_sched.importers.onnx import parse_dims, parse_input_shapes
    from onnx_sched.importers.openvino import is_openvino_source

    ir = is_openvino_source(model)
    if ir and runtime != "openvino":
        raise ValueError(f"{model}: ONNX Runtime cannot run an OpenVINO IR; use --runtime openvino")
    refuse_ort_only(runtime, (("--threads", threads != 1), ("--no-pin", not pin), ("--sequential", sequential)))
    if memory:
        from onnx_sched.bench.heap import MISSING_TRACKER, heap_tracker_available

        if runtime != "ort":
            raise ValueError("--memory runs each device as an ONNX Runtime process: use --runtime ort")
        if not heap_tracker_available():
            raise ValueError(f"--memory: {MISSING_TRACKER}")
    own_placement = placement_path is None and method is None  # MODEL carries it (optimize --devices wrote it)
    if own_placement:
        placement_path = str(placement_of_ir(model)) if ir else model
    if placement_path is not None and method is not None:
        raise ValueError("give exactly one of --placement FILE or --method NAME (with --profiles)")
    if (profiles or profile_devices or mode != "sequential") and method is None:
        raise ValueError("--profiles, --profile-devices and --mode are read only with --method NAME")
    inputs = [*model_files(model), *([placement_path] if placement_path else []), *profiles]
    check_output_paths(inputs, {"--save-placement": save_placement, "--report": report_path})
    imported = import_model(model, input_shapes=parse_input_shapes(input_shapes), dims=parse_dims(dims),
                            weights_in_file=True)  # run, never written: its weights stay in its file
    require_operators(imported.graph, "split")
    graph = imported.graph
    meta: dict = {}
    if placement_path:
        try:
            placement, names, meta = load_placement(placement_path, graph, as_onnx=own_placement and not ir)
        except OnnxSchedError as e:
            if not own_placement:
                raise
            raise ValueError(f"{e}.  Without --placement FILE or --method NAME (with --profiles), bench-placement "
                             "runs MODEL's own placement, as onnx-sched optimize --devices writes it") from None
    else:
        if not profiles:
            raise ValueError("--method needs --profiles FILE (from onnx-sched profile)")
        from onnx_sched.objectives import build_problem
        from onnx_sched.passes import PassContext, get_pass

        sel = tuple(d.strip() for d in profile_devices.split(",")) if profile_devices else None
        problem = build_problem("latency", graph, profiles=profiles, devices=sel, latency_mode=mode)
        sched = get_pass(method, "latency")(graph, PassContext(time_limit=time_limit, problem=problem))
        placement, names = sched.placement, list(problem.device_names)
        meta = {"method": method, "predicted_latency_s": sched.info["latency"], "mode": mode,
                "simulated": problem.simulated}
    if save_placement:
        # transfer positions count MODEL's ops in its file order: a placement file may be applied to another order
        write_placement(save_placement, graph, placement, names,
                        **{k: v for k, v in meta.items() if k not in ("format", "transfer_steps")})
    k = len(names)
    if runtime == "openvino":
        run_devs = list(device_names(devices, "--devices") or cpu_devices(k))
        if len(run_devs) < k or (devices and len(run_devs) != k):
            raise ValueError(f"placement uses {k} devices {names}; --devices gives {len(run_devs)}")
        with runtime_hint(runtime):
            report = bench_openvino(imported, placement, run_devs[:k], warmup=warmup, repeats=repeats)
        ran_on = dict(zip(run_devs, names))
    else:
        from onnx_sched.bench.split_executor import device_spec

        labels = list(device_names(devices, "--devices") or [chr(ord("A") + i) for i in range(k)])
        if len(labels) != k:
            raise ValueError(f"placement uses {k} devices {names}; --devices gives {len(labels)}")
        ncpu = os.cpu_count() or 1
        specs = [device_spec(labels[i], threads=threads,
                             cores=tuple(range(i * threads % ncpu, i * threads % ncpu + threads)) if pin else ())
                 for i in range(k)]
        report = bench_ort(imported, placement, specs, warmup=warmup, repeats=repeats, concurrent=not sequential)
        ran_on = dict(zip(labels, names))
        if memory:
            own = placement_path is not None and Path(placement_path).resolve() == Path(model).resolve()
            report["device_memory"] = _device_memory(imported, placement, names, labels,
                                                     meta.get("transfer_steps") if own else None)
    report = {"model": graph.name, "ops": graph.n_ops, "placement_devices": names,
              "ops_per_device": {names[i]: int((placement == i).sum()) for i in range(k)}, **meta, **report}
    if report_path:
        from onnx_sched.cli._common import write_json_atomic

        write_json_atomic(report, report_path)
    sim = " (placement from SIMULATED profiles)" if report.get("simulated") else ""
    split, single = report["split"], report.get("single_device")
    target = f" {report['target']}" if report.get("target") else ""
    line = (f"{graph.name}: {runtime}{target} {report['sub_models']} sub-models, "
            f"split median {split['median_s'] * 1e3:.3f} ms p90 {split['p90_s'] * 1e3:.3f} ms")
    if single:
        line += f", single device {single['median_s'] * 1e3:.3f} ms"
    unchecked = report.get("unchecked_outputs", [])
    if unchecked and set(unchecked) >= set(output_names(imported)):
        line += ", outputs not compared (an unseeded random op feeds every one)"
    elif "outputs_equal" in report:
        line += f", outputs {'equal' if report['outputs_equal'] else 'DIFFER'} (max abs err {report['max_abs_error']:.2g}"
        tol = report.get("tolerance")
        line += f", torch tolerance rtol {tol['rtol']:g} atol {tol['atol']:g})" if tol else ")"
        if unchecked:
            line += f"; not compared (an unseeded random op feeds them): {', '.join(unchecked)}"
    click.echo(line + sim)
    if not report_path:
        shown = {label: name if name == label else f"{name} (as {label})" for label, name in ran_on.items()}
        busy = ", ".join(f"{shown.get(label, label)} {sec * 1e3:.3f} ms" for label, sec in report["device_seconds"].items())
        what = ("summed op times per device (OpenVINO PERF_COUNT, median run; overlapping ops can sum past the "
                "run)" if runtime == "openvino" else "busy per device (median run)")
        click.echo(f"{what}: {busy}")
    memory_report = report.get("device_memory")
    if memory_report:
        for d in memory_report["devices"]:
            share = f"{d['ratio']:.3f} of it" if d["predicted_peak_bytes"] else "none predicted"
            click.echo(f"{d['device']}: predicted peak {fmt_bytes(d['predicted_peak_bytes'])}, heap peak "
                       f"{fmt_bytes(d['heap_peak_bytes'])} ({share}), peak RSS +{fmt_bytes(d['peak_rss_delta'])}; "
                       f"{d['ops']} op{'' if d['ops'] == 1 else 's'}, {d['receives']} tensor{'' if d['receives'] == 1 else 's'} "
                       "received")
        held = memory_report["graph_input_bytes"]
        apart = (f"; predicted peaks leave out the caller's graph inputs ({fmt_bytes(held)} on "
                 f"{memory_report['devices'][0]['device']}), allocated before the run" if held else "")
        click.echo(f"one process per device, transfers {memory_report['transfer_timing']}; outputs "
                   f"{'equal' if memory_report['outputs_equal'] else 'DIFFER'}{apart}")
    if report.get("outputs_equal") is False or (memory_report and not memory_report["outputs_equal"]):
        worst = report["max_abs_error"] if report.get("outputs_equal") is False else memory_report["max_abs_diff"]
        raise click.ClickException(f"the split's outputs differ from the whole model's (max abs error {worst:.3g})")


def _device_memory(imported: Any, placement: Any, names: list[str], labels: list[str],
                   recorded: list | None) -> dict[str, Any]:
    """One process per device running ``placement`` (torch labels as in the split executor), measured."""
    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.runtimes.device_plan import placed_schedule, transfer_timing
    from onnx_sched.bench.runtimes.device_processes import measure_schedule
    from onnx_sched.bench.runtimes.torch_parts import torch_device

    sched, followed = placed_schedule(imported, placement, names, recorded)
    torch_devices = {name: label for name, label in zip(names, labels) if torch_device(label) is not None}
    measured = measure_schedule(sched, import_feed(imported, seed=0), torch_devices)
    return {**measured.to_dict(), "graph_input_bytes": int(sched.problem.arrays.base),  # the caller's, on the host
            "transfer_timing": transfer_timing(followed)}
