"""REGAL against the multi-device memory baselines, in paper 003's formats (Tables 1, 2, Figure 5).

On held-out two-device problems -- synthetic graphs of the five families with test
seeds (>= 10,000) and the held-out corpus models (``TEST_CORPUS`` of
:mod:`onnx_sched.models.training.regal_data`, as they are) -- every method runs once with
seed 0 at 5,000 evaluations: BRKGA 5K, tuned BRKGA, local search, graph partitioning + DFS,
CP-SAT (``--cpsat-seconds`` per problem, hinted with the best of host-only and partition +
DFS, every graph size modelled; the paper ran it 24 hours), REGAL (the ``regal`` pass: the checkpoint's feature
run, 100 evaluations since session 50 and the paper's 400 before, then the rest of the 5,000 with the predicted
distributions, mode action; ``regal-prior``: the same pipeline with the hand-written feature prior's action instead
of the network's, the ablation that shows what training added), plus BRKGA 50K for the best known.  Best known = the lowest peak any method found;
"proven" when it equals the lower bound of :func:`onnx_sched.cost.device_memory.lower_bound`.

Prints Table 1 (average % improvement over BRKGA 5K, average % gap from best known),
Table 2 (mean wall seconds per method, numba compiled beforehand), the share of problems
where REGAL ties or beats BRKGA 5K, and with ``--fig5 N`` Figure 5 (average improvement
over BRKGA 5K against the evaluation limit, 1K-50K, BRKGA and REGAL) on the first N
problems of each set, as a PNG.

    python benchmarks/regal_eval.py --synthetic 30 --fig5 15 --out benchmarks/regal_eval.json \\
        --plot benchmarks/regal_fig5.png

``--model PATH`` evaluates another policy file (the ``regal`` pass's ``model`` option).
``--rerun METHOD.. --reuse FILE`` runs only those methods and takes every other method's peak and
seconds from an earlier run's JSON (same problems, matched by name), e.g. after a new tuned setting:

    python benchmarks/regal_eval.py --devices 3 --synthetic 30 --rerun tuned-brkga \\
        --reuse benchmarks/regal_eval_d3.json --out benchmarks/regal_eval_d3.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.cost import device_memory as dm
from onnx_sched.graph import Graph
from onnx_sched.models.training.regal_data import TEST_CORPUS, corpus_graph, synthetic_graphs, training_devices
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.synth import TEST_SEED_BASE

METHODS = ("brkga-5k", "tuned-brkga", "local-search", "partition-dfs", "cpsat", "regal", "regal-prior", "brkga-50k")
#: Paper 003's methods as it ran them: the peak alone (``tidy`` 0: no extra evaluations on moving fewer bytes).
PASS = {"brkga-5k": ("brkga", {"evaluations": 5000, "tidy": 0}),
        "tuned-brkga": ("tuned-brkga", {"evaluations": 5000, "tidy": 0}),
        "local-search": ("local-search", {"evaluations": 5000}), "partition-dfs": ("partition-dfs", {}),
        "cpsat": ("cpsat", {"max_ops": 10**9}), "regal": ("regal", {"evaluations": 5000, "tidy": 0}),
        "regal-prior": ("regal", {"evaluations": 5000, "prior": "true", "tidy": 0}),
        "brkga-50k": ("brkga", {"evaluations": 50000, "tidy": 0})}
LIMITS = (1000, 2000, 5000, 10000, 20000, 50000)
#: Wall seconds per problem for methods stopped by time rather than evaluations (``--cpsat-seconds``).
TIME_LIMITS = {"cpsat": 30.0}


def score(graph: Graph, problem: dm.DeviceMemoryProblem, method: str, options: dict[str, Any],
          seed: int = 0) -> tuple[float, float]:
    """(objective, wall seconds) of one pass run."""
    ctx = PassContext(time_limit=TIME_LIMITS.get(method, 3600.0), seed=seed, options=options, problem=problem)
    t0 = time.perf_counter()
    schedule = get_pass(method, "peak-mem-devices")(graph, ctx)
    seconds = time.perf_counter() - t0
    return float(dm.fitness(problem, dm.walk(problem, schedule.steps).per_device_peak)[0]), seconds


def held_out_sets(synthetic: int, corpus: list[str], min_ops: int = 50, max_ops: int = 300) -> dict[str, list[Graph]]:
    """The held-out problems: ``synthetic`` graphs of the five families (test seeds) and the ``corpus`` models."""
    return {"synthetic": synthetic_graphs(synthetic, TEST_SEED_BASE, min_ops, max_ops, seed=2),
            "corpus": [corpus_graph(m) for m in corpus]}


def evaluate(graph: Graph, fig5: bool, n_devices: int = 2, methods: tuple[str, ...] = METHODS,
             earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """One problem's row: every method in ``methods`` run, the others' peaks and seconds from ``earlier``."""
    problem = dm.DeviceMemoryProblem.build(graph, training_devices(n_devices))
    if earlier is None:
        row: dict[str, Any] = {"graph": graph.name, "ops": graph.n_ops, "lower_bound": dm.lower_bound(problem),
                               "peak": {}, "seconds": {}}
    else:
        row = {**earlier, "peak": dict(earlier["peak"]), "seconds": dict(earlier["seconds"])}
    for m in methods:
        row["peak"][m], row["seconds"][m] = score(graph, problem, *PASS[m])
    if fig5 and earlier is None:
        curve: dict[str, dict[int, float]] = {"brkga": {5000: row["peak"]["brkga-5k"], 50000: row["peak"]["brkga-50k"]},
                                              "regal": {5000: row["peak"]["regal"]}}
        for method in ("brkga", "regal"):
            for k in LIMITS:
                if k not in curve[method]:
                    options = {**PASS["regal" if method == "regal" else "brkga-5k"][1], "evaluations": k}
                    curve[method][k] = score(graph, problem, method, options)[0]
        row["curve"] = {m: {str(k): v for k, v in sorted(c.items())} for m, c in curve.items()}
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    base = np.array([r["peak"]["brkga-5k"] for r in rows])
    best = np.array([min(r["peak"].values()) for r in rows])
    out: dict[str, Any] = {"graphs": len(rows), "proven_optimal": float(np.mean(
        [min(r["peak"].values()) <= r["lower_bound"] for r in rows]))}
    for m in METHODS:
        peak = np.array([r["peak"][m] for r in rows])
        out[m] = {"improvement_pct": float(np.mean((base - peak) / base * 100)),
                  "gap_pct": float(np.mean((peak - best) / best * 100)),
                  "seconds": float(np.mean([r["seconds"][m] for r in rows]))}
    regal = np.array([r["peak"]["regal"] for r in rows])
    out["regal_ties_or_beats_brkga_5k"] = float(np.mean(regal <= base))
    out["regal_beats_brkga_5k"] = float(np.mean(regal < base))
    out["brkga_50k_matches_regal_5k"] = float(np.mean(np.array([r["peak"]["brkga-50k"] for r in rows]) <= regal))
    curves = [r["curve"] for r in rows if "curve" in r]
    if curves:
        b5 = np.array([c["brkga"]["5000"] for c in curves])
        out["figure5"] = {m: {str(k): float(np.mean((b5 - np.array([c[m][str(k)] for c in curves])) / b5 * 100))
                              for k in LIMITS} for m in ("brkga", "regal")}
        out["figure5_graphs"] = len(curves)
    return out


def print_tables(summary: dict[str, dict[str, Any]], n_devices: int = 2) -> None:
    sets = list(summary)
    print(f"\nTable 1: average % improvement over BRKGA 5K / average % gap from best known ({n_devices} devices)")
    print("| method | " + " | ".join(f"{s}: % improv. | {s}: % gap" for s in sets) + " |")
    print("|---|" + "---|---|" * len(sets))
    for m in METHODS:
        cells = " | ".join(f"{summary[s][m]['improvement_pct']:.2f}% | {summary[s][m]['gap_pct']:.2f}%" for s in sets)
        print(f"| {m} | {cells} |")
    print("\nTable 2: mean running time (s)")
    print("| method | " + " | ".join(sets) + " |")
    print("|---|" + "---|" * len(sets))
    for m in METHODS:
        print(f"| {m} | " + " | ".join(f"{summary[s][m]['seconds']:.2f}" for s in sets) + " |")
    for s in sets:
        x = summary[s]
        print(f"\n{s}: {x['graphs']} problems, best known proven optimal on {x['proven_optimal']:.0%}; REGAL ties or "
              f"beats BRKGA 5K on {x['regal_ties_or_beats_brkga_5k']:.0%} (beats on {x['regal_beats_brkga_5k']:.0%}); "
              f"BRKGA 50K matches or beats REGAL 5K on {x['brkga_50k_matches_regal_5k']:.0%}")
        if "figure5" in x:
            print(f"Figure 5 ({x['figure5_graphs']} problems), % improvement over BRKGA 5K by evaluation limit:")
            for m, c in x["figure5"].items():
                print(f"  {m:6s} " + "  ".join(f"{int(k) // 1000}K {v:+.2f}%" for k, v in c.items()))


def plot(summary: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [s for s in summary if "figure5" in summary[s]]
    fig, axes = plt.subplots(1, len(sets), figsize=(5 * len(sets), 3.6), squeeze=False)
    for ax, s in zip(axes[0], sets):
        for m, c in summary[s]["figure5"].items():
            ax.plot([int(k) / 1000 for k in c], list(c.values()), marker="o", label=m.upper())
        ax.set_xscale("log")
        ax.set_xticks([int(k) / 1000 for k in LIMITS], [str(k // 1000) for k in LIMITS])
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("evaluation limit (thousands)")
        ax.set_ylabel("% improvement over BRKGA 5K")
        ax.set_title(f"{s} ({summary[s]['figure5_graphs']} problems)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=int, default=30, help="held-out synthetic problems (test seeds)")
    ap.add_argument("--min-ops", type=int, default=50)
    ap.add_argument("--max-ops", type=int, default=300)
    ap.add_argument("--corpus", nargs="*", default=list(TEST_CORPUS), help="held-out corpus models")
    ap.add_argument("--fig5", type=int, default=0, help="Figure 5 curves on the first N problems of each set")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/regal_eval.json"))
    ap.add_argument("--plot", type=Path, default=None, help="Figure 5 PNG")
    ap.add_argument("--model", default=None, help="REGAL policy .onnx (default: the shipped checkpoint)")
    ap.add_argument("--cpsat-seconds", type=float, default=TIME_LIMITS["cpsat"], help="CP-SAT's time limit per problem")
    ap.add_argument("--devices", type=int, default=2,
                    help="devices per problem (REGAL: the shipped checkpoint for that count, or --model)")
    ap.add_argument("--rerun", nargs="+", choices=METHODS, default=None,
                    help="run only these methods; the others come from --reuse")
    ap.add_argument("--reuse", type=Path, default=None, help="an earlier run's JSON (with --rerun)")
    args = ap.parse_args()
    if (args.rerun is None) != (args.reuse is None):
        ap.error("--rerun and --reuse go together")
    earlier: dict[str, dict[str, Any]] = {}
    if args.reuse:
        old = json.loads(args.reuse.read_text())
        if old.get("devices", 2) != args.devices:
            ap.error(f"{args.reuse} was run with {old.get('devices', 2)} devices, not {args.devices}")
        earlier = {f"{name}/{r['graph']}": r for name, rows in old["rows"].items() for r in rows}
    methods = tuple(args.rerun) if args.rerun else METHODS
    TIME_LIMITS["cpsat"] = args.cpsat_seconds
    if args.model:
        PASS["regal"][1]["model"] = args.model
    sets = held_out_sets(args.synthetic, args.corpus, args.min_ops, args.max_ops)
    warm = synthetic_graphs(1, TEST_SEED_BASE, 30, 30, seed=9)[0]  # numba compiled off the clock
    for m in methods:
        score(warm, dm.DeviceMemoryProblem.build(warm, training_devices(args.devices)), *PASS[m])
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, graphs in sets.items():
        rows[name] = []
        for i, g in enumerate(graphs):
            if args.reuse and f"{name}/{g.name}" not in earlier:
                sys.exit(f"error: {args.reuse} has no row for {name} problem {g.name}")
            rows[name].append(evaluate(g, i < args.fig5, args.devices, methods, earlier.get(f"{name}/{g.name}")))
            r = rows[name][-1]
            print(f"{name} {g.name:28s} {g.n_ops:5d} ops  " + "  ".join(
                f"{m} {r['peak'][m] / 2**20:8.2f}" for m in METHODS) + " MiB", flush=True)
    summary = {name: summarise(r) for name, r in rows.items() if r}
    print_tables(summary, args.devices)
    command = "python benchmarks/regal_eval.py " + " ".join(sys.argv[1:])
    if args.reuse:
        command = f"{old.get('command', 'an earlier run')}, then {command}"
    args.out.write_text(json.dumps({"command": command, "devices": args.devices, "summary": summary, "rows": rows},
                                   indent=1))
    print(f"\nwrote {args.out}")
    if args.plot:
        plot(summary, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
