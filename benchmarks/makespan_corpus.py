"""Makespan on the real corpus with profiled op durations (paper 001 format: speedup, seconds).

Durations: the measured CPU profile in `examples/profiles_cpu_igpu_dgpu.json` (OpenVINO
PERF_COUNT on resnet50, extended to other models by its per-op-class rate model,
`onnx_sched.profiling.op_seconds_vector`); machines: paper 001's three machine types
with capacities 1, 1, 4 (`examples/machines_3types.json`).

    python benchmarks/makespan_corpus.py --time-limit 2 --markdown docs/makespan_corpus.md --out docs/makespan_corpus.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from onnx_sched.cost import makespan as ms
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.machines import load_machines
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.profiling import load_profiles, op_seconds_vector

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
METHODS = ["list-cp", "list-mopnr", "list-spt", "heft", "peft", "learned", "auto"]


def corpus_problems(corpus: Path, machines: Path, profiles: Path, device: str):  # noqa: ANN201
    """``(path, graph, MakespanProblem)`` per corpus model: durations from ``device``'s profile."""
    spec = load_machines(machines)
    profile = next(d for d in load_profiles(profiles).devices if d.name == device)
    for path in sorted(corpus.glob("*.onnx")):
        g = import_onnx(path).graph
        yield path, g, ms.makespan_problem(g, spec, durations=op_seconds_vector(g, profile))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--machines", type=Path, default=ROOT / "examples" / "machines_3types.json")
    ap.add_argument("--profiles", type=Path, default=ROOT / "examples" / "profiles_cpu_igpu_dgpu.json")
    ap.add_argument("--device", default="CPU", help="profiled device whose op times are the durations")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    for path, g, problem in corpus_problems(args.corpus, args.machines, args.profiles, args.device):
        row = {"model": path.stem, "ops": g.n_ops, "lower_bound": float(ms.lower_bound(problem)), "methods": {}}
        for name in METHODS:
            ctx = PassContext(time_limit=args.time_limit, seed=0, problem=problem, options={"samples": 64})
            t = time.perf_counter()
            sched = get_pass(name, "makespan")(g, ctx)
            sec = time.perf_counter() - t
            res = ms.evaluate(problem, sched)
            row["methods"][name] = {"makespan": float(res.makespan), "speedup": float(res.speedup), "seconds": sec}
        rows.append(row)
        print(path.stem, {k: round(v["speedup"], 3) for k, v in row["methods"].items()}, flush=True)
    command = "python benchmarks/makespan_corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out:
        args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=2))
    if args.markdown:
        head = ["model", "ops", *METHODS, "best gap to bound", "s learned", "s auto"]
        lines = [f"Command: `{command}`", "", f"Speedup = sum of durations / makespan; durations from the measured "
                 f"{args.device} profile; machine types (1, 1, 4).", "",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            best = min(v["makespan"] for v in r["methods"].values())
            cells = [r["model"], str(r["ops"]), *[f"{r['methods'][m]['speedup']:.3f}" for m in METHODS],
                     f"{(best - r['lower_bound']) / r['lower_bound']:.1%}",
                     f"{r['methods']['learned']['seconds']:.2f}", f"{r['methods']['auto']['seconds']:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
        means = {m: float(np.mean([r["methods"][m]["speedup"] for r in rows])) for m in METHODS}
        lines += ["", "Mean speedup: " + ", ".join(f"{m} {v:.3f}" for m, v in means.items())]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
