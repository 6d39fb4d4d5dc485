"""Paper 004's tables 2 and 3 on this machine: placements measured with OpenVINO, predicted beside measured.

For each model (OpenVINO IR from the corpus):

1. profile it on the real CPU (``onnx-sched profile MODEL.xml -d CPU``) and write a two-device
   profile: the CPU and ``CPUB``, the CPU plugin registered a second time (its profile is a copy
   of the CPU's: it is the same hardware);
2. get each row's placement with the command printed next to it (``onnx-sched optimize ...``,
   run here through :func:`onnx_sched.optimize_model`, the same code): CPU-only, the second
   device only ("GPU-only"), OpenVINO's AUTO plugin with the CPU or the other device first
   (real ``AUTO:`` runs), the learned baselines ``placeto`` and ``rnn-placer`` (Placeto and the
   seq2seq LSTM placer of section 3.3), ``hsdag``, each with ``reward=measured``, and hsdag's three
   table-3 ablations (``--rows`` keeps a subset; CPU-only is always kept, it is the reference);
3. time every row again, interleaved: ``--rounds`` rounds, each timing every row once with paper
   004's protocol (10 runs, mean of the last 5) in a rotated order; a row's number is the median
   over rounds.  The machine is shared, so the interleaving matters more than the run count.

Prints the tables and writes JSON (``--out``).

    python benchmarks/hsdag_tables.py --models resnet50,bert_base,light_inception_v2 --out benchmarks/hsdag_tables.json
    python benchmarks/hsdag_tables.py --rows cpu-only,single:1,placeto,rnn-placer --out benchmarks/placers_tables.json
    python benchmarks/hsdag_tables.py --models examples/inception_v3.xml --out /tmp/inception_v3_tables.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "openvino"
RUN_DEVICES = "CPU,CPUB"
HSDAG_ROWS = ("hsdag", "hsdag-no-shape", "hsdag-no-node-id", "hsdag-no-structural")


def model_path(entry: str) -> tuple[Path, str]:
    """``--models`` entry -> (IR path, name): a corpus name (``CORPUS/<name>.xml``) or an explicit ``.xml`` path."""
    if entry.endswith(".xml"):
        path = Path(entry).expanduser().resolve()
        return path, path.stem
    return CORPUS / f"{entry}.xml", entry


def two_device_profile(model: Path, out_dir: Path) -> Path:
    """Profile ``model`` on the CPU and add ``CPUB`` as a copy (same hardware)."""
    cpu = out_dir / f"{model.stem}_cpu.json"
    cmd = [sys.executable, "-m", "onnx_sched.cli", "profile", str(model), "-d", "CPU", "-o", str(cpu)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    data = json.loads(cpu.read_text())
    second = dict(data["devices"][0], name="CPUB", notes="copy of the CPU profile: CPUB is the CPU plugin registered again")
    data["devices"].append(second)
    both = out_dir / f"{model.stem}_cpu_cpub.json"
    both.write_text(json.dumps(data))
    return both


def command(model: Path, method: str, profile: Path, time_limit: float, options: dict[str, Any]) -> str:
    opts = "".join(f" --option {k}={v}" for k, v in options.items())
    return (f"onnx-sched optimize {model} -o /tmp/{model.stem}_{method}.xml --objective latency --method {method} "
            f"--profiles {profile} --time-limit {time_limit:g}{opts}")


def rows_for(model: Path, profile: Path, hsdag_limit: float, ablation_limit: float, skip_ablations: bool,
             learned_limit: float = 60.0, only: tuple[str, ...] = ()) -> list[dict]:
    """Each row's placement (and what its pass reported); ``only``: the methods to keep (CPU-only always)."""
    from onnx_sched.api import optimize_model

    rows = []
    plan: list[tuple[str, str, float, dict[str, Any]]] = [
        ("CPU-only", "cpu-only", 10, {}),
        ("GPU-only (2nd device: CPUB)", "single:1", 10, {}),
        ("OpenVINO-CPU (AUTO, CPU first)", "openvino-auto-cpu-first", 30, {"run_devices": RUN_DEVICES}),
        ("OpenVINO-GPU (AUTO, CPUB first)", "openvino-auto-gpu-first", 30, {"run_devices": RUN_DEVICES}),
        ("Placeto", "placeto", learned_limit, {"reward": "measured", "run_devices": RUN_DEVICES, "measure_budget": 4}),
        ("RNN-based (seq2seq LSTM)", "rnn-placer", learned_limit,
         {"reward": "measured", "run_devices": RUN_DEVICES, "measure_budget": 4}),
        ("HSDAG", "hsdag", hsdag_limit, {"reward": "measured", "run_devices": RUN_DEVICES}),
    ]
    if not skip_ablations:
        for label, m in (("w/o output shape", "hsdag-no-shape"), ("w/o node ID", "hsdag-no-node-id"),
                         ("w/o graph structural features", "hsdag-no-structural")):
            plan.append((label, m, ablation_limit, {"reward": "measured", "run_devices": RUN_DEVICES, "measure_budget": 4}))
    if only:
        plan = [row for row in plan if row[1] in only or row[1] == "cpu-only"]
    for label, method, limit, options in plan:
        t0 = time.perf_counter()
        if method == "single:1":
            from onnx_sched.cost import latency as lat
            from onnx_sched.importers.dispatch import import_model
            from onnx_sched.objectives import build_problem
            from onnx_sched.passes.placement.single import single_device

            graph = import_model(model).graph
            problem = build_problem("latency", graph, profiles=(profile,))
            placement = single_device(problem, 1)
            rows.append({"row": label, "method": "single device 1 (no pass: every op on CPUB)",
                         "placement": placement, "predicted_s": float(lat.evaluate(problem, placement)), "details": {},
                         "command": "(every op on device 1; timed below)", "seconds": 0.0})
            continue
        res = optimize_model(model, "latency", method, limit, options=options, profiles=(profile,))
        details = res.report["details"]
        rows.append({"row": label, "method": method, "placement": res.schedule.placement,
                     "predicted_s": float(res.report["latency_s"]["output"]), "details": details,
                     "auto_target": details.get("auto_target"), "command": command(model, method, profile, limit, options),
                     "seconds": time.perf_counter() - t0})
        print(f"  {label:<34} {method:<24} predicted {rows[-1]['predicted_s'] * 1e3:8.2f} ms  "
              f"pass-measured {details.get('measured_latency_s', float('nan')) * 1e3:8.2f} ms  "
              f"({rows[-1]['seconds']:.0f} s)", flush=True)
    return rows


def interleaved(model: Path, rows: list[dict], rounds: int) -> None:
    """Time every row ``rounds`` times, interleaved (rotated order), paper protocol each time."""
    from onnx_sched.bench.runtimes.openvino import PlacementTimer
    from onnx_sched.importers.dispatch import import_model

    timer = PlacementTimer(import_model(model), RUN_DEVICES.split(","))
    timer.core.set_property("AUTO", {"ENABLE_STARTUP_FALLBACK": False})
    compiled = []
    for r in rows:
        c, target = timer.compile_device(r["auto_target"]) if r.get("auto_target") else timer.compile_placement(r["placement"])
        r["target"] = target
        compiled.append(c)
    for r in rows:
        r["rounds_s"] = []
    for k in range(rounds):
        order = list(range(len(rows)))
        order = order[k % len(order):] + order[:k % len(order)]
        for i in order:
            rep = timer.time_compiled(compiled[i])
            rows[i]["rounds_s"].append(rep["seconds"])
            rows[i]["execution_devices"] = rep["execution_devices"]
    for r in rows:
        r["measured_s"] = float(np.median(r["rounds_s"]))


def table(name: str, rows: list[dict], labels: tuple[str, ...] | None = None) -> str:
    cpu = next(r["measured_s"] for r in rows if r["row"] == "CPU-only")
    cpu_pred = next(r["predicted_s"] for r in rows if r["row"] == "CPU-only")
    out = [f"{name}", "| row | measured l_P(G) s | speedup % | predicted s | predicted speedup % | pass-measured s | target |",
           "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        if labels is not None and r["row"] not in labels:
            continue
        pm = r["details"].get("measured_latency_s")
        out.append(f"| {r['row']} | {r['measured_s']:.4f} | {100 * (cpu - r['measured_s']) / cpu:.1f} | "
                   f"{r['predicted_s']:.4f} | {100 * (cpu_pred - r['predicted_s']) / cpu_pred:.1f} | "
                   f"{'' if pm is None else f'{pm:.4f}'} | {r['target']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert_base,light_inception_v2",
                    help="comma list of corpus names (CORPUS/<name>.xml) or explicit OpenVINO IR paths ending in .xml")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "hsdag_tables.json")
    ap.add_argument("--work", type=Path, default=Path("/tmp/hsdag_tables"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hsdag-time-limit", type=float, default=90.0)
    ap.add_argument("--ablation-time-limit", type=float, default=40.0)
    ap.add_argument("--skip-ablations", action="store_true")
    ap.add_argument("--learned-time-limit", type=float, default=60.0, help="placeto and rnn-placer rows")
    ap.add_argument("--rows", default="", help="comma list of row methods to keep (single:1 = GPU-only); default all")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    from onnx_sched.devices import list_devices

    result: dict[str, Any] = {"command": "python benchmarks/hsdag_tables.py " + " ".join(argv or sys.argv[1:]),
                              "devices": [d.to_dict() for d in list_devices()], "models": {}}
    for entry in args.models.split(","):
        model, name = model_path(entry)
        print(f"{name}: profiling", flush=True)
        profile = two_device_profile(model, args.work)
        only = tuple(r for r in args.rows.split(",") if r)
        rows = rows_for(model, profile, args.hsdag_time_limit, args.ablation_time_limit, args.skip_ablations,
                        args.learned_time_limit, only)
        interleaved(model, rows, args.rounds)
        print(table(name, rows))
        result["models"][name] = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()
                                   if k != "placement"} | {"ops_on_device_1": int((r["placement"] == 1).sum()),
                                                           "ops": int(len(r["placement"]))} for r in rows]
        args.out.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
