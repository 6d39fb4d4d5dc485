"""``onnx-sched profile``: per-op latency of a model on a device, plus a transfer model.

Writes a profile file (``onnx-sched-profiles/1`` JSON) that the ``latency``
passes read.  ``--simulate igpu,dgpu`` appends devices this machine lacks,
derived from the measured one by the documented factors in
:data:`onnx_sched.profiling.SIMULATED_PRESETS`; they are marked ``simulated``.

``--device cuda:N`` (or ``torch:cpu``, the same path on torch's CPU device) runs
the model through PyTorch (onnx2torch; the ``[gpu]`` extra), times every op with
CUDA events and one split-executor boundary between it and a CPU core, written as
transfers between the device and each ``--hosts`` name, so a CPU profile merged
with this one (``--profiles cpu.json gpu.json``, CPU first: the first file's host
and default transfer win) plans with measured GPU costs
(:mod:`onnx_sched.profiling.cuda`).  An ONNX Runtime GPU provider (``--runtime ort
--device CUDAExecutionProvider``, with onnxruntime-gpu) gets the same boundary,
timed between a CPU core and that provider.  ``--scale-to-run`` scales an ONNX Runtime or
torch profile's op times to the whole model as the split executor runs it
(:func:`onnx_sched.profiling.runtimes.split_run_seconds`).
"""

from __future__ import annotations

from pathlib import Path

import click

from onnx_sched.cli._common import OutputFile, import_options, runtime_hint

__all__ = ["command"]


#: The host devices a torch device's or ONNX Runtime GPU provider's transfers are written for, by default.
HOSTS = "CPU,CPUExecutionProvider"


@click.command("profile")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--device", "-d", default="CPU", show_default=True,
              help="OpenVINO device (CPU, GPU.0 ...), ONNX Runtime provider (CPUExecutionProvider), or a torch "
                   "device: cuda:N (a CUDA GPU) or torch:cpu (implies --runtime torch).")
@click.option("--runtime", type=click.Choice(["openvino", "ort", "torch"]), default="openvino", show_default=True)
@click.option("--hosts", default=HOSTS, show_default=True,
              help="torch devices and ONNX Runtime GPU providers: host device names the measured boundary is "
                   "written for.")
@click.option("--repeats", type=click.IntRange(1, 10_000), default=10, show_default=True)
@click.option("--threads", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="ONNX Runtime intra-op (or torch) threads; not for OpenVINO.")
@click.option("--simulate", default="", metavar="KINDS", help="Add simulated devices, e.g. igpu,dgpu.")
@click.option("--no-transfer", is_flag=True, help="Skip measuring copies (default transfer model).")
@click.option("--scale-to-run", is_flag=True,
              help="ONNX Runtime / torch devices: scale the per-op times to sum to the whole model's time as the "
                   "split executor runs it on this device (optimized, pipelined), the scale placements run at.")
@click.option("-o", "--output", required=True, type=OutputFile(), help="Profile JSON to write.")
@import_options
def command(model: str, device: str, runtime: str, hosts: str, repeats: int, threads: int, simulate: str,
            no_transfer: bool, scale_to_run: bool, output: Path, input_shapes: tuple[str, ...],
            dims: tuple[str, ...]) -> None:
    """Measure per-op latency of MODEL (ONNX, or OpenVINO IR .xml with --runtime openvino) on a device
    and write a profile file."""
    from onnx_sched.api import require_operators
    from onnx_sched.bench.runtimes.torch_parts import torch_device
    from onnx_sched.exporters.paths import check_output_paths, model_files
    from onnx_sched.importers.dispatch import import_model
    from onnx_sched.importers.onnx import parse_dims, parse_input_shapes
    from onnx_sched.profiling import add_simulated, profile_model, save_profiles

    check_output_paths(model_files(model), {"-o": output})
    kinds = [k.strip() for k in simulate.split(",") if k.strip()]
    if simulate and not kinds:
        raise ValueError(f"--simulate {simulate!r}: no device kinds; give a comma list such as igpu,dgpu")
    if runtime == "ort" and device == "CPU":
        device = "CPUExecutionProvider"
    if torch_device(device):
        runtime = "torch"
    if threads != 1 and runtime == "openvino":
        raise ValueError("--threads sets ONNX Runtime's / torch's threads; OpenVINO profiles with its own defaults")
    boundary = runtime == "torch" or (runtime == "ort" and device != "CPUExecutionProvider")  # a CPU host copies
    if hosts != HOSTS and (no_transfer or not boundary):
        raise ValueError("--hosts names the CPU hosts of a torch device's or an ONNX Runtime GPU provider's measured "
                         f"transfers; it does not apply to {device} on {runtime}"
                         f"{' with --no-transfer' if no_transfer and boundary else ''}")
    imported = import_model(model, input_shapes=parse_input_shapes(input_shapes), dims=parse_dims(dims),
                            weights_in_file=True)  # run, never written: its weights stay in its file
    require_operators(imported.graph, "profile")
    with runtime_hint(runtime):
        ps = profile_model(imported, device, runtime, repeats=repeats, threads=threads, transfer=not no_transfer,
                           hosts=tuple(h.strip() for h in hosts.split(",") if h.strip()), scale_to_run=scale_to_run)
    if kinds:
        ps = add_simulated(ps, kinds)
    save_profiles(ps, output)
    dev = ps.devices[0]
    total = f"{dev.total_seconds * 1e3:.3f} ms" if dev.total_seconds else "-"
    sim = f"; simulated: {', '.join(d.name for d in ps.devices if d.simulated)}" if kinds else ""
    click.echo(f"{imported.graph.name}: {dev.name} ({dev.full_name}) latency {total}, "
               f"{sum(1 for v in dev.op_seconds.values() if v > 0)}/{imported.graph.n_ops} ops timed, "
               f"transfer {ps.default_transfer.latency_s * 1e6:.1f} us + {ps.default_transfer.bandwidth_Bps / 1e9:.1f} GB/s"
               f"{sim} -> {output}")
