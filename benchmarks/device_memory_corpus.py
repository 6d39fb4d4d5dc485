"""Split every corpus model over two devices with `onnx-sched optimize --devices`, and check the reports.

For each model: run the CLI's code path (`optimize_model` with devices and an
optional memory limit), then re-evaluate the report's `schedule` from its names
alone (`steps_from_json` + `walk`) and check that its per-device peaks equal the
report's; also check that the written ONNX model passes `onnx.checker`, and that the model alone -- its node
order, `pkg.onnx_sched.device` on each node and the transfers it records (`onnx_sched.transfer_steps`) -- gives the
same per-device peaks (`load_schedule` without the report; `model alone`), next to the peak the same file would
give with every transfer as early as possible (`as early`: what the node order and devices alone say).  Prints
the single-device peak, the lower bound, the split peak, per-device peaks,
transfers and seconds; writes JSON.

    python benchmarks/device_memory_corpus.py --method auto --time-limit 10 --out docs/device_memory_corpus.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx
from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.bench.runtimes.device_plan import load_schedule
from onnx_sched.cost import device_memory as dm
from onnx_sched.exporters.dispatch import save_model
from onnx_sched.objectives.peak_mem_devices import steps_from_json, steps_in_file_order

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"
MIB = 2**20


def run(path: Path, method: str, devices: tuple[str, ...], time_limit: float, work: Path) -> dict:
    t0 = time.perf_counter()
    result = optimize_model(path, "peak-mem", method, time_limit, devices=devices)
    seconds = time.perf_counter() - t0
    rep = result.report
    walked = dm.walk(result.problem, steps_from_json(result.problem, rep["schedule"]))
    out = work / f"{path.stem}.split.onnx"
    save_model(result.model, out, source_path=path)
    onnx.checker.check_model(str(out))
    per_device = dict(zip(result.problem.devices, walked.per_device_peak.tolist()))
    alone = load_schedule(out)
    placement = dm.placement_of(alone.problem.graph.n_ops, alone.steps)
    early = dm.walk(alone.problem, steps_in_file_order(alone.problem, placement))
    return {"model": path.stem, "ops": rep["ops"], "method_used": rep["method_used"],
            "single_device": rep["peak_bytes"]["input"], "lower_bound": rep["peak_bytes"]["lower_bound"],
            "split": rep["peak_bytes"]["output"], "per_device": rep["per_device_peak_bytes"],
            "schedule_reevaluates": per_device == rep["per_device_peak_bytes"], "optimal": rep["optimal"],
            "model_alone_reevaluates": (dict(zip(alone.problem.devices, alone.walk.per_device_peak.tolist()))
                                        == rep["per_device_peak_bytes"]),
            "as_early_peak": early.peak,
            "transfers": rep["transfers"], "transferred_bytes": rep["transferred_bytes"], "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--method", default="auto")
    ap.add_argument("--devices", default="CPU,GPU")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    paths = sorted(args.corpus.glob("*.onnx"))
    if args.models:
        paths = [p for p in paths if p.stem in set(args.models)]
    devices = tuple(args.devices.split(","))
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_split_") as tmp:
        for path in paths:
            row = run(path, args.method, devices, args.time_limit, Path(tmp))
            rows.append(row)
            console.print(f"{row['model']}: {row['single_device'] / MIB:.2f} -> {row['split'] / MIB:.2f} MiB "
                          f"(bound {row['lower_bound'] / MIB:.2f}), schedule re-evaluates: {row['schedule_reevaluates']}")
    table = Table(title=f"peak memory over {', '.join(devices)}: {args.method}, --time-limit {args.time_limit:g}")
    for col in ("model", "ops", "one device MiB", "split MiB", "bound MiB", "per device MiB", "transfers", "proven",
                "re-evaluates", "model alone", "as early MiB", "s"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        table.add_row(r["model"], str(r["ops"]), f"{r['single_device'] / MIB:.2f}", f"{r['split'] / MIB:.2f}",
                      f"{r['lower_bound'] / MIB:.2f}", " / ".join(f"{v / MIB:.2f}" for v in r["per_device"].values()),
                      str(r["transfers"]), "yes" if r["optimal"] else "no", str(r["schedule_reevaluates"]),
                      str(r["model_alone_reevaluates"]), f"{r['as_early_peak'] / MIB:.2f}", f"{r['seconds']:.1f}")
    console.print(table)
    if args.out:
        command = "python benchmarks/device_memory_corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=2) + "\n")
    later = [r for r in rows if r["as_early_peak"] > r["split"]]
    console.print(f"the model alone re-evaluates on {sum(r['model_alone_reevaluates'] for r in rows)} of {len(rows)}; "
                  f"with every transfer as early as possible the peak would be higher on {len(later)}"
                  + (f" (by {sum(r['as_early_peak'] / r['split'] - 1 for r in later) / len(later):.1%} on average)"
                     if later else ""))
    return 0 if all(r["schedule_reevaluates"] and r["model_alone_reevaluates"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
