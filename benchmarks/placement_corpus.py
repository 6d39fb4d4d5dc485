"""Real split execution of every corpus model: OpenVINO HETERO and the ORT split executor.

For each model a two-device placement is computed and then *run*:

* devices: two identical CPU "devices" (the machine has only a CPU).  Op times
  come from profiling the model itself with ONNX Runtime (one thread, median of
  runs), the transfer model from the measured cost of one split-executor
  boundary (:func:`onnx_sched.profiling.measure_split_transfer`);
* placement: ``heft-place`` under the concurrent latency model (independent
  branches go to different devices); when HEFT keeps every op on one device (a
  chain-like model) the placement falls back to a topological half split, so
  every model crosses a device boundary ("method" column);
* OpenVINO: ``HETERO:CPU,CPUB`` (CPU plugin registered twice), f32, against
  ``compile_model(CPU)``;
* ORT: split executor, one session per part, devices = one thread each pinned to
  core 0 / core 1, concurrent and sequential, against one whole-model session
  on one core.

Outputs must equal single-device execution within rtol = atol = 1e-5.  The
corpus's stripped weights are zeros; ``--weights random`` (default) replaces them
with seeded random values drawn the way networks are initialised (fan-in scaled
matrices, near-one scales, small biases: :func:`with_random_weights`), so outputs
are non-trivial and activations O(1) (same graph, same sizes).

    python benchmarks/placement_corpus.py --repeats 10 --markdown out/placement_corpus.md --out out/placement_corpus.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.bench.runtimes.openvino import bench_openvino
from onnx_sched.bench.runtimes.ort import bench_ort
from onnx_sched.bench.split_executor import DeviceSpec
from onnx_sched.bench.timing import time_calls
from onnx_sched.bench.weights import with_filled_weights, with_random_weights
from onnx_sched.cost import latency as lat
from onnx_sched.dag import kahn_order
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.passes.placement._optimal import cpsat_placement, mincut_placement
from onnx_sched.profiling import ProfileSet, TransferModel, measure_split_transfer, profile_ort, scaled_to

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"


def boundary_transfer() -> TransferModel:
    """Measured cost of one split-executor boundary (:func:`measure_split_transfer`)."""
    return measure_split_transfer()


def two_cpu_profiles(imp, tm: TransferModel, repeats: int) -> ProfileSet:  # noqa: ANN001
    """The model's own single-thread ORT profile twice (``CPU``, ``CPUB``) and the boundary cost."""
    from dataclasses import replace

    cpu = replace(profile_ort(imp, threads=1, repeats=repeats), name="CPU", kind="cpu")
    b = replace(cpu, name="CPUB")
    return ProfileSet((cpu, b), {("CPU", "CPUB"): tm, ("CPUB", "CPU"): tm}, tm, "CPU")


def choose_placement(graph, profiles: ProfileSet) -> tuple[np.ndarray, str, float]:  # noqa: ANN001
    problem = lat.placement_problem(graph, profiles, mode="concurrent")
    sched = get_pass("heft-place", "latency")(graph, PassContext(problem=problem))
    p = np.asarray(sched.placement)
    if len(np.unique(p)) >= 2:
        return p, "heft-place", float(sched.info["latency"])
    order = kahn_order(graph)
    p = np.zeros(graph.n_ops, np.int64)
    p[order[graph.n_ops // 2:]] = 1
    return p, "half-split", lat.concurrent_latency(problem, p)


def _error(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    key = [ln for ln in lines if "Conversion is failed" in ln or "larger than" in ln]
    return f"{type(exc).__name__}: {(key[-1] if key else lines[-1] if lines else '')[:160]}"


def with_weights(imp, weights: str):  # noqa: ANN001, ANN201
    if weights == "random":
        return with_random_weights(imp)
    if weights == "fill":
        return with_filled_weights(imp, 0.01)
    return imp


def run_model(path: Path, tm: TransferModel, warmup: int, repeats: int, runtimes: list[str],
              weights: str = "random") -> dict:
    imp = with_weights(import_onnx(path), weights)
    g = imp.graph
    profiles = two_cpu_profiles(imp, tm, max(3, repeats // 2))
    p, method, predicted = choose_placement(g, profiles)
    row: dict = {"model": path.stem, "ops": g.n_ops, "method": method, "ops_dev1": int((p == 1).sum()),
                 "predicted_concurrent_s": predicted,
                 "placement": "".join(str(int(d)) for d in p)}  # device per op, in graph op order
    if "openvino" in runtimes:
        try:
            row["openvino"] = bench_openvino(imp, p, ["CPU", "CPUB"], warmup=warmup, repeats=repeats)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports failures, it does not stop
            row["openvino"] = {"error": _error(exc)}
    if "ort" in runtimes:
        ncpu = os.cpu_count() or 1
        devs = [DeviceSpec("core0", cores=(0,)), DeviceSpec("core1", cores=(1 % ncpu,))]
        try:
            row["ort"] = bench_ort(imp, p, devs, warmup=warmup, repeats=repeats, concurrent=True)
            seq = bench_ort(imp, p, devs, warmup=warmup, repeats=repeats, concurrent=False, reference=False)
            row["ort"]["split_sequential"] = seq["split"]
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            row["ort"] = {"error": _error(exc)}
    return row


SIM_METHODS = ("cpu-only", "gpu-only", "auto-gpu-first", "random-place", "heft-place", "hsdag")
SIM_DEVICE_SETS = (("CPU", "GPU.0", "GPU.1"), ("CPU", "GPU.0"), ("CPU", "GPU.1"))


def simulated_rows(paths: list[Path], time_limit: float) -> list[dict]:
    """Paper 004 table 2 on SIMULATED devices: predicted sequential latency of every
    baseline, the learned placer and the exact optimum (min-cut for two devices,
    CP-SAT hinted with the best baseline for three; its bound when not proven)."""
    from onnx_sched.profiling import load_profiles

    profiles = load_profiles(ROOT / "examples" / "profiles_cpu_igpu_dgpu.json")
    rows = []
    for path in paths:
        g = import_onnx(path).graph
        for devs in SIM_DEVICE_SETS:
            problem = lat.placement_problem(g, profiles, "sequential", list(devs))
            ctx = PassContext(time_limit=time_limit, problem=problem)
            row: dict = {"model": path.stem, "ops": g.n_ops, "devices": list(devs), "simulated": problem.simulated}
            for m in SIM_METHODS:
                t = time.perf_counter()
                try:
                    sched = get_pass(m, "latency")(g, ctx)
                    row[m] = float(sched.info["latency"])
                    row[m + "_s"] = time.perf_counter() - t
                    if m in ("hsdag", "heft-place", "gpu-only"):
                        row[m + "_placement"] = sched.placement
                except ValueError as exc:
                    row[m] = None
                    row[m + "_error"] = str(exc)
            net = get_pass("hsdag", "latency")(g, PassContext(time_limit=time_limit, problem=problem,
                                                              options={"episodes": 0}))
            row["hsdag-net"] = float(net.info["latency"])
            if len(devs) == 2:
                _, value = mincut_placement(problem)
                row.update(optimum=value, proven=True, bound=value)
            else:
                hints = [row[m + "_placement"] for m in ("hsdag", "heft-place", "gpu-only") if m + "_placement" in row]
                hint = min(hints, key=lambda p: lat.sequential_latency(problem, p))
                stats: dict = {}
                _, value, proven = cpsat_placement(problem, time_limit, hint=hint, stats=stats)
                row.update(optimum=value, proven=proven, bound=max(stats.get("lower_bound", 0.0), 0.0))
            for m in ("hsdag", "heft-place", "gpu-only"):
                row.pop(m + "_placement", None)
            rows.append(row)
            print(f"{path.stem:<22} {'+'.join(devs):<17} opt {value * 1e3:9.3f}{'*' if row['proven'] else ' '} "
                  f"hsdag {row['hsdag'] * 1e3 if row['hsdag'] else float('nan'):9.3f} heft {row['heft-place'] * 1e3:9.3f}",
                  flush=True)
    return rows


def vs_heft(hsdag: float, heft: float, optimum: float, rtol: float = 1e-9) -> str:
    """'better' / 'worse' / 'tie (optimal)' (both at the optimum) / 'tie' for one problem."""
    if hsdag < heft * (1 - rtol):
        return "better"
    if hsdag > heft * (1 + rtol):
        return "worse"
    return "tie (optimal)" if hsdag <= optimum * (1 + rtol) else "tie"


def simulated_markdown(rows: list[dict], time_limit: float) -> str:
    lines = [
        "## Placement on SIMULATED CPU / iGPU / dGPU (paper 004 table 2 setting)",
        "",
        f"`python benchmarks/placement_corpus.py --simulated --time-limit {time_limit:g}`.  Predicted sequential "
        "latency (ms) from `examples/profiles_cpu_igpu_dgpu.json`: a CPU profile measured with OpenVINO on resnet50 "
        "(rate model for other models) and iGPU/dGPU devices **simulated** from it by the documented factors of "
        "`onnx_sched.profiling.SIMULATED_PRESETS`.  Optimum: s-t min-cut (2 devices, exact) or CP-SAT hinted "
        "with the best of hsdag/HEFT/GPU-only (3 devices; `*` = proven, else the CP-SAT lower bound is given). "
        "gap = hsdag / optimum - 1.  hsdag = the pass (network, then 100 per-graph REINFORCE episodes of 16 "
        "draws, reward 1 / latency, updating only the network's output logits: paper 004's per-graph episodes "
        "update the network's weights); network = the trained "
        "network alone (best of its greedy placement and 16 draws); s = hsdag pass seconds.  vs HEFT: 'tie "
        "(optimal)' = both reach the optimum, which cannot be beaten.",
        "",
        "| model | devices | CPU-only | GPU-only | single GPU, AUTO's pick (modelled) | random | HEFT | network | hsdag | s | optimum "
        "| bound | hsdag gap | vs HEFT |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    f = lambda v: "-" if v is None else f"{v * 1e3:.3f}"  # noqa: E731
    gaps: list[float] = []
    verdicts: dict[str, int] = {}
    for r in rows:
        gap = (r["hsdag"] / r["optimum"] - 1) if r.get("hsdag") else None
        verdict = "-" if gap is None else vs_heft(r["hsdag"], r["heft-place"], r["optimum"])
        if gap is not None:
            gaps.append(gap)
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        lines.append("| " + " | ".join([
            r["model"], "+".join(r["devices"]), f(r["cpu-only"]), f(r["gpu-only"]), f(r["auto-gpu-first"]),
            f(r["random-place"]), f(r["heft-place"]), f(r.get("hsdag-net")), f(r["hsdag"]),
            "-" if r.get("hsdag_s") is None else f"{r['hsdag_s']:.2f}", f(r["optimum"]) + ("*" if r["proven"] else ""),
            f(r["bound"]), "-" if gap is None else f"{100 * gap:.2f}%", verdict]) + " |")
    if gaps:
        g = np.asarray(gaps)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        lines += ["", f"hsdag gap to the optimum: mean {100 * g.mean():.2f}%, median {100 * np.median(g):.2f}%, "
                      f"max {100 * g.max():.2f}%; within 5% on {(g <= 0.05).sum()}/{len(g)} problems; "
                      f"vs HEFT on {len(g)} problems: {counts}.", ""]
    return "\n".join(lines)


BRANCHY = ("light_inception_v1", "light_inception_v2", "nasnet_a_mobile", "amoebanet_a_mobile", "randwire_ws",
           "randwire_er")


def single_thread_latency(imp, repeats: int = 10) -> float:  # noqa: ANN001
    """Median latency of the whole model in one single-thread ORT session (all optimizations)."""
    import onnxruntime as ort

    from onnx_sched.bench.inputs import random_inputs
    from onnx_sched.bench.ort_runner import make_session_options

    sess = ort.InferenceSession(imp.model.SerializeToString(), make_session_options(arena=True, opt_level="all", threads=1),
                                providers=["CPUExecutionProvider"])
    feed = random_inputs(imp.model, 0)
    times, _ = time_calls(lambda: sess.run(None, feed), 3, repeats)
    return float(np.median(times))


def concurrency_rows(paths: list[Path], repeats: int, boundaries: tuple[float, ...] = (1e-4, 3e-4, 1e-3),
                     methods: tuple[str, ...] = ("heft-place", "auto"), time_limit: float = 3.0) -> list[dict]:
    """Two one-core CPU devices (worker threads pinned to cores 0 and 1) running a
    placement concurrently versus one one-core session, interleaved runs.  Placements:
    HEFT, and the ``auto`` portfolio (single devices, HEFT, HSDAG, min cut, scored by
    the concurrent model; ``time_limit`` seconds), each planned with several boundary
    costs (about the measured cost of one extra part, 0.1 ms, and coarser): small ones
    give fine placements with many parts, larger ones branch-level splits.  A
    placement ``auto`` shares with HEFT is not run twice.  Op times: the model's
    1-thread ORT profile (optimizations off, one event per node) scaled to the measured
    latency of the optimized model, so the planner weighs them against boundary costs
    at the scale that runs."""
    from dataclasses import replace

    from onnx_sched.bench.runtimes.ort import bench_ort_interleaved

    ncpu = os.cpu_count() or 1
    devs = [DeviceSpec("core0", cores=(0,)), DeviceSpec("core1", cores=(1 % ncpu,))]
    rows = []
    for path in paths:
        imp = with_random_weights(import_onnx(path))
        g = imp.graph
        cpu = scaled_to(replace(profile_ort(imp, threads=1, repeats=5), name="CPU"), single_thread_latency(imp),
                        "(optimized single-thread latency)")
        for boundary in boundaries:
            tm = TransferModel(boundary, 10e9)
            ps = ProfileSet((cpu, replace(cpu, name="CPUB")), {("CPU", "CPUB"): tm, ("CPUB", "CPU"): tm}, tm, "CPU")
            problem = lat.placement_problem(g, ps, mode="concurrent")
            runs: dict[bytes, dict] = {}
            for method in methods:
                sched = get_pass(method, "latency")(g, PassContext(problem=problem, time_limit=time_limit))
                key = np.asarray(sched.placement, np.int64).tobytes()
                if key not in runs:
                    runs[key] = bench_ort_interleaved(imp, sched.placement, devs, repeats=repeats)
                rep = runs[key]
                row = {"model": path.stem, "boundary_s": boundary, "method": method,
                       "predicted_s": float(lat.evaluate(problem, sched.placement)),
                       "predicted_single_s": float(problem.op_time[:, 0].sum()),
                       "ops_dev1": int((sched.placement == 1).sum()), **rep}
                rows.append(row)
                single_ms, split_ms = rep["single_device"]["median_s"] * 1e3, rep["split"]["median_s"] * 1e3
                print(f"{path.stem:<20} {method:<10} boundary {boundary * 1e3:5.2f} ms parts {rep['sub_models']:3d} "
                      f"single {single_ms:8.2f} split {split_ms:8.2f} speedup {rep['speedup']:.2f} "
                      f"(load {rep['load_average']:.1f})", flush=True)
    return rows


def concurrency_markdown(rows: list[dict], repeats: int) -> str:
    lines = [
        "## Concurrent split execution: two one-core CPU devices vs one",
        "",
        f"`python benchmarks/placement_corpus.py --concurrency --repeats {repeats}`.  ORT split executor, device i = "
        "a worker thread pinned to core i running single-thread sessions; HEFT or `auto` placement (concurrent "
        "model, op times from a 1-thread ORT profile of the model scaled to its measured optimized latency; a "
        "boundary's fixed cost charged to the receiving device) planned with the given boundary cost; `auto`'s "
        "placement, when it is HEFT's, is the same run; parts cut so cross-device tensors leave a part at its end "
        "and enter at its start; "
        "runs interleaved "
        f"with a 1-thread whole-model session pinned to core 0; median of {repeats} runs (ms).  load = 1-minute "
        "load average at the end.  'split faster in' = share of the interleaved (single, split) pairs where the "
        "split run was faster (50% = no difference).",
        "",
        "| model | boundary cost (ms) | method | parts | ops on core 1 | predicted single | predicted split | single "
        "| split | speedup | split faster in | load |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {r['boundary_s'] * 1e3:.3f} | {r.get('method', 'heft-place')} | "
                     f"{r['sub_models']} | {r['ops_dev1']} | "
                     f"{r['predicted_single_s'] * 1e3:.2f} | {r['predicted_s'] * 1e3:.2f} | "
                     f"{r['single_device']['median_s'] * 1e3:.2f} | {r['split']['median_s'] * 1e3:.2f} | "
                     f"{r['speedup']:.2f}x | {100 * r['split_faster_share']:.0f}% | {r['load_average']:.1f} |")
    return "\n".join(lines) + "\n"


def _ms(d: dict | None, key: str = "median_s") -> str:
    return f"{d[key] * 1e3:.2f}" if d and key in d else "-"


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [
        "## Placement: real split execution on the corpus (two CPU devices)",
        "",
        f"`python benchmarks/placement_corpus.py --repeats {args.repeats} --warmup {args.warmup}` "
        f"(median of {args.repeats} runs after {args.warmup} warm-ups, milliseconds).  Placement: HEFT on two "
        "identical one-stream CPU devices (concurrent model), or a topological half split when HEFT uses one "
        "device.  OV = OpenVINO `HETERO:CPU,CPUB` (CPU plugin registered twice, f32) vs `CPU`; ORT = split "
        "executor, one single-thread session per part, device i pinned to core i, vs one single-thread session. "
        "'eq' = outputs equal single-device execution (rtol = atol = 1e-5); 'non-zero out' = the reference output "
        "has finite non-zero values (stripped weights: "
        f"{args.weights}; where all-zero or NaN, equality proves less).",
        "",
        "| model | ops | placement | ops on dev 1 | OV sub-models | OV single | OV HETERO | OV eq | ORT parts "
        "| ORT 1 core | ORT split seq | ORT split conc | conc speedup | ORT eq | non-zero out |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        ov, ort_ = r.get("openvino", {}), r.get("ort", {})
        ov_cells = ([str(ov.get("sub_models", "-")), _ms(ov.get("single_device")), _ms(ov.get("split")),
                     "yes" if ov.get("outputs_equal") else "NO"] if "error" not in ov else ["error", "-", "-", ov["error"][:60]])
        if not ov:
            ov_cells = ["-"] * 4
        if not ort_:
            ort_cells = ["-"] * 6
        elif "error" in ort_:
            ort_cells = ["error", "-", "-", "-", "-", ort_["error"][:60]]
        else:
            single, conc = ort_.get("single_device"), ort_.get("split")
            speed = f"{single['median_s'] / conc['median_s']:.2f}x" if single and conc else "-"
            ort_cells = [str(ort_.get("sub_models", "-")), _ms(single), _ms(ort_.get("split_sequential")), _ms(conc),
                         speed, "yes" if ort_.get("outputs_equal") else "NO"]
        info = ort_.get("outputs_informative", ov.get("outputs_informative"))
        lines.append("| " + " | ".join([r["model"], str(r["ops"]), r["method"], str(r["ops_dev1"]), *ov_cells,
                                        *ort_cells, "-" if info is None else ("yes" if info else "no")]) + " |")
    ok_ov = sum(1 for r in rows if r.get("openvino", {}).get("outputs_equal"))
    ok_ort = sum(1 for r in rows if r.get("ort", {}).get("outputs_equal"))
    lines += ["", f"Outputs equal: OpenVINO HETERO {ok_ov}/{len(rows)}, ORT split executor {ok_ort}/{len(rows)}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=None,
                    help="model stems, space- or comma-separated (default: every corpus model)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--runtimes", nargs="*", default=["openvino", "ort"])
    ap.add_argument("--weights", choices=["random", "fill", "zeros"], default="random",
                    help="stripped corpus weights: seeded random values (default), a 0.01 fill, or the file's zeros")
    ap.add_argument("--out", default=None, help="JSON results")
    ap.add_argument("--markdown", default=None, help="markdown table")
    ap.add_argument("--simulated", action="store_true",
                    help="instead of running models: paper 004 table 2 on simulated CPU/iGPU/dGPU profiles")
    ap.add_argument("--concurrency", action="store_true",
                    help="two one-core devices vs one on branchy models (>= 20 interleaved runs)")
    ap.add_argument("--time-limit", type=float, default=30.0, help="CP-SAT seconds per 3-device problem (--simulated)")
    args = ap.parse_args(argv)
    paths = sorted(CORPUS.glob("*.onnx"))
    if args.models:
        wanted = {m for arg in args.models for m in arg.split(",") if m}
        unknown = wanted - {p.stem for p in paths}
        if unknown:
            ap.error(f"not in the corpus: {', '.join(sorted(unknown))}")
        paths = [p for p in paths if p.stem in wanted]
    if args.concurrency:
        if not args.models:
            paths = [p for p in paths if p.stem in BRANCHY]
        rows = concurrency_rows(paths, max(args.repeats, 20))
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(rows, indent=2, default=str))
        md = concurrency_markdown(rows, max(args.repeats, 20))
        print(md)
        if args.markdown:
            Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
            Path(args.markdown).write_text(md)
        return 0
    if args.simulated:
        rows = simulated_rows(paths, args.time_limit)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(rows, indent=2, default=str))
        md = simulated_markdown(rows, args.time_limit)
        print(md)
        if args.markdown:
            Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
            Path(args.markdown).write_text(md)
        return 0
    tm = boundary_transfer()
    rows = []
    console = Console()
    for path in paths:
        t = time.perf_counter()
        row = run_model(path, tm, args.warmup, args.repeats, args.runtimes, args.weights)
        row["seconds"] = time.perf_counter() - t
        rows.append(row)
        ov, ort_ = row.get("openvino", {}), row.get("ort", {})
        console.print(f"{path.stem}: {row['method']} ov={ov.get('outputs_equal', ov.get('error'))} "
                      f"ort={ort_.get('outputs_equal', ort_.get('error'))} ({row['seconds']:.1f}s)")
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(rows, indent=2, default=str))
    table = Table(title="placement corpus (ms, median)")
    for col in ("model", "placement", "OV sub", "OV single", "OV hetero", "OV eq", "ORT 1core", "ORT conc", "ORT eq"):
        table.add_column(col)
    for r in rows:
        ov, ort_ = r.get("openvino", {}), r.get("ort", {})
        table.add_row(r["model"], r["method"], str(ov.get("sub_models", "err")), _ms(ov.get("single_device")),
                      _ms(ov.get("split")), str(ov.get("outputs_equal", "err")), _ms(ort_.get("single_device")),
                      _ms(ort_.get("split")), str(ort_.get("outputs_equal", "err")))
    console.print(table)
    md = markdown(rows, args)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(md)
    failed = [r["model"] for r in rows
              if not r.get("openvino", {}).get("outputs_equal", "openvino" not in args.runtimes)
              or not r.get("ort", {}).get("outputs_equal", "ort" not in args.runtimes)]
    if failed:
        console.print(f"[red]not equal / failed: {failed}[/red]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
