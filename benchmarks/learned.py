"""Learned peak-memory ordering vs classical passes on unseen layered graphs (paper 000, tables 1 and 3).

For every size, ``--graphs`` layered graphs with test seeds ``10000 + i`` (training
used seeds < 10000) are ordered by:

* approximate DP = the registry pass ``beam`` with ``--ref-width`` (the reference:
  gaps are ``100 * (peak - peak_beam) / peak_beam`` per graph, then averaged);
* classical heuristics: ``dfs``, ``bfs``, ``greedy``, ``random`` (best of 100);
* the learned pass (``passes/order/learned.py``): greedy, sample-16 (best of the greedy
  order and 16 eq. 8 samples) and beam-16, each followed by the pass's min-cut repair, and
  sample-16 without it (the policy's own orders).

Run time is the wall time of the whole pass (features + ONNX Runtime encoder +
decoding for ``learned``), after one warm-up call.  ``--ablation NAME=MODEL.onnx``
adds encoder / training-variant rows, evaluated on the first size only.

Example::

    python benchmarks/learned.py --sizes 500 1000 2000 --graphs 20 10 5 --ref-width 1000 \\
        --ablation "MLP=runs/mlp.onnx" --markdown out/learned.md --out out/learned.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.models import CHECKPOINTS
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.synth.layered import layered_graph

TEST_SEED0 = 10000
CLASSICAL = (("DFS", "dfs", {}), ("BFS", "bfs", {}), ("Greedy (memory-aware list)", "greedy", {}),
             ("Random order (best of 100)", "random", {"samples": 100}))
LEARNED = (("greedy", {}), ("sample-16", {"samples": 16}), ("beam-16", {"beam": 16}),
           ("sample-16, no repair", {"samples": 16, "repair": 0}))


def _run(method: str, opts: dict[str, Any], g, seed: int, time_limit: float) -> tuple[int, float]:
    fn = get_pass(method, "peak-mem")
    t0 = time.perf_counter()
    s = fn(g, PassContext(time_limit=time_limit, seed=seed, options=opts))
    return int(s.info["peak_bytes"]), time.perf_counter() - t0


def _row(name: str, peaks: list[int], times: list[float], ref: list[int]) -> dict[str, Any]:
    p, r = np.asarray(peaks, float), np.asarray(ref, float)
    gaps = 100.0 * (p - r) / r
    ci = 1.96 * gaps.std(ddof=1) / np.sqrt(len(gaps)) if len(gaps) > 1 else 0.0
    return {"method": name, "gap_pct": float(gaps.mean()), "gap_ci95": float(ci), "time_s": float(np.mean(times)),
            "mean_peak_mib": float(p.mean() / 2**20), "peaks": [int(x) for x in peaks]}


def bench_size(n: int, count: int, ref_width: int, model: str, extra_models: dict[str, str], time_limit: float,
               console: Console, reference: dict[str, Any] | None = None, classical: bool = True) -> dict[str, Any]:
    graphs = [layered_graph(n, TEST_SEED0 + i) for i in range(count)]
    small = layered_graph(50, 0)
    for method, opts in (("beam", {"beam_width": 8}), *((m, o) for _, m, o in CLASSICAL)):
        _run(method, opts, small, 0, time_limit)  # warm-up: numba compile / cache load is not timed
    rows: list[dict[str, Any]] = []
    if reference is not None:  # the same graphs' reference row of an earlier run (beam is deterministic)
        ref_row = reference["rows"][0]
        ref = tuple(ref_row["peaks"][:count])
        ref_t = (ref_row["time_s"],) * count
        if reference["seeds"][:count] != [TEST_SEED0 + i for i in range(count)] or len(ref) != count:
            raise SystemExit(f"--reference-from: no reference for {count} graphs of {n} ops with seeds {TEST_SEED0}+")
    else:
        ref, ref_t = zip(*(_run("beam", {"beam_width": ref_width}, g, 0, time_limit) for g in graphs))
    rows.append(_row(f"Approx. DP (beam, width {ref_width})", list(ref), list(ref_t), list(ref)))
    console.log(f"n={n}: reference done, mean {np.mean(ref_t):.2f}s per graph")
    for label, method, opts in CLASSICAL if classical else ():
        res = [_run(method, opts, g, i, time_limit) for i, g in enumerate(graphs)]
        rows.append(_row(label, [r[0] for r in res], [r[1] for r in res], list(ref)))
    models = {"Neural topo order (Topoformer)": model, **extra_models}
    for mname, path in models.items():
        for _, dopts in LEARNED:  # warm-up: ORT session + numba
            _run("learned", {"model": path, **dopts}, small, 0, time_limit)
        for dname, dopts in LEARNED:
            res = [_run("learned", {"model": path, **dopts}, g, i, time_limit) for i, g in enumerate(graphs)]
            rows.append(_row(f"{mname} {dname}", [r[0] for r in res], [r[1] for r in res], list(ref)))
        console.log(f"n={n}: {mname} done")
    return {"n_ops": n, "graphs": count, "seeds": [TEST_SEED0 + i for i in range(count)], "ref_width": ref_width, "rows": rows}


def _table(title: str, results: list[dict[str, Any]]) -> tuple[Table, str]:
    names = [r["method"] for r in results[0]["rows"]]
    t = Table(title=title)
    t.add_column("Algorithm")
    md = ["| Algorithm | " + " | ".join(f"{r['n_ops']} ops: % gap | {r['n_ops']} ops: mean peak MiB | {r['n_ops']} ops: time [s]" for r in results) + " |",
          "|---|" + "---|---|---|" * len(results)]
    for r in results:
        t.add_column(f"{r['n_ops']}: % gap", justify="right")
        t.add_column(f"{r['n_ops']}: peak MiB", justify="right")
        t.add_column(f"{r['n_ops']}: time s", justify="right")
    for name in names:
        cells = []
        for r in results:
            row = next((x for x in r["rows"] if x["method"] == name), None)
            cells += ["-"] * 3 if row is None else [f"{row['gap_pct']:.2f} ± {row['gap_ci95']:.2f}", f"{row['mean_peak_mib']:.1f}", f"{row['time_s']:.3f}"]
        t.add_row(name, *cells)
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    return t, "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--graphs", type=int, nargs="+", default=[20, 10, 5], help="graphs per size (one value or one per size)")
    ap.add_argument("--ref-width", type=int, default=1000, help="beam width of the approximate-DP reference")
    ap.add_argument("--model", default=str(CHECKPOINTS / "topoformer_peakmem.onnx"))
    ap.add_argument("--ablation", action="append", default=[], metavar="NAME=PATH", help="extra model rows (first size only)")
    ap.add_argument("--time-limit", type=float, default=3600.0)
    ap.add_argument("--reference-from", type=Path, default=None,
                    help="take the reference peaks from an earlier --out JSON of the same sizes and seeds")
    ap.add_argument("--learned-only", action="store_true", help="skip the classical rows")
    ap.add_argument("--markdown", help="write the tables as markdown here")
    ap.add_argument("--out", help="write all numbers as JSON here")
    args = ap.parse_args(argv)
    counts = args.graphs * len(args.sizes) if len(args.graphs) == 1 else args.graphs
    if len(counts) != len(args.sizes):
        ap.error("--graphs needs one value or one per size")
    extra = dict(a.split("=", 1) for a in args.ablation)
    console = Console(width=220)
    results = []
    earlier = {}
    if args.reference_from:
        earlier = {r["n_ops"]: r for r in json.loads(args.reference_from.read_text())["results"]}
    for i, (n, c) in enumerate(zip(args.sizes, counts)):
        if args.reference_from and (n not in earlier or earlier[n]["ref_width"] != args.ref_width):
            ap.error(f"--reference-from has no width-{args.ref_width} reference for {n} ops")
        results.append(bench_size(n, c, args.ref_width, args.model, extra if i == 0 else {}, args.time_limit, console,
                                  earlier.get(n), not args.learned_only))
    main_rows = [{**r, "rows": [x for x in r["rows"] if not any(x["method"].startswith(k) for k in extra)]} for r in results]
    t1, md1 = _table("Learned ordering vs baselines on unseen layered graphs (gap from approx. DP)", main_rows)
    console.print(t1)
    md = [f"## Layered graphs (test seeds {TEST_SEED0}+, reference: beam width {args.ref_width})", "", md1]
    if extra:
        abl = [{**results[0], "rows": [x for x in results[0]["rows"] if x["method"].startswith("Approx") or any(x["method"].startswith(k) for k in extra)]}]
        t2, md2 = _table(f"Ablation at {results[0]['n_ops']} ops", abl)
        console.print(t2)
        md += ["", f"## Ablation ({results[0]['n_ops']} ops)", "", md2]
    meta = {"cpu_count": os.cpu_count(), "python": sys.version.split()[0], "note": "timings on a shared machine"}
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text("\n".join(md) + "\n")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
