"""Per-device peak memory of placed corpus models, measured with one process per device (paper 003).

For each model: split it over two devices with the multi-device memory objective
(`optimize_model(path, "peak-mem", method, devices=("CPU", "GPU"))`: both are
labels, both run on this CPU), read the schedule back from the optimized model and
its report (`load_schedule`), give the stripped corpus weights seeded random values
(`with_random_weights`, so the output check means something), and run it with one
OS process per device (`measure_schedule`: one ONNX Runtime session per op,
transfers through pipes, tensors freed when the model frees them).  Each device
process measures its own live native heap (memray) and peak RSS delta over one run;
the table puts them beside the predicted per-device peak (the host's caller-owned
graph inputs apart).  With `--baseline`, also the objective's baseline: every op on
the first device, in the input model's order.

`--torch-device GPU=cuda:0` runs that device's ops on a real GPU through PyTorch
(onnx2torch, one module per op), its peak read from the CUDA caching allocator
(`torch.cuda.max_memory_allocated` over the run); `GPU=torch:cpu` runs the same
code on torch's CPU device.  `--limit-fraction 0.7` caps every device at 70 % of the model's one-device
peak, so the schedule has to use both devices.

    python benchmarks/device_memory_real.py --time-limit 10 --baseline --out docs/device_memory_real.json
    python benchmarks/device_memory_real.py --time-limit 10 --torch-device GPU=cuda:0 --out runs/device_memory_cuda.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.bench.inputs import import_feed
from onnx_sched.bench.runtimes.device_plan import PlacedSchedule, load_schedule, single_device
from onnx_sched.bench.runtimes.device_processes import measure_schedule
from onnx_sched.bench.weights import with_random_weights
from onnx_sched.errors import OnnxSchedError
from onnx_sched.importers.onnx import import_onnx

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"
MODELS = ("light_squeezenet", "resnet50", "mobilenet_v2", "randwire_ws", "nasnet_a_mobile")


def _rows(model: str, setting: str, sched: PlacedSchedule, feed: dict, torch_devices: dict[str, str]
          ) -> list[dict]:
    t0 = time.perf_counter()
    m = measure_schedule(sched, feed, torch_devices)
    seconds = time.perf_counter() - t0
    return [{"model": model, "setting": setting, "device": d.device, "ops": d.ops, "sends": d.sends,
             "receives": d.receives, "predicted_peak_bytes": d.predicted_peak_bytes,
             "heap_peak_bytes": d.heap_peak_bytes, "ratio": d.ratio, "heap_end_bytes": d.heap_end_bytes,
             "peak_rss_delta": d.peak_rss_delta, "outputs_equal": m.outputs_equal, "max_abs_diff": m.max_abs_diff,
             "run_seconds": d.seconds, "measure_seconds": seconds, "runtime": d.runtime,
             "measured_by": d.measured_by}
            for d in m.devices]


def run(path: Path, method: str, devices: tuple[str, ...], time_limit: float, baseline: bool,
        torch_devices: dict[str, str], limit_fraction: float | None = None) -> list[dict]:
    limits = None
    if limit_fraction is not None:  # every device below the one-device peak: the schedule must use both
        one = single_device(import_onnx(path), devices)
        limits = {d: int(limit_fraction * one.walk.per_device_peak[0]) for d in devices}
    result = optimize_model(path, "peak-mem", method, time_limit, devices=devices, memory_limits=limits)
    sched = load_schedule(result.model, report=result.report)
    sched = replace(sched, imported=with_random_weights(sched.imported))
    feed = import_feed(sched.imported, seed=0)
    setting = f"split ({result.report['method_used']})"
    if limits:
        setting += f", limit {_mib(min(limits.values()))} MiB" + ("" if result.report["feasible"] else " (over it)")
    rows = _rows(path.stem, setting, sched, feed, torch_devices)
    if baseline:  # the input model as it is (the split model's file order is the schedule's, not the input's)
        original = with_random_weights(import_onnx(path))
        rows += _rows(path.stem, f"{devices[0]} only", single_device(original, devices), feed, torch_devices)
    return rows


def _mib(v: float) -> str:
    return f"{v / 2**20:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--method", default="auto")
    ap.add_argument("--devices", default="CPU,GPU")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--baseline", action="store_true", help="also run every op on the first device")
    ap.add_argument("--limit-fraction", type=float,
                    help="memory limit of every device: this fraction of the model's one-device peak, so the "
                         "schedule has to split")
    ap.add_argument("--torch-device", action="append", default=[], metavar="NAME=LABEL",
                    help="run device NAME's ops through PyTorch on LABEL (cuda:0, torch:cpu); repeatable")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    devices = tuple(args.devices.split(","))
    torch_devices = dict(t.split("=", 1) for t in args.torch_device if "=" in t)
    if len(torch_devices) != len(args.torch_device) or not set(torch_devices) <= set(devices):
        ap.error(f"--torch-device takes NAME=LABEL with NAME one of {', '.join(devices)}")
    rows: list[dict] = []
    failed: dict[str, str] = {}
    console = Console(width=150)
    for name in args.models:
        console.print(f"[bold]{name}[/]")
        try:
            rows += run(args.corpus / f"{name}.onnx", args.method, devices, args.time_limit, args.baseline,
                        torch_devices, args.limit_fraction)
        except (OnnxSchedError, ValueError, OSError) as exc:  # e.g. an op onnx2torch cannot convert: the next model
            failed[name] = " ".join(str(exc).split())
            print(f"{name}: not measured: {failed[name]}", file=sys.stderr)
    where = ", ".join(f"{d} on {torch_devices.get(d, 'ONNX Runtime, CPU')}" for d in devices)
    table = Table(title=f"Per-device peak memory, one process per device ({where})")
    for col in ("model", "setting", "device", "ops", "recv", "predicted MiB", "heap peak MiB", "ratio",
                "peak RSS delta MiB", "outputs equal", "peak measured by"):
        table.add_column(col, justify="left" if col in ("model", "setting", "device") else "right")
    for r in rows:
        table.add_row(r["model"], r["setting"], r["device"], str(r["ops"]), str(r["receives"]),
                      _mib(r["predicted_peak_bytes"]), _mib(r["heap_peak_bytes"]), f"{r['ratio']:.3f}",
                      _mib(r["peak_rss_delta"]), str(r["outputs_equal"]), r["measured_by"])
    console.print(table)
    if args.out:
        meta = {"command": " ".join(["python", "benchmarks/device_memory_real.py", *sys.argv[1:]]),
                "method": args.method, "devices": list(devices), "time_limit": args.time_limit,
                "torch_devices": torch_devices, "limit_fraction": args.limit_fraction}
        args.out.write_text(json.dumps({**meta, "rows": rows, "failed": failed}, indent=1) + "\n")
    return 0 if all(r["outputs_equal"] for r in rows) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
