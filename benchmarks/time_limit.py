"""Is ``--time-limit`` a wall-clock promise?  ``onnx-sched optimize`` asked vs used.

Runs the real command (a fresh process per model) on every corpus model and on two
graphs built here that stress the budget from opposite sides: a 20,000-op chain (every
stage is linear but long) and a 3,000-branch fan-out (one op with 3,000 consumers, whose
ready set is huge).  For each it records the process wall time, the kernel warm-up the
command reports as ``compile_seconds`` (kept off the budget), the command's own
``total_seconds`` (import + pass + export on the budget's clock) and the pass's seconds.
A model passes when ``wall - compile <= limit + 1 s`` (the 1 s covers interpreter start-up
and module imports, which happen before the command's clock can start).

    python benchmarks/time_limit.py --time-limit 10 --out docs/time_limit.json --markdown docs/time_limit.md

``--objective`` runs another objective (makespan on ``examples/machines_cpu_igpu_dgpu.json``, latency on
``examples/profiles_cpu_igpu_dgpu.json``, peak-mem-devices on CPU,GPU); ``--generated FAMILY:OPS ...`` adds
graphs of ``onnx-sched gen`` (seed 7), e.g. dense ``sbm:3000`` / ``er:3000`` (hundreds of thousands of edges);
``--models`` with no names leaves the corpus out; ``--no-stress`` the two graphs built here.  ``--target measured``
(makespan, latency) scores on real split-executor runs, whose time the command must hold back from its search; with
``--machines`` / ``--profiles`` / ``--devices`` in place of the objective's defaults, e.g. two pinned CPU cores:

    python benchmarks/time_limit.py --objective latency --target measured --devices CPU,GPU.1 --no-stress \\
        --models mobilenet_v2 bert_base --time-limit 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
SLACK_S = 1.0


def chain_model(n: int = 20_000, width: int = 16) -> onnx.ModelProto:
    """``x -> Relu -> Neg -> Relu -> ...`` (``n`` ops)."""
    nodes = [helper.make_node("Relu" if i % 2 == 0 else "Neg", [f"t{i}" if i else "x"], [f"t{i + 1}" if i < n - 1 else "y"],
                              name=f"op{i}") for i in range(n)]
    graph = helper.make_graph(nodes, f"chain{n}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def fanout_model(branches: int = 3_000, width: int = 16) -> onnx.ModelProto:
    """``x`` read by ``branches`` Relu ops whose outputs one Concat joins (``branches + 1`` ops)."""
    nodes = [helper.make_node("Relu", ["x"], [f"b{i}"], name=f"relu{i}") for i in range(branches)]
    nodes.append(helper.make_node("Concat", [f"b{i}" for i in range(branches)], ["y"], name="concat", axis=0))
    graph = helper.make_graph(nodes, f"fanout{branches}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [branches, width])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


#: The problem data each objective's command reads.
OBJECTIVE_ARGS = {
    "peak-mem": [],
    "makespan": ["--machines", str(ROOT / "examples" / "machines_cpu_igpu_dgpu.json")],
    "latency": ["--profiles", str(ROOT / "examples" / "profiles_cpu_igpu_dgpu.json")],
    "peak-mem-devices": ["--devices", "CPU,GPU"],
}


def generated_model(spec: str, work: Path) -> Path:
    """``FAMILY:OPS`` of :func:`onnx_sched.synth.generate` (seed 7) written as ONNX under ``work``."""
    from onnx_sched.synth import generate
    from onnx_sched.synth.onnx_writer import graph_to_onnx

    family, _, ops = spec.partition(":")
    path = work / f"{family}{ops}.onnx"
    onnx.save(graph_to_onnx(generate(family, int(ops), 7), name=path.stem), path)
    return path


def measure(path: Path, time_limit: float, work: Path, method: str, objective: str = "peak-mem",
            problem_args: list[str] | None = None) -> dict:
    out, rep = work / f"{path.stem}.sched.onnx", work / f"{path.stem}.json"
    t0 = time.perf_counter()
    args = OBJECTIVE_ARGS[objective] if problem_args is None else problem_args
    proc = subprocess.run([sys.executable, "-m", "onnx_sched.cli", "optimize", str(path), "-o", str(out), "--method", method,
                           "--objective", objective, *args,
                           "--time-limit", str(time_limit), "--report", str(rep)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    row = {"model": path.stem, "exit": proc.returncode, "wall_s": wall}
    if proc.returncode != 0:
        row["error"] = proc.stderr.strip()[-300:]
        return row
    report = json.loads(rep.read_text())
    row.update(ops=report["ops"], compile_s=report["compile_seconds"], total_s=report["total_seconds"],
               pass_s=report["seconds"], optimal=report["optimal"], used_s=wall - report["compile_seconds"],
               measure_s=report.get("measure_seconds"), method_used=report["method_used"])
    row["within"] = row["used_s"] <= time_limit + SLACK_S
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", default=None, help="corpus model stems (default: all)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--objective", choices=sorted(OBJECTIVE_ARGS), default="peak-mem")
    ap.add_argument("--generated", nargs="*", default=[], metavar="FAMILY:OPS",
                    help="also generated graphs, e.g. sbm:3000 (instead of the chain and the fan-out)")
    ap.add_argument("--target", default=None, help="--target of makespan / latency (e.g. measured)")
    ap.add_argument("--machines", default=None, help="makespan's machines instead of the default")
    ap.add_argument("--profiles", default=None, help="latency's profiles instead of the default")
    ap.add_argument("--devices", default=None, help="--devices (latency, peak-mem-devices)")
    ap.add_argument("--no-stress", action="store_true", help="leave out the chain and fan-out graphs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    given = {"--machines": args.machines, "--profiles": args.profiles, "--devices": args.devices,
             "--target": args.target}
    flags = dict(zip(OBJECTIVE_ARGS[args.objective][::2], OBJECTIVE_ARGS[args.objective][1::2]))  # flag -> value
    if args.machines is not None or args.profiles is not None:  # another problem file replaces the default one
        flags.pop("--machines", None), flags.pop("--profiles", None)
    flags.update({flag: value for flag, value in given.items() if value is not None})
    problem_args = [x for pair in flags.items() for x in pair]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.generated:
            paths = [generated_model(spec, work) for spec in args.generated]
        elif args.no_stress:
            paths = []
        else:
            onnx.save(chain_model(), work / "chain20000.onnx")
            onnx.save(fanout_model(), work / "fanout3000.onnx")
            paths = [work / "chain20000.onnx", work / "fanout3000.onnx"]
        corpus = sorted(args.corpus.glob("*.onnx"))
        paths += [p for p in corpus if args.models is None or p.stem in set(args.models)]
        for path in paths:
            row = measure(path, args.time_limit, work, args.method, args.objective, problem_args)
            rows.append(row)
            print(json.dumps(row), flush=True)
    command = "python benchmarks/time_limit.py " + " ".join(argv if argv is not None else sys.argv[1:])
    ok = [r for r in rows if r["exit"] == 0 and r["within"]]
    worst = max((r["used_s"] for r in rows if r["exit"] == 0), default=0.0)
    target = f" --target {args.target}" if args.target else ""
    table = Table(title=f"optimize --objective {args.objective}{target} --time-limit {args.time_limit:g} --method "
                        f"{args.method}: asked vs used")
    for col in ("model", "ops", "wall s", "compile s", "used s", "command s", "pass s", "held back s", "proven", "within"):
        table.add_column(col, justify="left" if col == "model" else "right")
    lines = [f"Command: `{command}`", "",
             f"{len(ok)}/{len(rows)} within limit + {SLACK_S:g} s; worst used {worst:.2f} s of {args.time_limit:g} s.", "",
             "| model | ops | wall s | compile s | used s (wall - compile) | command s | pass s | held back for measuring s "
             "| proven | within |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["exit"]:
            table.add_row(r["model"], "-", f"{r['wall_s']:.2f}", *["-"] * 6, "ERROR")
            lines.append(f"| {r['model']} | - | {r['wall_s']:.2f} | - | - | - | - | - | - | error: {r.get('error', '')} |")
            continue
        cells = [r["model"], str(r["ops"]), f"{r['wall_s']:.2f}", f"{r['compile_s']:.2f}", f"{r['used_s']:.2f}",
                 f"{r['total_s']:.2f}", f"{r['pass_s']:.2f}", "-" if r.get("measure_s") is None else f"{r['measure_s']:.2f}",
                 "yes" if r["optimal"] else "no", "yes" if r["within"] else "NO"]
        table.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
    Console().print(table)
    print(lines[2])
    if args.out:
        args.out.write_text(json.dumps({"command": command, "time_limit": args.time_limit, "rows": rows}, indent=2))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
