"""Paper 000 table 1 on layered graphs: % gap from approximate DP and mean run time.

For each size (default 500, 1000, 2000 ops) the script generates ``--count``
unseen layered graphs (paper 000 appendix A) with seeds ``--seed-base + i``
(default 10_000 + i: test seeds; training uses 0..9_999, see
:mod:`onnx_sched.synth`), runs every registered ``peak-mem`` pass on each
(``onnx_sched.passes.available("peak-mem")`` or ``--methods``) and reports per
method and size

* **% gap from approx. DP**: mean over graphs of
  ``100 * (peak(method) - peak(approx DP)) / peak(approx DP)``, where approx. DP
  is the ``beam`` pass (paper 000's approximate DP: beam search over scheduled
  sets with state collapsing) run with ``--ref-beam-width`` (default 1000; the
  paper used 100,000 on a V100) and ``--ref-time-limit``; lower is better and
  negative means better than the reference;
* **time [s]**: mean wall time of the pass on one graph (CPU, one process;
  every pass is run once on a small graph first so numba compilation is not timed).

Peak memory is paper 000 eq. 1-3 with eq. 15 parameter memory
(:func:`onnx_sched.cost.memory.peak_memory`, no in-place reuse).  A method that is
not registered is listed as "missing"; one that raises is reported with its
error and left out of the means.  ``beam`` itself is also run as a method with
``--beam-width`` (default 16, the paper's neural beam size) so the table shows
how a small beam compares.

    python benchmarks/peak_mem.py --sizes 500 1000 2000 --count 30 \
        --out docs/peak_mem_layered.json --markdown docs/peak_mem_layered.md
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from onnx_sched.cost.memory import peak_memory
from onnx_sched.passes import PassContext, available, get_pass
from onnx_sched.synth import TEST_SEED_BASE
from onnx_sched.synth.layered import layered_graph

DEFAULT_METHODS = ["beam", "random", "dfs", "bfs", "greedy", "xla_dfs", "exact", "cpsat", "auto", "learned"]
REFERENCE = "approx-dp"


def run_method(graph, name: str, ctx: PassContext) -> dict[str, Any]:
    """Peak bytes and seconds of one pass on one graph (or its error)."""
    t = time.perf_counter()
    try:
        sched = get_pass(name, "peak-mem")(graph, ctx)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports failures, it does not stop
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    seconds = time.perf_counter() - t
    return {"peak_bytes": int(peak_memory(graph, sched.order, ctx.inplace)), "seconds": seconds}


def benchmark(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    registered = set(available("peak-mem"))
    methods = args.methods or [m for m in DEFAULT_METHODS if m in registered] + sorted(
        registered - set(DEFAULT_METHODS) - {"file"}
    )
    missing = [m for m in (args.methods or DEFAULT_METHODS) if m not in registered]
    methods = [m for m in methods if m in registered]
    if "beam" not in registered:
        raise SystemExit("the 'beam' pass (approximate DP reference) is not registered")
    base_opts = {"samples": args.samples}
    # warm-up: numba compiles kernels on first use; keep that out of the timings
    warm = layered_graph(30, 0)
    for name in dict.fromkeys(["beam", *methods]):
        run_method(warm, name, PassContext(time_limit=10.0, seed=0, options={**base_opts, "beam_width": 4}))
    results: dict[str, Any] = {"sizes": {}, "methods": methods, "missing": missing}
    for n in args.sizes:
        per_graph = []
        for i in range(args.count):
            seed = args.seed_base + i
            g = layered_graph(n, seed)
            ref_ctx = PassContext(
                time_limit=args.ref_time_limit, seed=seed, options={**base_opts, "beam_width": args.ref_beam_width}
            )
            row: dict[str, Any] = {"seed": seed, "edges": int(len(g.edges)), REFERENCE: run_method(g, "beam", ref_ctx)}
            if "error" in row[REFERENCE]:
                raise SystemExit(f"approx DP failed on layered n={n} seed={seed}: {row[REFERENCE]['error']}")
            for name in methods:
                ctx = PassContext(
                    time_limit=args.time_limit, seed=seed, options={**base_opts, "beam_width": args.beam_width}
                )
                row[name] = run_method(g, name, ctx)
            per_graph.append(row)
            console.log(f"n={n} seed={seed}: ref peak {row[REFERENCE]['peak_bytes'] / 2**20:.1f} MiB "
                        f"in {row[REFERENCE]['seconds']:.2f} s")
        summary = {}
        for name in [REFERENCE, *methods]:
            ok = [r for r in per_graph if "peak_bytes" in r[name]]
            gaps = [100.0 * (r[name]["peak_bytes"] - r[REFERENCE]["peak_bytes"]) / r[REFERENCE]["peak_bytes"] for r in ok]
            secs = [r[name]["seconds"] for r in ok]
            errors = sorted({r[name]["error"] for r in per_graph if "error" in r[name]})
            summary[name] = {
                "graphs": len(ok),
                "gap_pct_mean": statistics.fmean(gaps) if gaps else None,
                "gap_pct_ci95": 1.96 * statistics.stdev(gaps) / math.sqrt(len(gaps)) if len(gaps) > 1 else None,
                "seconds_mean": statistics.fmean(secs) if secs else None,
                "errors": errors,
            }
        results["sizes"][str(n)] = {"summary": summary, "graphs": per_graph}
    return results


def _cell(s: dict[str, Any]) -> tuple[str, str]:
    if s["gap_pct_mean"] is None:
        return "error", "-"
    return f"{s['gap_pct_mean']:.2f}", f"{s['seconds_mean']:.3g}"


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name in [REFERENCE, *results["methods"]]:
        label = f"approx. DP (beam {results['params']['ref_beam_width']})" if name == REFERENCE else name
        if name == "beam":
            label = f"beam (width {results['params']['beam_width']})"
        cells = [label]
        for n in results["sizes"]:
            cells.extend(_cell(results["sizes"][n]["summary"][name]))
        rows.append(cells)
    for name in results["missing"]:
        rows.append([f"{name} (not registered)"] + ["-"] * (2 * len(results["sizes"])))
    return rows


def to_markdown(results: dict[str, Any], command: str) -> str:
    p = results["params"]
    head = ["Algorithm"]
    for n in results["sizes"]:
        head += [f"{n}-op % gap from approx. DP", f"{n}-op run time [s]"]
    lines = [
        f"Command: `{command}`",
        "",
        f"Layered graphs (paper 000 appendix A), {p['count']} unseen graphs per size, seeds "
        f"{p['seed_base']}..{p['seed_base'] + p['count'] - 1} (training seeds are 0..9999). "
        f"Approx. DP = `beam` pass with beam width {p['ref_beam_width']} (time limit {p['ref_time_limit']} s); "
        f"`beam` row: width {p['beam_width']}; `random`: best of {p['samples']} orders; other passes' "
        f"time limit {p['time_limit']} s. Mean % gap of peak memory (eq. 1-3, 15) and mean run time per graph. "
        f"Machine: {p['machine']}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(results)]
    errors = [
        f"- {name} at {n} ops: {'; '.join(s['errors'])}"
        for n, block in results["sizes"].items()
        for name, s in block["summary"].items()
        if s["errors"]
    ]
    if errors:
        lines += ["", "Errors:", *errors]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--count", type=int, default=30, help="graphs per size")
    ap.add_argument("--seed-base", type=int, default=TEST_SEED_BASE, help="graph i uses seed base + i")
    ap.add_argument("--methods", nargs="+", help="peak-mem passes to run (default: all registered)")
    ap.add_argument("--ref-beam-width", type=int, default=1000, help="beam width of the approx. DP reference")
    ap.add_argument("--ref-time-limit", type=float, default=600.0)
    ap.add_argument("--beam-width", type=int, default=16, help="beam width of the 'beam' row")
    ap.add_argument("--samples", type=int, default=16, help="samples of 'random' (and sampling passes)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per pass per graph")
    ap.add_argument("--out", type=Path, help="JSON results")
    ap.add_argument("--markdown", type=Path, help="markdown table + command")
    args = ap.parse_args(argv)
    if args.count < 1 or any(n < 1 for n in args.sizes):
        ap.error("--count and --sizes must be >= 1")
    console = Console(stderr=True)
    command = "python benchmarks/peak_mem.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    results = benchmark(args, console)
    results["params"] = {
        "sizes": args.sizes,
        "count": args.count,
        "seed_base": args.seed_base,
        "ref_beam_width": args.ref_beam_width,
        "ref_time_limit": args.ref_time_limit,
        "beam_width": args.beam_width,
        "samples": args.samples,
        "time_limit": args.time_limit,
        "machine": f"{platform.machine()} {platform.processor() or ''} {platform.python_implementation()} "
        f"{platform.python_version()}".strip(),
        "command": command,
    }
    table = Table(title=f"Layered graphs: % gap from approx. DP (beam {args.ref_beam_width}) and mean run time")
    table.add_column("Algorithm")
    for n in results["sizes"]:
        table.add_column(f"{n} ops gap %", justify="right")
        table.add_column(f"{n} ops s", justify="right")
    for row in _rows(results):
        table.add_row(*row)
    Console().print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(to_markdown(results, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
