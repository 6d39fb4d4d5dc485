"""Models onnx-sched never saw, through every command that reads or runs a model -- not only ``optimize``.

``benchmarks/unseen_models.py`` sends onnx's backend test models (and the model kinds of
``benchmarks/model_kinds.py``) through ``optimize``.  The other commands read and run the same
files in their own ways -- ``inspect`` sizes the graph, ``bench`` runs it in a fresh ONNX Runtime or
OpenVINO process, ``profile`` times its ops, ``bench-placement`` splits it over two devices and runs
the parts -- and each is a place a model the project never saw can break.  Each (model, command) is
one fresh ``onnx-sched`` process, checked as the guide asks of every command:

* exit 0, or a non-zero exit with exactly one line on stderr and no traceback (a model a runtime
  refuses is bad input, not a bug);
* on exit 0, what the command promises: ``inspect``'s report written; ``bench IN OUT`` (OUT:
  ``optimize``'s peak-mem output) with OUT's outputs equal to IN's; ``profile``'s file readable by
  ``load_profiles``; ``bench-placement``'s split with the whole model's outputs (``--memory``: also its one
  process per device).

    python benchmarks/unseen_commands.py --out docs/unseen_commands.json --markdown docs/unseen_commands.md
    python benchmarks/unseen_commands.py --source kinds --out docs/unseen_command_kinds.json
    python benchmarks/unseen_commands.py --source rare --out docs/unseen_command_rare.json   # rare_models.py
    python benchmarks/unseen_commands.py --source control-flow --out docs/unseen_command_control_flow.json
    python benchmarks/unseen_commands.py --source control-flow-random --out docs/unseen_command_control_flow_random.json
    python benchmarks/unseen_commands.py --source zoo --out docs/unseen_command_zoo.json   # zoo_models.py

``--sample N`` / ``--limit N`` as in ``unseen_models.py``; ``--commands`` a comma list of the rows below.
``--format openvino`` converts each model to an OpenVINO IR first (as ``unseen_models.py`` does; models OpenVINO
cannot convert are left out) and runs the commands that read an IR on the ``.xml`` (``bench``'s OUT then is
``optimize``'s IR):

    python benchmarks/unseen_commands.py --format openvino --out docs/unseen_commands_openvino.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import track

sys.path.insert(0, str(Path(__file__).resolve().parent))
from unseen_models import (  # noqa: E402
    backend_models,
    control_flow_models,
    family,
    markdown_table,
    model_name,
    rich_table,
    sample,
    to_openvino,
)

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"
QUICK = ["--repeats", "2", "--warmup", "1"]
PLACE = ["--method", "auto", "--profiles", str(PROFILES), "--profile-devices", "CPU,GPU.1", "--time-limit", "1", *QUICK]

#: row name -> (command words, the file whose contents the check reads); {m}: the model, {o}: an output prefix,
#: {opt}: optimize's output of the model, {dims}: the model's own --dim arguments
COMMANDS: dict[str, tuple[list[str], str | None]] = {
    "inspect": (["inspect", "{m}", "--report", "{o}.inspect.json", "{dims}"], "{o}.inspect.json"),
    "bench ort IN OUT": (["bench", "{m}", "{opt}", "--arena", "off", "--report", "{o}.bench_ort.json", *QUICK,
                          "{dims}"], "{o}.bench_ort.json"),
    "bench openvino IN OUT": (["bench", "{m}", "{opt}", "--runtime", "openvino", "--report", "{o}.bench_ov.json",
                               *QUICK, "{dims}"], "{o}.bench_ov.json"),
    "profile ort": (["profile", "{m}", "--runtime", "ort", "-d", "CPUExecutionProvider", "--repeats", "2", "-o",
                     "{o}.prof_ort.json", "{dims}"], "{o}.prof_ort.json"),
    "profile openvino": (["profile", "{m}", "--repeats", "2", "--no-transfer", "-o", "{o}.prof_ov.json", "{dims}"],
                         "{o}.prof_ov.json"),
    "bench-placement ort": (["bench-placement", "{m}", "--runtime", "ort", "--report", "{o}.bp_ort.json", *PLACE,
                             "{dims}"], "{o}.bp_ort.json"),
    "bench-placement openvino": (["bench-placement", "{m}", "--report", "{o}.bp_ov.json", *PLACE, "{dims}"],
                                 "{o}.bp_ov.json"),
    "bench-placement ort --memory": (["bench-placement", "{m}", "--runtime", "ort", "--memory", "--report",
                                      "{o}.bp_mem.json", *PLACE, "{dims}"], "{o}.bp_mem.json"),
}


def cli(*words: str, timeout: float = 600.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx_sched.cli", *words], capture_output=True, text=True,
                          timeout=timeout)


def label(model: Path) -> str:
    """A model's name in the rows: the backend test's name, or an IR's file stem."""
    return model.stem if model.suffix == ".xml" else model_name(model)


def promise_kept(name: str, report: Path, paired: bool) -> bool | str:
    """Whether a command that exited 0 did what it says (module docstring); a string says what is wrong.
    ``paired``: ``bench`` ran IN and OUT (else IN alone, when ``optimize`` refused the model: nothing to compare)."""
    if not report.exists():
        return "no report written"
    if name.startswith("profile"):
        from onnx_sched.profiling import load_profiles

        try:
            load_profiles(report)
        except Exception as exc:  # noqa: BLE001 -- reported, not raised
            return f"profile unreadable: {str(exc).splitlines()[0][:200]}"
        return True
    data = json.loads(report.read_text())
    compared = name.startswith("bench-placement") or (name.startswith("bench") and paired)
    if compared and data.get("outputs_equal") is not True:
        return f"outputs_equal {data.get('outputs_equal')}, max abs error {data.get('max_abs_error')}"
    if name.endswith("--memory") and (data.get("device_memory") or {}).get("outputs_equal") is not True:
        return "the per-device processes' outputs differ from the whole model's (or were not measured)"
    return True


def check_one(model: Path, name: str, dims: list[str], out_dir: Path, optimized: Path | None) -> dict:
    """One command on one model (module docstring); ``optimized``: its peak-mem output for ``bench IN OUT``."""
    words, report = COMMANDS[name]
    tag = out_dir / label(model)
    fill = {"m": str(model), "o": str(tag), "opt": str(optimized) if optimized else ""}
    args = []
    for w in words:
        if w == "{dims}":
            args += dims
        elif w != "{opt}" or optimized is not None:  # no optimized model: bench IN alone
            args.append(w.format(**fill))
    t0 = time.perf_counter()
    proc = cli(*args)
    stderr = [line for line in proc.stderr.splitlines() if line.strip()]
    row = {"model": label(model), "command": name, "rc": proc.returncode,
           "seconds": round(time.perf_counter() - t0, 2), "traceback": "Traceback" in proc.stderr,
           "stderr_lines": len(stderr), "stderr_last": stderr[-1][:300] if stderr else ""}
    if proc.returncode != 0:
        row["clean_error"] = len(stderr) == 1 and not row["traceback"]
        if not row["clean_error"]:
            row["stderr"] = proc.stderr[-3000:]
        return row
    row["kept"] = promise_kept(name, Path(report.format(**fill)), optimized is not None)
    row["quiet"] = not stderr  # nothing on stderr when all went well
    return row


def counts(rows: list[dict]) -> dict:
    ok = [r for r in rows if r["rc"] == 0]
    return {"runs": len(rows), "exit_0": len(ok),
            "clean_errors": sum(1 for r in rows if r["rc"] != 0 and r.get("clean_error")),
            "bad_errors": sum(1 for r in rows if r["rc"] != 0 and not r.get("clean_error")),
            "kept": sum(1 for r in ok if r.get("kept") is True), "quiet": sum(1 for r in ok if r.get("quiet")),
            "max_seconds": max((r["seconds"] for r in rows), default=0.0)}


def is_problem(row: dict) -> bool:
    return (row["rc"] != 0 and not row.get("clean_error")) or (row["rc"] == 0 and row.get("kept") is not True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", choices=("backend", "kinds", "rare", "control-flow", "control-flow-random", "zoo"),
                    default="backend")
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--format", choices=("onnx", "openvino"), default="onnx")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    names = [c.strip() for c in args.commands.split(",") if c.strip()]
    unknown = sorted(set(names) - set(COMMANDS))
    if unknown:
        ap.error(f"--commands: no row {', '.join(unknown)}; rows: {', '.join(COMMANDS)}")
    if args.format == "openvino":  # ONNX Runtime does not read an IR
        names = [n for n in names if "ort" not in n.split()]
    rows: list[dict] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if args.source == "kinds":
            from model_kinds import build

            models = [(m, extra) for m, _, extra in build(Path(tmp) / "kinds")]
        elif args.source == "rare":
            from rare_models import build

            models = [(m, extra) for m, _, extra in build(Path(tmp) / "rare")]
        elif args.source == "zoo":
            from zoo_models import build

            models = [(m, extra) for m, _, extra in build(Path(tmp) / "zoo")]
        elif args.source == "control-flow":
            models = [(m, extra) for m, _, extra in control_flow_models(Path(tmp) / "control_flow")]
        elif args.source == "control-flow-random":
            from control_flow_models import build

            models = [(m, extra) for m, _, extra in build(Path(tmp) / "control_flow_random")]
        else:
            models = [(m, []) for m in backend_models()]
        if args.sample:
            models = sample(models, args.sample, key=lambda m: family(m[0]))
        models = models[: args.limit or None]
        tested = 0
        for model, dims in track(models, description="models", console=Console(stderr=True)):
            if args.format == "openvino":
                ir = to_openvino(model, Path(tmp))
                if ir is None:
                    continue
                model, dims = ir[0], []  # the IR's shapes are static
            tested += 1
            optimized = Path(tmp) / f"{label(model)}.peak-mem{model.suffix}"
            made = cli("optimize", str(model), "-o", str(optimized), "--time-limit", "1", *dims)
            for name in names:
                rows.append(check_one(model, name, dims, Path(tmp), optimized if made.returncode == 0 else None))
    table_rows = [{"command": n, **counts([r for r in rows if r["command"] == n])} for n in names]
    columns = ("command", "runs", "exit_0", "clean_errors", "bad_errors", "kept", "quiet", "max_seconds")
    title = f"onnx-sched's commands on {tested} unseen {args.source} models ({args.format})"
    Console(width=150).print(rich_table(title, columns, table_rows))
    problems = [r for r in rows if is_problem(r)]
    for r in problems:
        print(f"PROBLEM {r['model']} {r['command']}: rc {r['rc']}, {r.get('kept')}, {r['stderr_last'][:200]}")
    result = {"source": args.source, "format": args.format, "models": tested,
              "seconds": round(time.perf_counter() - t0, 1), "summary": table_rows, "problems": problems, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text("\n".join([f"### {title}", "", *markdown_table(columns, table_rows), ""]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
