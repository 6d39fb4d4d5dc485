"""Chromosome evaluations per second of the multi-device memory model (paper 003's fitness).

Target (issue 14): at least 20,000 decode + evaluate calls per second on a 500-op
graph on one core.  Times :func:`onnx_sched.cost.device_memory.evaluate_keys` on
populations of random chromosomes (numba compiled first, off the clock), for
synthetic graphs of several sizes and corpus models, 2 and 3 devices: dense
Erdos-Renyi graphs (``er-N``, p = 0.05: about 6,000 edges at 500 ops) and sparse
Watts-Strogatz ones (``ws-N``, k = 4: about two inputs an op, like the corpus
networks).  ``--cpu`` pins the process to one core (pick a quiet one); the load
average before and after the run goes into the JSON, since another job on the
core slows every row.

    python benchmarks/device_memory_speed.py --cpu 1 --out docs/device_memory_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.cost import device_memory as dm
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.synth.random_dags import er_graph, ws_graph

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"


def rate(problem: dm.DeviceMemoryProblem, population: int, repeats: int) -> float:
    """Evaluations per second, best of ``repeats`` batches of ``population`` chromosomes."""
    keys = np.random.default_rng(0).random((population, dm.chromosome_size(problem)))
    dm.evaluate_keys(problem, keys[:2])  # compile
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dm.evaluate_keys(problem, keys)
        best = min(best, time.perf_counter() - t0)
    return population / best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[100, 500, 2000], help="dense ER graphs (er-N)")
    ap.add_argument("--sparse-sizes", type=int, nargs="*", default=[500], help="sparse WS graphs (ws-N)")
    ap.add_argument("--cpu", type=int, help="pin the process to this core (os.sched_setaffinity)")
    ap.add_argument("--models", nargs="*", default=["randwire_ws", "resnet50", "bert_base"])
    ap.add_argument("--population", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    load_before = os.getloadavg()
    graphs = [(f"er-{n}", er_graph(n, 200_000 + n)) for n in args.sizes]
    graphs += [(f"ws-{n}", ws_graph(n, 300_000 + n)) for n in args.sparse_sizes]
    graphs += [(m, import_onnx(CORPUS / f"{m}.onnx").graph) for m in args.models if (CORPUS / f"{m}.onnx").exists()]
    rows = []
    for name, graph in graphs:
        for devices in (2, 3):
            problem = dm.DeviceMemoryProblem.build(graph, tuple(f"D{i}" for i in range(devices)))
            rows.append({"graph": name, "ops": graph.n_ops, "tensors": graph.n_tensors, "devices": devices,
                         "edges": len(problem.arrays.in_idx), "genes": dm.chromosome_size(problem),
                         "evals_per_s": rate(problem, args.population, args.repeats)})
    table = Table(title="multi-device memory: decode + evaluate per second (one core)")
    for col in ("graph", "ops", "edges", "devices", "genes", "evaluations / s"):
        table.add_column(col, justify="left" if col == "graph" else "right")
    for r in rows:
        table.add_row(r["graph"], str(r["ops"]), str(r["edges"]), str(r["devices"]), str(r["genes"]),
                      f"{r['evals_per_s']:,.0f}")
    Console().print(table)
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    if args.out:
        command = "python benchmarks/device_memory_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
        args.out.write_text(json.dumps({"command": command, "cpu_count": os.cpu_count(), "cpu": args.cpu,
                                        "load_before": load_before, "load_after": load_after, "rows": rows},
                                       indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
