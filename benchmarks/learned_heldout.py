"""The learned peak-memory policy on the held-out corpus models of issue 17.

For each model of ``onnx_sched.synth.corpus_split.HELD_OUT_PEAKMEM`` (never read by
training): the peak and seconds of the file order, of learned sample-16 for every
``--learned NAME=PATH`` checkpoint (default: the shipped one; with the pass's min-cut repair, as
shipped, and without it: the policy's own orders), of beam search at width
10^4 and of ``auto``; then per checkpoint the issue's two checks: never worse than the
file order, and within 2 % of beam 10^4.

    python benchmarks/learned_heldout.py --learned shipped=models/checkpoints/topoformer_peakmem.onnx \\
        --out docs/learned_heldout.json --markdown docs/learned_heldout.md

``--reuse FILE`` takes the file / beam / auto columns from an earlier JSON (they do not
depend on the checkpoint) and times only the learned rows.  ``--families F ... --sizes N ...``
adds one unseen synthetic graph (test seed 10000 + k) per family and size, to show where
the training mixture's families need ordering at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from learned import _run
from rich.console import Console
from rich.table import Table

from onnx_sched.importers.onnx import import_onnx
from onnx_sched.synth import TEST_SEED_BASE, generate
from onnx_sched.synth.corpus_split import HELD_OUT_PEAKMEM

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
SHIPPED = ROOT / "models" / "checkpoints" / "topoformer_peakmem.onnx"
WITHIN = 0.02  # the tolerance against beam 10^4
REFERENCES = {"file": {}, "beam": {"beam_width": 10_000}, "auto": {}}


def timed(method: str, graph, options: dict, time_limit: float) -> dict:  # noqa: ANN001
    """Peak and seconds of one registry pass on ``graph`` (``learned.py``'s runner)."""
    peak, seconds = _run(method, options, graph, 0, time_limit)
    return {"peak_bytes": peak, "seconds": round(seconds, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--learned", action="append", default=[], metavar="NAME=PATH", help="checkpoint rows (ONNX encoder)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="for auto and beam")
    ap.add_argument("--reuse", type=Path, default=None, help="earlier JSON: take file / beam / auto from it")
    ap.add_argument("--families", nargs="*", default=[], help="also one synthetic graph per family and size")
    ap.add_argument("--sizes", nargs="*", type=int, default=[400, 800])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    learned = dict(s.split("=", 1) for s in args.learned) or {"shipped": str(SHIPPED)}
    old = {r["model"]: r for r in json.loads(args.reuse.read_text())["rows"]} if args.reuse else {}
    rows = []
    cases = [(name, lambda name=name: import_onnx(args.corpus / f"{name}.onnx").graph) for name in HELD_OUT_PEAKMEM]
    cases += [(f"{fam}-{n}", lambda fam=fam, n=n, k=k: generate(fam, n, TEST_SEED_BASE + k))
              for k, (fam, n) in enumerate((f, n) for f in args.families for n in args.sizes)]
    for name, load in cases:
        graph = load()
        row = {"model": name, "ops": graph.n_ops, "methods": {}}
        for method, opts in REFERENCES.items():
            row["methods"][method] = old[name]["methods"][method] if name in old else timed(method, graph, opts, args.time_limit)
        for label, path in learned.items():
            row["methods"][f"learned:{label}"] = timed("learned", graph, {"samples": 16, "model": path}, args.time_limit)
            row["methods"][f"learned:{label}, no repair"] = timed("learned", graph, {"samples": 16, "model": path, "repair": 0},
                                                                   args.time_limit)
        rows.append(row)
        print(json.dumps(row), flush=True)
    variants = [v for k in learned for v in (k, f"{k}, no repair")]
    columns = [*REFERENCES, *(f"learned:{k}" for k in variants)]
    table = Table(title="held-out corpus models: peak MiB (seconds)")
    for col in ["model", "ops", *columns]:
        table.add_column(col, justify="right")
    lines = ["| model | ops | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for r in rows:
        cells = [f"{r['methods'][c]['peak_bytes'] / 2**20:.2f} ({r['methods'][c]['seconds']:.1f} s)" for c in columns]
        table.add_row(r["model"], str(r["ops"]), *cells)
        lines.append(f"| {r['model']} | {r['ops']} | " + " | ".join(cells) + " |")
    summary = {}
    for label in variants:
        key = f"learned:{label}"
        peaks = [(r["methods"][key]["peak_bytes"], r["methods"]["file"]["peak_bytes"], r["methods"]["beam"]["peak_bytes"])
                 for r in rows if r["model"] in HELD_OUT_PEAKMEM]
        summary[label] = {"never_worse_than_file": sum(p <= f for p, f, _ in peaks),
                          "within_2pct_of_beam": sum(p <= (1 + WITHIN) * b for p, _, b in peaks), "models": len(peaks)}
    Console(width=200).print(table)
    text = [f"{k}: never worse than the file order on {v['never_worse_than_file']}/{v['models']}, within 2% of beam 10^4 "
            f"on {v['within_2pct_of_beam']}/{v['models']} held-out models" for k, v in summary.items()]
    print("\n".join(text))
    command = "python benchmarks/learned_heldout.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out:
        args.out.write_text(json.dumps({"command": command, "rows": rows, "summary": summary}, indent=1))
    if args.markdown:
        args.markdown.write_text(f"Command: `{command}`\n\n" + "\n".join(lines) + "\n\n" + "\n".join(f"- {t}" for t in text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
