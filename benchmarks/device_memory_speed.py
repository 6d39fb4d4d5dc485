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

``--against REV`` also times the kernels of git revision REV
(``onnx_sched/cost/device_memory_kernels.py`` as it was there, loaded as a module of its own; what it
imports, such as ``dag_kernels``' heap, is today's) in the same process, alternating batch by batch
with today's on the same chromosomes, and checks both give the same peaks: a before / after
comparison that the machine's drift between two runs does not blur.

    python benchmarks/device_memory_speed.py --cpu 1 --against 4e9fa63 --out docs/device_memory_speed_ab.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numba
import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.cost import device_memory as dm
from onnx_sched.cost import device_memory_kernels
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.synth.random_dags import er_graph, ws_graph

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
KERNELS = "onnx_sched/cost/device_memory_kernels.py"


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


def kernels_at(rev: str, folder: Path) -> ModuleType:
    """The device-memory kernels module as it was at git revision ``rev``, imported from a copy in ``folder``."""
    try:
        source = subprocess.run(["git", "show", f"{rev}:{KERNELS}"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"--against {rev}: {e.stderr.strip() or 'git show failed'}") from None
    path = folder / f"device_memory_kernels_{rev.replace('/', '_')}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not all(hasattr(module, name) for name in ("work_arrays", "fresh", "evaluate_population")):
        raise SystemExit(f"--against {rev}: its kernels have no work_arrays / fresh / evaluate_population")
    return module


def rates_against(problem: dm.DeviceMemoryProblem, before: ModuleType, population: int,
                  repeats: int) -> tuple[float, float, bool]:
    """Evaluations per second of ``before``'s kernels and today's, alternating batches on the same chromosomes (best
    of ``repeats`` each, the first module alternating too), and whether both gave the same peaks and bytes moved.

    Each batch calls the kernel compiled for its arguments directly: the two modules' work arrays have the same
    fields, so numba's dispatcher would take them for one type and look up the right kernel the slow way on every
    call of whichever module did not run first."""
    keys = np.random.default_rng(0).random((population, dm.chromosome_size(problem)))
    args = problem.kernel_args()[:-1]
    nd = problem.n_devices
    runs = {}
    for label, module in (("before", before), ("after", device_memory_kernels)):
        work = module.fresh(module.work_arrays(nd, args[0], args[1], problem.is_input, args[8]))
        call = (keys, nd, problem.transfer_slot, *args, work, np.empty(0, np.int64), np.zeros((population, nd + 1),
                                                                                           np.int64))
        kernel = module.evaluate_population
        kernel(*call)  # compile
        runs[label] = (kernel.overloads[tuple(numba.typeof(a) for a in call)].entry_point, call)
    best = {}
    for rep in range(repeats):
        for label in (("before", "after") if rep % 2 == 0 else ("after", "before")):
            entry, call = runs[label]
            t0 = time.perf_counter()
            entry(*call)
            best[label] = min(best.get(label, np.inf), time.perf_counter() - t0)
    return population / best["before"], population / best["after"], bool(np.array_equal(runs["before"][1][-1],
                                                                                        runs["after"][1][-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[100, 500, 2000], help="dense ER graphs (er-N)")
    ap.add_argument("--sparse-sizes", type=int, nargs="*", default=[500], help="sparse WS graphs (ws-N)")
    ap.add_argument("--cpu", type=int, help="pin the process to this core (os.sched_setaffinity)")
    ap.add_argument("--models", nargs="*", default=["randwire_ws", "resnet50", "bert_base"])
    ap.add_argument("--population", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--against", metavar="REV", help="also time the kernels of this git revision, alternating")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    load_before = os.getloadavg()
    graphs = [(f"er-{n}", er_graph(n, 200_000 + n)) for n in args.sizes]
    graphs += [(f"ws-{n}", ws_graph(n, 300_000 + n)) for n in args.sparse_sizes]
    graphs += [(m, import_onnx(CORPUS / f"{m}.onnx").graph) for m in args.models if (CORPUS / f"{m}.onnx").exists()]
    folder = tempfile.TemporaryDirectory()
    before = kernels_at(args.against, Path(folder.name)) if args.against else None  # today's dag_kernels beside it
    rows = []
    for name, graph in graphs:
        for devices in (2, 3):
            problem = dm.DeviceMemoryProblem.build(graph, tuple(f"D{i}" for i in range(devices)))
            row = {"graph": name, "ops": graph.n_ops, "tensors": graph.n_tensors, "devices": devices,
                   "edges": len(problem.arrays.in_idx), "genes": dm.chromosome_size(problem)}
            if before is None:
                row["evals_per_s"] = rate(problem, args.population, args.repeats)
            else:
                old, new, same = rates_against(problem, before, args.population, args.repeats)
                row.update(evals_per_s=new, before_evals_per_s=old, speedup=new / old, same_peaks=same)
            rows.append(row)
    folder.cleanup()  # an error above ends the process, whose exit removes the folder too
    table = Table(title="multi-device memory: decode + evaluate per second (one core)")
    extra = (f"at {args.against}", "speed-up", "same peaks") if before is not None else ()
    for col in ("graph", "ops", "edges", "devices", "genes", *extra[:1], "evaluations / s", *extra[1:]):
        table.add_column(col, justify="left" if col == "graph" else "right")
    for r in rows:
        cells = [r["graph"], str(r["ops"]), str(r["edges"]), str(r["devices"]), str(r["genes"])]
        if before is None:
            cells.append(f"{r['evals_per_s']:,.0f}")
        else:
            cells += [f"{r['before_evals_per_s']:,.0f}", f"{r['evals_per_s']:,.0f}", f"{r['speedup']:.2f}x",
                      "yes" if r["same_peaks"] else "NO"]
        table.add_row(*cells)
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
