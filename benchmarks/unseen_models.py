"""Models onnx-sched never saw: ``onnx-sched optimize`` on onnx's own backend test models, every objective.

The ``onnx`` package ships ~150 small models for its backend tests (``onnx/backend/test/data``:
pytorch-converted and pytorch-operator layers, "simple" graphs with sequences and expands, a few
real networks, the ``light_*`` models), with opsets from 6 to 17, initializers listed as graph
inputs and sequence types: inputs nobody tuned onnx-sched for.  Each model runs through the real
command (a fresh process) for each objective, and the result is checked as the guide asks of every
model we write:

* exit 0, or a non-zero exit with exactly one line on stderr and no traceback;
* the output passes ``onnx.checker`` (full check; the plain check where the input fails the full one too);
* where the model has test inputs and ONNX Runtime loads the *input* model, the output gives the
  same outputs (``allclose``, NaNs equal; both run with graph optimizations off).

    python benchmarks/unseen_models.py --out docs/unseen_models.json --markdown docs/unseen_models.md

``--objectives`` picks objectives (default all four; makespan / latency / peak-mem-devices use the
files of ``benchmarks/time_limit.py``), ``--limit N`` the first N models.  ``--format openvino`` converts
each model to an OpenVINO IR first (``ov.convert_model``; models it cannot convert are left out) and
runs the command on the ``.xml``: the output IR must give OpenVINO's outputs of the input IR on seeded
random inputs (the checker does not apply).  ``--source kinds`` runs the model kinds of
``benchmarks/model_kinds.py`` instead (quantized, ONNX Runtime-fused, recurrent, control flow, float16,
external data, dynamic dims; built with torch, compared on their seeded inputs); ``--source rare`` the models of
``benchmarks/rare_models.py`` (the format's rarer parts: sparse initializers, local functions, sequence and
optional outputs, unseeded random ops, contrib and ``ai.onnx.ml`` ops, 4-bit weights, ...); ``--source control-flow``
the node test cases of the onnx package (``onnx.backend.test.case.node``) whose graphs hold ``If``, ``Loop``,
``Scan`` or ``SequenceMap``, written out with their first data set; ``--source control-flow-random`` the 40 random
models with nested ``If`` / ``Loop`` / ``Scan`` of ``benchmarks/control_flow_models.py``; ``--source zoo`` the
real-world architectures of ``benchmarks/zoo_models.py`` the corpus lacks (torchvision GoogLeNet, Inception-v3,
RegNetY, ShuffleNetV2, MobileNetV3, EfficientNetV2, DeepLabV3, MaxViT; transformers Qwen2 with a KV cache, CLIP,
MobileViT, DETR, LeViT and Marian; random weights, shrunk; needs torch, torchvision and transformers).  Outputs an
unseeded random op feeds are not compared (``onnx_sched.bench.outputs.random_outputs``).

``--methods`` runs named methods instead of each objective's default (``auto``): a comma list of
``OBJECTIVE:METHOD`` pairs, or ``all`` for every method of every objective in ``--objectives`` (the
registry ``onnx-sched methods`` prints).  Each (model, objective, method) is one fresh
``optimize ... --method METHOD`` process with the same checks; the output gains a table per method, and a
run slower than ``3 x --time-limit + 2 s`` (interpreter start) counts as a problem too.  ``--sample N``
picks N models spread over the name families (pytorch-converted, pytorch-operator, simple, ``light_*``)
and evenly over each family's sorted list, instead of the first N; the same N always gives the same models:

    python benchmarks/unseen_models.py --methods all --sample 25 --out /tmp/all_methods.json
    python benchmarks/unseen_models.py --methods peak-mem:exact,latency:hsdag --limit 10

``--args "..."`` appends its words (split as a shell would, ``shlex.split``) to every ``optimize`` command, after
the objective's files and the model's own arguments, e.g. to sweep the paths that measure placements for real
(a single word starting with ``-`` needs the ``--args=WORD`` form, as argparse takes it for an option otherwise):

    python benchmarks/unseen_models.py --methods latency:hsdag,latency:placeto --sample 25 \\
        --args "--option reward=measured --option run_devices=CPU,CPUB,CPU2"
    python benchmarks/unseen_models.py --methods makespan:auto --args "--target measured" --time-limit 5

With ``--args "--ort-graph LEVEL"`` the input's reference run is at ONNX Runtime's LEVEL (the output holds ORT's
fused ops, which round differently from the ops they replace; session 47: marian's outputs differed by 9e-8
from the unoptimized run, and not at all from the run at that level).
"""

from __future__ import annotations

import argparse
import glob
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from rich.console import Console
from rich.progress import track
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_limit import OBJECTIVE_ARGS  # noqa: E402

from onnx_sched.bench.outputs import random_outputs  # noqa: E402

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"


def backend_models() -> list[Path]:
    """Every ``model.onnx`` of the backend test data, then the ``light_*`` models."""
    return sorted(Path(p) for p in glob.glob(str(DATA / "*" / "*" / "model.onnx"))) + sorted(DATA.glob("light/*.onnx"))


def control_flow_models(folder: Path) -> list[tuple[Path, dict[str, np.ndarray], list[str]]]:
    """onnx's node test cases with control flow (``If`` / ``Loop`` / ``Scan`` / ``SequenceMap`` in the main graph),
    each written as ``folder/NAME/model.onnx`` with its first data set's inputs."""
    import warnings

    with warnings.catch_warnings():  # the case generators compute their expected outputs with numpy
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        cases = collect_testcases(None)
    out = []
    for case in cases:
        if case.model is None or not {n.op_type for n in case.model.graph.node} & {"If", "Loop", "Scan", "SequenceMap"}:
            continue
        path = folder / case.name / "model.onnx"
        path.parent.mkdir(parents=True)
        onnx.save(case.model, path)
        inits = {t.name for t in case.model.graph.initializer}
        names = [i.name for i in case.model.graph.input if i.name not in inits]
        out.append((path, dict(zip(names, case.data_sets[0][0])) if case.data_sets else {}, []))
    return out


def model_name(path: Path) -> str:
    return path.parent.name if path.name == "model.onnx" else path.stem


def family(path: Path) -> str:
    """The name family of a model: its backend data folder (``pytorch-converted``, ``simple``, ...), ``light``."""
    return path.parent.parent.name if path.name == "model.onnx" else path.parent.name


def spread(items: list, n: int) -> list:
    """``n`` of ``items`` evenly over the list, its first and last included (all of them if ``n`` is larger)."""
    if n >= len(items):
        return list(items)
    return [items[i] for i in sorted({round(i * (len(items) - 1) / max(n - 1, 1)) for i in range(n)})]


def sample(items: list, n: int, key: Callable[[object], str]) -> list:
    """``n`` of ``items`` (in their order) over the families ``key`` gives: one from each family in turn while
    a family has any left, each family's share taken by :func:`spread`.  Deterministic."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    share = dict.fromkeys(groups, 0)
    while sum(share.values()) < min(n, len(items)):
        for name, group in groups.items():
            if share[name] < len(group) and sum(share.values()) < n:
                share[name] += 1
    chosen = {id(item) for name, group in groups.items() for item in spread(group, share[name])}
    return [item for item in items if id(item) in chosen]


def method_runs(spec: str, objectives: list[str]) -> list[tuple[str, str]]:
    """``(objective, method)`` pairs of ``--methods``: ``all`` (every registered method of ``objectives``, as
    ``onnx-sched methods`` lists them) or ``OBJECTIVE:METHOD,...``; ``ValueError`` names a bad pair."""
    from onnx_sched.passes import available

    if spec.strip() == "all":
        return [(obj, m) for obj in OBJECTIVE_ARGS if obj in objectives for m in available(obj)]
    runs = []
    for pair in (p.strip() for p in spec.split(",") if p.strip()):
        obj, _, method = pair.partition(":")
        if obj not in OBJECTIVE_ARGS or method not in available(obj):
            raise ValueError(f"--methods: {pair!r} is not OBJECTIVE:METHOD of `onnx-sched methods`")
        runs.append((obj, method))
    return runs


def test_inputs(path: Path) -> dict[str, np.ndarray]:
    """The model's first test data set, by graph input (non-initializer inputs in order); empty if none."""
    pbs = sorted(path.parent.glob("test_data_set_0/input_*.pb"), key=lambda p: int(p.stem.split("_")[-1]))
    if path.name != "model.onnx" or not pbs:
        return {}
    graph = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    feeds = {}
    for name, pb in zip(names, pbs):
        tensor = onnx.TensorProto()
        try:
            tensor.ParseFromString(pb.read_bytes())
        except Exception:  # noqa: BLE001 -- a sequence or map input: no comparison for this model
            return {}
        feeds[name] = numpy_helper.to_array(tensor)
    return feeds


#: ``optimize --ort-graph LEVEL`` writes ONNX Runtime's graph at that level, fused ops and all: its outputs are
#: compared with the input's run at the same level (a fused op rounds differently from the ops it replaces).
ORT_LEVELS = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


def reference_level(words: list[str]) -> ort.GraphOptimizationLevel:
    """The optimization level of the input's reference run for ``optimize`` with the arguments ``words``."""
    for i, word in enumerate(words):
        level = word.split("=", 1)[1] if word.startswith("--ort-graph=") else \
            words[i + 1] if word == "--ort-graph" and i + 1 < len(words) else None
        if level in ORT_LEVELS:
            return ORT_LEVELS[level]
    return ort.GraphOptimizationLevel.ORT_DISABLE_ALL


def run_ort(path: Path, feeds: dict[str, np.ndarray],
            level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_DISABLE_ALL) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = level
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def same(a: list, b: list, skip: frozenset[int] = frozenset()) -> bool:
    """Outputs equal, position by position but ``skip`` (NaN == NaN): tensors, sequences (lists) element by element,
    empty optionals (``None``)."""
    if len(a) != len(b):
        return False
    for i, (x, y) in enumerate(zip(a, b)):
        if i in skip:
            continue
        if x is None or y is None or isinstance(x, list) or isinstance(y, list):
            if not (x is None and y is None) and not (isinstance(x, list) and isinstance(y, list) and same(x, y)):
                return False
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        if x.dtype.kind in "fc" and not np.allclose(x, y, equal_nan=True):
            return False
        if x.dtype.kind not in "fc" and not np.array_equal(x, y):
            return False
    return True


def to_openvino(model: Path, out_dir: Path,
                feeds: dict[str, np.ndarray] | None = None) -> tuple[Path, dict[str, np.ndarray]] | None:
    """``model`` as an OpenVINO IR in ``out_dir`` and seeded inputs for it (``feeds``' shapes, if given, fix the
    IR's input shapes and are its inputs), or ``None`` if OpenVINO cannot convert or compile it."""
    import openvino as ov

    xml = out_dir / f"{model_name(model)}.xml"
    try:
        shapes = {"input": [(k, list(v.shape)) for k, v in feeds.items()]} if feeds else {}
        ov.save_model(ov.convert_model(str(model), **shapes), str(xml))
        compiled = ov.Core().compile_model(str(xml), "CPU")
    except Exception:  # noqa: BLE001 -- not every backend test model converts
        return None
    if feeds:
        return xml, feeds
    rng = np.random.default_rng(0)
    feeds = {}
    for inp in compiled.inputs:
        shape = [max(int(d), 1) for d in inp.get_partial_shape().get_min_shape()]
        dtype = inp.get_element_type().to_dtype()
        feeds[inp.any_name] = ((rng.random(shape) * 3).astype(dtype) if dtype.kind == "f"
                               else rng.integers(0, 3, shape).astype(dtype))
    return xml, feeds


def run_openvino(xml: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import openvino as ov

    return [np.asarray(v) for v in ov.Core().compile_model(str(xml), "CPU")(feeds).values()]


def check_one(model: Path, objective: str, time_limit: float, out_dir: Path,
              reference: list[np.ndarray] | None, feeds: dict[str, np.ndarray], extra: list[str] = (),
              method: str | None = None) -> dict:
    """One ``optimize`` run and its checks (see module docstring); ``model`` an ``.onnx`` or an IR ``.xml``;
    ``extra``: more command arguments (``--dim``); ``method``: ``--method`` (else the command's default), which
    the row then names, with ``slow`` when the run took more than ``3 x time_limit + 2 s``."""
    openvino = model.suffix == ".xml"
    tag = objective if method is None else f"{objective}.{method}"
    out = out_dir / f"{model_name(model) if not openvino else model.stem}.{tag}{model.suffix}"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "onnx_sched.cli", "optimize", str(model), "-o", str(out),
                           "--objective", objective, "--time-limit", str(time_limit), *OBJECTIVE_ARGS[objective],
                           *extra, *(["--method", method] if method is not None else [])],
                          capture_output=True, text=True)
    stderr = [line for line in proc.stderr.splitlines() if line.strip()]
    row = {"model": model_name(model), "objective": objective, "rc": proc.returncode,
           "seconds": round(time.perf_counter() - t0, 2), "traceback": "Traceback" in proc.stderr,
           "stderr_last": stderr[-1] if stderr else ""}
    if method is not None:
        row = {"model": row.pop("model"), "objective": objective, "method": method, **row}
        row["slow"] = row["seconds"] > 3 * time_limit + 2
        if row["traceback"] or len(stderr) > 1:
            row["stderr"] = proc.stderr[-3000:]
    if proc.returncode != 0:
        row["clean_error"] = len(stderr) == 1 and not row["traceback"]
        return row
    if not openvino:
        row["checker"] = checker(out, model)
    if reference is not None:
        try:
            names = [] if openvino else [o.name for o in onnx.load(model, load_external_data=False).graph.output]
            unchecked = random_outputs(onnx.load(model, load_external_data=False)) if names else frozenset()
            skip = frozenset(i for i, name in enumerate(names) if name in unchecked)  # their draws follow the order
            row["same_outputs"] = same(reference, run_openvino(out, feeds) if openvino else run_ort(out, feeds), skip)
        except Exception as exc:  # noqa: BLE001
            row["same_outputs"] = str(exc).splitlines()[0][:200]
    return row


def checker(out: Path, model: Path) -> bool | str:
    """``onnx.checker``'s full check of ``out``; where the input ``model`` fails it too (onnx's shape inference
    cannot type a sparse initializer an op reads), its plain check.  True, or the first line of what failed."""
    try:
        onnx.checker.check_model(onnx.load(out), full_check=True)
        return True
    except Exception as exc:  # noqa: BLE001 -- reported, not raised
        full = str(exc).splitlines()[0][:200]
    try:
        onnx.checker.check_model(onnx.load(model), full_check=True)
        return full
    except Exception:  # noqa: BLE001 -- the input fails it as well: the plain check
        try:
            onnx.checker.check_model(onnx.load(out))
            return True
        except Exception as exc:  # noqa: BLE001
            return str(exc).splitlines()[0][:200]


def counts(rs: list[dict]) -> dict:
    """The summary cells of some runs."""
    ok = [r for r in rs if r["rc"] == 0]
    return {
        "runs": len(rs), "exit_0": len(ok),
        "clean_errors": sum(1 for r in rs if r["rc"] != 0 and r.get("clean_error")),
        "bad_errors": sum(1 for r in rs if r["rc"] != 0 and not r.get("clean_error")),
        "checker_ok": sum(1 for r in ok if r.get("checker") is True) if any("checker" in r for r in ok) else "-",
        "outputs_compared": sum(1 for r in ok if "same_outputs" in r),
        "outputs_same": sum(1 for r in ok if r.get("same_outputs") is True),
        "max_seconds": max((r["seconds"] for r in rs), default=0.0),
    }


def summary(rows: list[dict], objectives: list[str]) -> list[dict]:
    return [{"objective": obj, **counts([r for r in rows if r["objective"] == obj])} for obj in objectives]


def method_summary(rows: list[dict], runs: list[tuple[str, str]]) -> list[dict]:
    """One row per ``(objective, method)``: :func:`counts`, the slow runs and the slowest run's model."""
    out = []
    for obj, method in runs:
        rs = [r for r in rows if r["objective"] == obj and r.get("method") == method]
        slowest = max(rs, key=lambda r: r["seconds"], default=None)
        out.append({"objective": obj, "method": method, **counts(rs), "slow": sum(1 for r in rs if r.get("slow")),
                    "slowest_model": slowest["model"] if slowest else ""})
    return out


def is_problem(row: dict) -> bool:
    """A run the checks fail (see module docstring)."""
    return ((row["rc"] != 0 and not row.get("clean_error")) or row.get("checker", True) is not True
            or row.get("same_outputs", True) is not True or bool(row.get("slow")))


def markdown_table(columns: tuple[str, ...], table_rows: list[dict]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    return lines + ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in table_rows]


def rich_table(title: str, columns: tuple[str, ...], table_rows: list[dict]) -> Table:
    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="left" if c in ("objective", "method", "slowest_model") else "right")
    for r in table_rows:
        table.add_row(*(str(r[c]) for c in columns))
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objectives", default=",".join(OBJECTIVE_ARGS))
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--limit", type=int, default=0, help="only the first N models")
    ap.add_argument("--sample", type=int, default=0, help="N models spread over the families (before --limit)")
    ap.add_argument("--methods", default=None, help="OBJECTIVE:METHOD,... or 'all': run these methods")
    ap.add_argument("--format", choices=("onnx", "openvino"), default="onnx")
    ap.add_argument("--source", choices=("backend", "kinds", "rare", "control-flow", "control-flow-random", "zoo"),
                    default="backend",
                    help="onnx's backend test models, the model kinds of benchmarks/model_kinds.py (needs torch), "
                         "the models of the format's rarer parts of benchmarks/rare_models.py, onnx's node test "
                         "cases with control flow, the random nested control flow of "
                         "benchmarks/control_flow_models.py, or the real-world architectures of "
                         "benchmarks/zoo_models.py (needs torch, torchvision, transformers)")
    ap.add_argument("--args", default="", metavar="WORDS",
                    help='more optimize arguments for every run, shlex-split: --args "--target measured"')
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        more = shlex.split(args.args)
    except ValueError as exc:
        ap.error(f"--args: {exc}")
    objectives = [o for o in args.objectives.split(",") if o]
    unknown = sorted(set(objectives) - set(OBJECTIVE_ARGS))
    if unknown:
        ap.error(f"unknown objective(s) {', '.join(unknown)}; choose from {', '.join(OBJECTIVE_ARGS)}")
    try:
        runs = method_runs(args.methods, objectives) if args.methods is not None else [(o, None) for o in objectives]
    except ValueError as exc:
        ap.error(str(exc))
    if args.methods is not None:
        objectives = list(dict.fromkeys(obj for obj, _ in runs))
    rows: list[dict] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if args.source == "kinds":
            from model_kinds import build

            models = build(Path(tmp) / "kinds")
        elif args.source == "rare":
            from rare_models import build

            models = build(Path(tmp) / "rare")
        elif args.source == "zoo":
            from zoo_models import build

            models = build(Path(tmp) / "zoo")
        elif args.source == "control-flow":
            models = control_flow_models(Path(tmp) / "control_flow")
        elif args.source == "control-flow-random":
            from control_flow_models import build

            models = build(Path(tmp) / "control_flow_random")
        else:
            models = [(m, None, []) for m in backend_models()]
        if args.sample:
            models = sample(models, args.sample, key=lambda m: family(m[0]))
        models = models[: args.limit or None]
        converted = 0
        for model, given, extra in track(models, description="models", console=Console(stderr=True)):
            if args.format == "openvino":
                ir = to_openvino(model, Path(tmp), given)
                if ir is None:
                    continue
                (model, feeds), converted, extra = ir, converted + 1, []  # the IR's shapes are static
                try:
                    reference = run_openvino(model, feeds)
                except Exception:  # noqa: BLE001 -- seeded inputs at the smallest shapes do not fit every model
                    reference = None
            else:
                feeds = given if given is not None else test_inputs(model)
                try:
                    reference = run_ort(model, feeds, reference_level(more)) if feeds else None
                except Exception:  # noqa: BLE001 -- ONNX Runtime cannot run the input model itself
                    reference = None
            for obj, method in runs:
                rows.append(check_one(model, obj, args.time_limit, Path(tmp), reference, feeds, [*extra, *more],
                                      method))
    table_rows = summary(rows, objectives)
    problems = [r for r in rows if is_problem(r)]
    tested = converted if args.format == "openvino" else len(models)
    title = f"onnx-sched optimize on {tested} unseen {args.format} models (--time-limit {args.time_limit:g})"
    columns = ("objective", "runs", "exit_0", "clean_errors", "bad_errors", "checker_ok", "outputs_compared",
               "outputs_same", "max_seconds")
    Console(width=150).print(rich_table(title, columns, table_rows))
    method_rows = method_summary(rows, runs) if args.methods is not None else []
    method_columns = ("objective", "method", *columns[1:], "slow", "slowest_model")
    if method_rows:
        Console(width=200).print(rich_table(f"{title}, per method", method_columns, method_rows))
    for r in problems:
        name = r["objective"] if "method" not in r else f"{r['objective']}:{r['method']} ({r['seconds']} s)"
        print(f"PROBLEM {r['model']} {name}: rc {r['rc']}, {r.get('checker')}, {r.get('same_outputs')}, "
              f"{r['stderr_last']}")
    command = "python benchmarks/unseen_models.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.out:
        result = {"command": command, "models": tested, "format": args.format, "summary": table_rows}
        if method_rows:
            result["model_names"] = [model_name(m) for m, _, _ in models]
            result["methods_summary"] = method_rows
        result.update({"problems": problems, "rows": rows, "seconds": round(time.perf_counter() - t0, 1)})
        args.out.write_text(json.dumps(result, indent=1))
    if args.markdown:
        lines = [f"`{command}`", "", *markdown_table(columns, table_rows)]
        if method_rows:
            lines += ["", *markdown_table(method_columns, method_rows)]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
