"""Makespan benchmark in paper 001's format (table 3 / appendix E.2).

For each synthetic family (layered, Erdos-Renyi, SBM; paper 001 appendix C.3
attributes: affine durations, machine types with capacities 1, 1, 4) and each
method: mean speedup (sum of durations / makespan, higher is better), mean gap
to the analytic lower bound (max of critical path and work / capacity), mean gap
to the bound CP-SAT reports after ``--time-limit`` (when ``cpsat`` is among the
methods) and mean run time per graph.  Also the median time of one
list schedule (the numba kernel) per family.

Methods: ``list-cp``, ``list-mopnr``, ``list-spt``, ``heft``, ``peft`` (the
registered passes), ``sample-cp`` (best of ``--samples`` Gumbel-top-k samples
around critical-path logits: paper 001's sampling mode with a fixed, not
learned, logit), ``learned-greedy`` / ``learned-sample`` (paper 001's Greedy
and S(``--samples``) modes of the trained sampler ``--model``; the sample mode
also keeps the greedy schedule), and ``cpsat`` / ``ga`` / ``auto`` / ``learned``
(the registered pass: greedy, samples and list-cp) with ``--time-limit``.

Example::

    python benchmarks/makespan.py --count 30 --markdown makespan.md --out makespan.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.cost import makespan as ms
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.passes.makespan._priorities import cp_logits, cp_priority, gumbel_priorities
from onnx_sched.synth.attrs import makespan_attrs
from onnx_sched.synth.layered import layered_graph
from onnx_sched.synth.random_dags import er_graph, sbm_graph

FAMILIES = {"layered": layered_graph, "er": er_graph, "sbm": sbm_graph}
DEFAULT_METHODS = "list-cp,list-mopnr,list-spt,heft,peft,sample-cp,learned-greedy,learned-sample"


def run_method(name: str, problem: ms.MakespanProblem, ctx: PassContext, samples: int) -> tuple[float, float, dict]:
    """(makespan, seconds, schedule info) of one method on one problem; every schedule is validated."""
    t0 = time.perf_counter()
    if name in ("learned-greedy", "learned-sample"):
        from onnx_sched.models.inference.topoformer_onnx import PriorityModel
        from onnx_sched.passes.makespan.learned import default_model, logits

        y = logits(problem, PriorityModel.load(ctx.option("model", default_model())))
        pr = y[None, :]
        if name == "learned-sample":
            pr = np.vstack([pr, gumbel_priorities(y, np.random.default_rng(ctx.seed), samples)])
        spans = ms.list_makespans(problem, pr)
        sched = ms.list_schedule(problem, pr[int(np.argmin(spans))], name)
    elif name == "sample-cp":
        pr = gumbel_priorities(cp_logits(problem), np.random.default_rng(ctx.seed), samples)
        spans = ms.list_makespans(problem, pr)
        sched = ms.list_schedule(problem, pr[int(np.argmin(spans))], "sample-cp")
    else:
        sched = get_pass(name, "makespan")(problem.graph, ctx)
    seconds = time.perf_counter() - t0
    return ms.evaluate(problem, sched).makespan, seconds, {**sched.info, "lower_bound": sched.lower_bound}


def kernel_ms(problem: ms.MakespanProblem, repeats: int = 50) -> float:
    """Median milliseconds of one list schedule (critical-path priority)."""
    pr = cp_priority(problem)
    ms.run_list(problem, pr)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ms.run_list(problem, pr)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=30, help="graphs per family")
    ap.add_argument("--n", type=int, default=1000, help="ops per graph")
    ap.add_argument("--families", default="layered,er,sbm")
    ap.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma list (default {DEFAULT_METHODS}; add cpsat,ga,auto)")
    ap.add_argument("--samples", type=int, default=256, help="samples for sample-cp (paper 001 S(256))")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per graph for cpsat / ga / auto")
    ap.add_argument("--seed", type=int, default=0, help="first graph seed")
    ap.add_argument("--model", type=Path, default=None, help="makespan sampler ONNX (default: the shipped one)")
    ap.add_argument("--markdown", type=Path, default=None, help="write the table as Markdown")
    ap.add_argument("--out", type=Path, default=None, help="write all numbers as JSON")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    methods = [m for m in args.methods.split(",") if m]
    for f in families:
        if f not in FAMILIES:
            raise SystemExit(f"unknown family {f!r}; choose from {', '.join(FAMILIES)}")
    console = Console()
    warm = layered_graph(50, 0)  # compile / load the numba kernels before timing
    warm_problem = ms.problem_from_attrs(warm, makespan_attrs(warm, 0))
    for m in methods:
        opts = {"samples": 8, "model": str(args.model) if args.model else None}
        run_method(m, warm_problem, PassContext(time_limit=0.5, problem=warm_problem, options=opts), 8)
    rows: list[dict] = []
    per_graph: list[dict] = []
    for fam in families:
        acc: dict[str, dict[str, list[float]]] = {m: {"speedup": [], "gap": [], "gap_cp": [], "seconds": []} for m in methods}
        kernel = []
        for i in range(args.count):
            seed = args.seed + i
            g = FAMILIES[fam](args.n, seed)
            problem = ms.problem_from_attrs(g, makespan_attrs(g, seed))
            lb = ms.lower_bound(problem)
            work = problem.total_work()
            kernel.append(kernel_ms(problem))
            opts = {"samples": args.samples, "model": str(args.model) if args.model else None}
            ctx = PassContext(time_limit=args.time_limit, seed=seed, problem=problem, options=opts)
            spans: dict[str, float] = {}
            cp_bound = cp_raw = cp_status = None
            for m in methods:
                span, secs, info = run_method(m, problem, ctx, args.samples)
                spans[m] = span
                if m == "cpsat":  # the solver's bound, never below the analytic one (the model carries it as a cut)
                    cp_bound = info["lower_bound"]
                    cp_raw = info.get("cp_bound")
                    cp_status = info.get("cpsat_status")
                acc[m]["speedup"].append(work / span)
                acc[m]["gap"].append((span - lb) / lb)
                acc[m]["seconds"].append(secs)
                per_graph.append({"family": fam, "seed": seed, "method": m, "makespan": span, "lower_bound": lb,
                                  "work": work, "seconds": secs})
            if cp_bound is not None:
                for m in methods:
                    acc[m]["gap_cp"].append((spans[m] - cp_bound) / cp_bound)
                per_graph.append({"family": fam, "seed": seed, "method": "cpsat-bound", "cp_bound": cp_bound,
                                  "cp_raw_bound": cp_raw, "analytic_bound": lb, "cpsat_status": cp_status})
            console.log(f"{fam} graph {i + 1}/{args.count} done")
        for m in methods:
            rows.append({
                "family": fam,
                "method": m,
                "speedup_mean": statistics.fmean(acc[m]["speedup"]),
                "speedup_std": statistics.pstdev(acc[m]["speedup"]),
                "gap_mean": statistics.fmean(acc[m]["gap"]),
                "gap_cpsat_bound_mean": statistics.fmean(acc[m]["gap_cp"]) if acc[m]["gap_cp"] else None,
                "seconds_mean": statistics.fmean(acc[m]["seconds"]),
                "list_kernel_ms_median": statistics.median(kernel),
            })
    table = Table(title=f"Makespan, {args.count} graphs x {args.n} ops per family, capacities (1, 1, 4)")
    cols = ("family", "method", "speedup", "gap to bound", "gap to CP-SAT bound", "time / graph (s)",
            "one list schedule (ms)")
    for col in cols:
        table.add_column(col, justify="left" if col in ("family", "method") else "right")
    md = ["| " + " | ".join(cols) + " |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        gcp = r["gap_cpsat_bound_mean"]
        cells = [r["family"], r["method"], f"{r['speedup_mean']:.3f} ± {r['speedup_std']:.3f}", f"{r['gap_mean']:.2%}",
                 "—" if gcp is None else f"{gcp:.2%}", f"{r['seconds_mean']:.4f}", f"{r['list_kernel_ms_median']:.3f}"]
        table.add_row(*cells)
        md.append("| " + " | ".join(cells) + " |")
    console.print(table)
    for fam in families:
        b = [x for x in per_graph if x["method"] == "cpsat-bound" and x["family"] == fam]
        if not b:
            continue
        statuses: dict[str, int] = {}
        for x in b:
            statuses[str(x["cpsat_status"])] = statuses.get(str(x["cpsat_status"]), 0) + 1
        tighter = [x["cp_bound"] / x["analytic_bound"] - 1 for x in b if x["cp_bound"] > x["analytic_bound"] * (1 + 1e-4)]
        line = (f"{fam}: CP-SAT ({args.time_limit:g} s) status {statuses}; its bound is above the analytic bound on "
                f"{len(tighter)}/{len(b)} graphs" + (f" (by {100 * statistics.fmean(tighter):.2f}% on average)" if tighter else ""))
        md.append(("\n" if not md[-1].lstrip().startswith("-") else "") + "- " + line)
        console.print(line)
    result = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "machine": platform.platform(), "python": platform.python_version(), "rows": rows, "graphs": per_graph}
    if args.markdown is not None:
        args.markdown.write_text("\n".join(md) + "\n", encoding="utf-8")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
