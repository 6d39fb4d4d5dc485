"""Fingerprint of every registered method on the corpus and on seeded synthetic graphs.

For each objective, each method of ``onnx-sched methods`` and each graph, this runs the
method through ``onnx_sched.api.schedule_graph`` (the path the CLI and plugins take) and
records the objective value, the method used, the proof flag, the bound and a hash of
the order and placement.  Two runs of two versions of the code that should behave the
same (a refactor, a dependency upgrade) must give an empty diff:

    python benchmarks/method_fingerprint.py --out /tmp/before.json
    ... change the code ...
    python benchmarks/method_fingerprint.py --out /tmp/after.json --compare /tmp/before.json

Methods whose result depends on the wall clock (searches that stop at ``--time-limit``)
run only on the small synthetic graphs, where they finish long before the limit; every
other method also runs on every model of the corpus.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress

from onnx_sched.api import schedule_graph
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.objectives import build_problem
from onnx_sched.passes import PassContext, available
from onnx_sched.synth import generate

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
MACHINES = ROOT / "examples" / "machines_3types.json"
PROFILES = ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"

#: Methods that search until the time limit: their result on a large graph depends on the machine's speed.
CLOCKED = {
    "peak-mem": {"exact", "cpsat", "auto"},
    "makespan": {"cpsat", "ga", "auto"},
    "latency": {"cpsat-place", "auto", "hsdag", "mincut"},  # mincut is CP-SAT beyond two devices
}
SYNTHETIC = [("layered", 30, 10_000), ("layered", 80, 10_001), ("er", 40, 10_002), ("ws", 60, 10_003)]


def _digest(a: np.ndarray | None) -> str | None:
    return None if a is None else hashlib.sha256(np.ascontiguousarray(a, dtype=np.int64).tobytes()).hexdigest()[:16]


def _options(objective: str) -> dict:
    """The problem options each objective needs (machine file, device profiles)."""
    return {"peak-mem": {}, "makespan": {"machines": MACHINES}, "latency": {"profiles": (PROFILES,)}}[objective]


def _row(graph, objective: str, method: str, time_limit: float) -> dict:  # noqa: ANN001
    problem = build_problem(objective, graph, **_options(objective))
    ctx = PassContext(time_limit=time_limit, seed=0, problem=problem)
    t0 = time.perf_counter()
    try:
        schedule, report = schedule_graph(graph, objective, method, ctx)
    except ValueError as exc:
        return {"error": str(exc)}
    value = {"peak-mem": lambda r: r["peak_bytes"]["output"], "makespan": lambda r: r["makespan"]["output"],
             "latency": lambda r: r["latency_s"]["output"]}[objective](report)
    return {
        "value": value,
        "method_used": report["method_used"],
        "optimal": report["optimal"],
        "kept_input_order": report["kept_input_order"],
        "order": _digest(schedule.order),
        "placement": _digest(schedule.placement),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", default=None, help="corpus model stems (default: all)")
    ap.add_argument("--objectives", nargs="*", default=["peak-mem", "makespan", "latency"])
    ap.add_argument("--methods", nargs="*", default=None, help="only these methods (default: all)")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path, default=None, help="an earlier --out: print every difference")
    args = ap.parse_args(argv)

    graphs = [(f"{fam}-{n}-{seed}", lambda f=fam, n=n, s=seed: generate(f, n, s), True) for fam, n, seed in SYNTHETIC]
    paths = sorted(args.corpus.glob("*.onnx"))
    if args.models is not None:
        paths = [p for p in paths if p.stem in set(args.models)]
    graphs += [(p.stem, lambda p=p: import_onnx(p).graph, False) for p in paths]
    jobs = [(name, load, small, obj, m) for name, load, small in graphs for obj in args.objectives for m in available(obj)
            if (small or m not in CLOCKED[obj]) and (args.methods is None or m in args.methods)]
    rows: dict[str, dict] = {}
    cache: dict[str, object] = {}
    with Progress(console=Console(stderr=True)) as bar:
        task = bar.add_task("fingerprint", total=len(jobs))
        for name, load, _, obj, method in jobs:
            graph = cache.setdefault(name, load())
            rows[f"{name} | {obj} | {method}"] = _row(graph, obj, method, args.time_limit)
            bar.advance(task)
    args.out.write_text(json.dumps(rows, indent=1, sort_keys=True))
    print(f"{len(rows)} (graph, objective, method) rows -> {args.out}")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    diffs = 0
    for key in sorted(set(before) | set(rows)):
        a, b = before.get(key), rows.get(key)
        strip = (lambda r: {k: v for k, v in r.items() if k != "seconds"} if r else r)
        if strip(a) != strip(b):
            diffs += 1
            print(f"DIFF {key}\n  before {strip(a)}\n  after  {strip(b)}")
    print(f"{diffs} differences in {len(set(before) | set(rows))} rows")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
