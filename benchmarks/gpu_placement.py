"""CPU + CUDA GPU placements planned from measured profiles and run for real.

For each model (corpus weights replaced by seeded random ones, so outputs are informative):

* profiles: ONNX Runtime on the CPU (one thread, optimizations off, per-op profiling events) and the GPU: PyTorch
  (``profile_torch_set``: CUDA events per op) or an ONNX Runtime GPU provider (``--device CUDAExecutionProvider``),
  each with a CPU-core <-> GPU boundary timed through the split executor;
* calibration (unless ``--no-calibrate``): each device's op times scaled to sum to the whole model's median time on
  it in the split executor (:func:`calibrated`);
* placements: the latency objective over these two profiles, solved by each ``mode:pass`` of ``--plans``
  (default: ``auto`` in the default sequential mode, HEFT / HSDAG / ``auto`` in the concurrent one), next to the two
  single-device placements;
* runs: every distinct placement through the split executor (device 0 = ONNX Runtime, one thread pinned to core 0;
  device 1 = the torch part-runner on the GPU, parts converted with onnx2torch, or the ORT provider), interleaved,
  outputs of every placement checked against the all-CPU run within the GPU tolerance (``interleaved_seconds``);
* reported: per placement, the ops on the GPU, the split's parts, predicted and measured median milliseconds, and
  the speedup of each placement over the faster single device, as measured.

The CPU device is one core on purpose: it is the device the CPU profile measured, so prediction and run agree on
what "CPU" means.  ``--device torch:cpu`` runs the same pipeline without a GPU (how it was checked before a GPU
was lent).

    python benchmarks/gpu_placement.py --device cuda:0 --out docs/gpu_placement.json \\
        --markdown docs/gpu_placement.md --profiles-dir docs/gpu_profiles
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.bench.runtimes.placement_timing import interleaved_seconds
from onnx_sched.bench.runtimes.torch_parts import torch_device
from onnx_sched.bench.weights import with_random_weights
from onnx_sched.cost import latency as lat
from onnx_sched.graph import Graph
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.profiling import profile_model, profile_ort, profile_torch_set, save_profiles, scaled_to
from onnx_sched.profiling.profiles import ProfileSet

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ONNX_SCHED_CORPUS", ROOT.parent / "shared" / "corpus")) / "onnx"
MODELS = ["randwire_ws", "mobilenet_v2", "whisper_tiny_encoder", "segformer_b0", "resnet50", "bert_base"]
#: (latency mode, pass) pairs: ``auto`` in the default sequential mode (its two-device optimum is the min cut), and
#: the concurrent model's list-scheduling placers.
PLANS = ["sequential:auto", "concurrent:heft-place", "concurrent:hsdag", "concurrent:auto"]


def plan(graph: Graph, profiles: ProfileSet, plans: list[str],
         time_limit: float) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Placements by name (the single devices, then each ``mode:pass`` of ``plans``) and, per name, its predicted
    seconds under its own mode (the single devices: sequential)."""
    problems = {mode: lat.placement_problem(graph, profiles, mode=mode) for mode in lat.MODES}
    names = problems["sequential"].device_names
    out = {f"all:{name}": np.full(graph.n_ops, d, dtype=np.int64) for d, name in enumerate(names)}
    predicted = {k: float(lat.evaluate(problems["sequential"], p)) for k, p in out.items()}
    for item in plans:
        mode, method = item.split(":", 1)
        problem = problems[mode]
        p = get_pass(method, "latency")(graph, PassContext(time_limit=time_limit, problem=problem)).placement
        out[item] = np.asarray(p, dtype=np.int64)
        predicted[item] = float(lat.evaluate(problem, out[item]))
    return out, predicted


def calibrated(imported: Any, profiles: ProfileSet, device: str, repeats: int,
               warmup: int) -> tuple[ProfileSet, dict]:
    """``profiles`` with each device's op times scaled to sum to the whole model's median time on that device in the
    split executor (:func:`~onnx_sched.profiling.scaled_to`), and those times.  Per-op profiles are taken op by op
    (ONNX Runtime with optimizations off; CUDA events around each op, launch gaps included) while a part runs
    optimized and pipelined, so their sums miss the device's real scale, and a planner would trade ops between
    devices at the wrong rate."""
    n = imported.graph.n_ops
    whole = np.median(interleaved_seconds(imported, np.stack([np.zeros(n, np.int64), np.ones(n, np.int64)]),
                                          ["CPU", device], repeats=repeats, warmup=warmup), axis=1)
    devices = tuple(scaled_to(d, float(t), "(whole model in the split executor)")
                    for d, t in zip(profiles.devices, whole))
    scaled = ProfileSet(devices, profiles.transfers, profiles.default_transfer, profiles.host)
    return scaled, {d.name: {"profile_sum_ms": 1e3 * sum(d.op_seconds.values()), "whole_model_ms": 1e3 * float(t)}
                    for d, t in zip(profiles.devices, whole)}


def bench_model(path: Path, device: str, plans: list[str], repeats: int, warmup: int, profile_repeats: int,
                time_limit: float, profiles_dir: Path | None, calibrate: bool = True) -> dict:
    """Profile, plan and run one model (module docstring)."""
    from onnx_sched.bench.split_executor import split_model

    t0 = time.perf_counter()
    imported = with_random_weights(import_onnx(path))
    graph = imported.graph
    cpu = ProfileSet((profile_ort(imported, threads=1, repeats=profile_repeats),))
    if torch_device(device):
        gpu = profile_torch_set(imported, torch_device(device), repeats=profile_repeats, hosts=cpu.names)
    else:  # an ONNX Runtime GPU provider (onnxruntime-gpu)
        gpu = profile_model(imported, device, "ort", repeats=profile_repeats, hosts=cpu.names)
    if gpu.names[0] in cpu.names:
        raise ValueError(f"device 1 ({device}) must be another device than the CPU one ({cpu.names[0]})")
    profiles = cpu.merged(gpu)
    if profiles_dir is not None:
        profiles_dir.mkdir(parents=True, exist_ok=True)
        save_profiles(profiles, profiles_dir / f"{path.stem}.json")
    scale = None
    if calibrate:
        profiles, scale = calibrated(imported, profiles, device, repeats, warmup)
    profile_s = time.perf_counter() - t0
    placements, predicted = plan(graph, profiles, plans, time_limit)
    names = list(placements)
    rows, row_of = [], {}
    for name in names:  # identical placements run once
        key = placements[name].tobytes()
        if key not in row_of:
            row_of[key] = len(rows)
            rows.append(placements[name])
    seconds = interleaved_seconds(imported, np.stack(rows), ["CPU", device], repeats=repeats, warmup=warmup)
    median = np.median(seconds, axis=1)
    q1, q3 = np.percentile(seconds, [25, 75], axis=1)
    singles = [row_of[placements[n].tobytes()] for n in names[:2]]
    best_single = float(min(median[singles]))
    out = {"model": path.stem, "ops": graph.n_ops, "device": device, "profile_seconds": round(profile_s, 1),
           "calibration": scale,
           "profile_total_ms": {d.name: 1e3 * d.total_seconds for d in profiles.devices},
           "transfers": {f"{s}->{t}": {"latency_us": 1e6 * m.latency_s, "bandwidth_GBps": m.bandwidth_Bps / 1e9}
                         for (s, t), m in profiles.transfers.items()},
           "placements": []}
    for name in names:
        p, r = placements[name], row_of[placements[name].tobytes()]
        out["placements"].append({
            "placement": name, "gpu_ops": int((p == 1).sum()), "parts": len(split_model(imported, p)),
            "predicted_ms": 1e3 * float(predicted[name]), "measured_ms": 1e3 * float(median[r]),
            "iqr_ms": [1e3 * float(q1[r]), 1e3 * float(q3[r])], "speedup_over_best_single": best_single / median[r]})
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def table(results: list[dict]) -> tuple[Table, str]:
    """The results as a rich table and as markdown."""
    t = Table(title="CPU (ORT, 1 core) + GPU (torch) placements: predicted vs measured")
    cols = ["model", "ops", "placement", "GPU ops", "parts", "predicted ms", "measured ms (IQR)", "x best single"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("model", "placement") else "right")
    md = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" if c in ("model", "placement") else "---:"
                                                                for c in cols) + " |"]
    for r in results:
        if "error" in r:
            t.add_row(r["model"], "", r["error"][:60], *[""] * 5)
            md.append(f"| {r['model']} | | {r['error']} | | | | | |")
            continue
        for p in r["placements"]:
            cells = [r["model"], str(r["ops"]), p["placement"], str(p["gpu_ops"]), str(p["parts"]),
                     f"{p['predicted_ms']:.2f}",
                     f"{p['measured_ms']:.2f} ({p['iqr_ms'][0]:.2f}-{p['iqr_ms'][1]:.2f})",
                     f"{p['speedup_over_best_single']:.2f}"]
            t.add_row(*cells)
            md.append("| " + " | ".join(cells) + " |")
    return t, "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--device", default="cuda:0",
                    help="device 1: a torch device (cuda:N, torch:cpu) or an ONNX Runtime GPU provider "
                         "(CUDAExecutionProvider, with onnxruntime-gpu)")
    ap.add_argument("--plans", nargs="*", default=PLANS, help="MODE:PASS, MODE sequential or concurrent")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile-repeats", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=5.0, help="seconds per latency pass")
    ap.add_argument("--out", type=Path, default=None, help="JSON results")
    ap.add_argument("--markdown", type=Path, default=None, help="markdown table")
    ap.add_argument("--profiles-dir", type=Path, default=None, help="write each model's merged profile here")
    ap.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                    help="plan with the per-op profiles as measured, not scaled to each device's whole-model time")
    args = ap.parse_args()
    console = Console()
    results = []
    for name in args.models:
        path = CORPUS / f"{name}.onnx"
        try:
            r = bench_model(path, args.device, args.plans, args.repeats, args.warmup, args.profile_repeats,
                            args.time_limit, args.profiles_dir, args.calibrate)
        except Exception as exc:  # a model the converter or runtime cannot take is a row, not the end of the run
            traceback.print_exc(file=sys.stderr)
            r = {"model": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
        results.append(r)
        console.print(f"{name}: {json.dumps(r)[:300]}")
        if args.out:
            args.out.write_text(json.dumps({"device": args.device, "results": results}, indent=1))
    t, md = table(results)
    console.print(t)
    if args.markdown:
        args.markdown.write_text(md)


if __name__ == "__main__":
    main()
