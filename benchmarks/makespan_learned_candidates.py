"""The learned makespan pass with and without its list-cp candidate, on the real corpus.

``learned`` keeps the best of the network's greedy schedule, its Gumbel-top-k samples and
the list-cp schedule (``passes/makespan/learned.py``).  This prints, per model, list-cp, the
pass as shipped, the network's own best (``info["learned_makespan"]``: greedy and samples
only) and which candidate won -- same problems and settings as
``benchmarks/makespan_corpus.py`` (CPU profile durations, machine types (1, 1, 4), S(64), seed 0).

    python benchmarks/makespan_learned_candidates.py --out /tmp/makespan_learned_candidates.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from makespan_corpus import CORPUS, ROOT, corpus_problems

from onnx_sched.cost import makespan as ms
from onnx_sched.passes import PassContext, get_pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    problems = corpus_problems(CORPUS, ROOT / "examples" / "machines_3types.json",
                               ROOT / "examples" / "profiles_cpu_igpu_dgpu.json", "CPU")
    print("| model | ops | list-cp | learned (shipped) | learned without list-cp | chosen |")
    print("|---|---|---|---|---|---|")
    for path, g, problem in problems:
        ctx = PassContext(time_limit=10.0, seed=0, problem=problem, options={"samples": args.samples})
        sched = get_pass("learned", "makespan")(g, ctx)
        res = ms.evaluate(problem, sched)
        work = res.speedup * res.makespan  # total work, the numerator of evaluate's speedup
        row = {"model": path.stem, "ops": g.n_ops, "list_cp": sched.info["list_cp_makespan"],
               "learned": float(res.makespan), "learned_only": sched.info["learned_makespan"],
               "chosen": sched.info["chosen"]}
        row.update({f"{k}_speedup": work / row[k] for k in ("list_cp", "learned", "learned_only")})
        rows.append(row)
        print(f"| {row['model']} | {row['ops']} | {row['list_cp_speedup']:.3f} | {row['learned_speedup']:.3f} | "
              f"{row['learned_only_speedup']:.3f} | {row['chosen']} |", flush=True)
    means = {k: float(np.mean([r[f"{k}_speedup"] for r in rows])) for k in ("list_cp", "learned", "learned_only")}
    chosen = {c: sum(r["chosen"] == c for r in rows) for c in ("greedy", "sample", "list-cp")}
    print(f"\nMean speedup: list-cp {means['list_cp']:.3f}, learned (shipped) {means['learned']:.3f}, "
          f"learned without list-cp {means['learned_only']:.3f}; chosen: {chosen}")
    if args.out:
        args.out.write_text(json.dumps({"command": "python benchmarks/makespan_learned_candidates.py "
                                        + " ".join(argv if argv is not None else sys.argv[1:]),
                                        "rows": rows, "mean_speedup": means, "chosen": chosen}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
