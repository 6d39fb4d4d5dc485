"""Measure real peak memory and latency of models in ONNX Runtime or OpenVINO.

Each model (in ORT: each model and arena setting) runs in its own fresh Python
process, :mod:`onnx_sched.bench.ort_runner` or
:mod:`onnx_sched.bench.runtimes.openvino_runner`, started the same way
(:mod:`onnx_sched.bench.runtimes.fresh_process`) on the same seeded random inputs
(:func:`random_inputs`), so the numbers of two orderings of one model are
comparable and nothing of one run leaks into the next.  When a reordered model is
given, its outputs are compared to the original's: in ORT *bitwise* (a reorder
must not change a single bit); in OpenVINO within ``rtol = atol = 1e-5`` and with
the max abs error (OpenVINO may pick other kernels for another graph, so bitwise
equality is not expected).

With the heap tracker installed (memray, the ``[bench]`` extra; see
:mod:`onnx_sched.bench.heap`), each runner also measures the live heap of one
run, and the report sets it beside the memory model's prediction for the file
(:mod:`onnx_sched.bench.prediction`): predicted and measured saving of OUT over
IN, and whether they agree.

ORT rewrites the graph (constant folding, fusions) before it orders it, so a
model that already is ORT's optimized graph (:func:`ort_optimized_model`, in
:mod:`onnx_sched.bench.runtimes.ort_graph`, which marks it) is run with
optimizations off, and the original it is compared to is run at the level that
graph was produced with.

Example:
    >>> report = bench_models("in.onnx", "out.onnx", repeats=5)   # doctest: +SKIP
    >>> report.outputs_equal, report.runs[0].peak_rss_delta        # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.bench.heap import MISSING_TRACKER, heap_tracker_available
from onnx_sched.bench.inputs import load_model_header, random_inputs
from onnx_sched.bench.outputs import ATOL, RTOL, npz_entries, random_outputs
from onnx_sched.bench.outputs import compare_outputs as _within_tolerance
from onnx_sched.bench.prediction import PredictedPeak, SavingComparison, compare_savings, predict_file_order
from onnx_sched.bench.runtimes.fresh_process import run_runner
from onnx_sched.bench.runtimes.openvino_model import is_ir
from onnx_sched.bench.runtimes.ort_graph import ORT_OPTIMIZED_KEY, model_opt_level, ort_optimized_model
from onnx_sched.errors import OnnxSchedError

__all__ = [
    "HEAP_MEASURED",
    "MEMORY_MEASURED",
    "ORT_OPTIMIZED_KEY",
    "RUNTIMES",
    "BenchReport",
    "RunResult",
    "bench_models",
    "compare_outputs",
    "model_opt_level",
    "ort_optimized_model",
    "random_inputs",
    "run_ort_subprocess",
]

#: The runner module of each runtime :func:`bench_models` measures in, and its name in messages.
_RUNNERS = {"ort": ("onnx_sched.bench.ort_runner", "ORT"),
            "openvino": ("onnx_sched.bench.runtimes.openvino_runner", "OpenVINO")}
RUNTIMES = tuple(_RUNNERS)
#: What ``peak_rss_delta`` is, per runtime (in the report and under the table).
MEMORY_MEASURED = {
    "ort": "process RSS high-water mark during warm-up + timed runs, minus RSS after session creation",
    "openvino": "process RSS high-water mark during compile + warm-up + timed runs, minus RSS before compile",
}
#: What ``heap_peak_bytes`` and ``heap_reserved_bytes`` are, per runtime.
HEAP_MEASURED = {
    "ort": "live heap bytes allocated during one session.run after warm-up (memray; arena off: activations, "
           "outputs handed back, kernel scratch; with ORT's memory pattern the activations are one block laid out "
           "by ORT's planner); reserved: peak from the first run on (arena on: the arena)",
    "openvino": "live heap bytes allocated during one infer after warm-up (memray); reserved: peak from "
                "compile_model on (the plugin allocates its buffers while compiling)",
}


@dataclass(frozen=True)
class RunResult:
    """One model run in one fresh process (ORT: with one arena setting)."""

    label: str  # "in" or "out"
    model: str
    arena: bool | None  # None: OpenVINO (no such setting)
    opt_level: str | None  # ORT graph optimization level; None: OpenVINO
    peak_rss_delta: int  # bytes; what it is: BenchReport.memory_measured
    peak_rss_delta_sampled: int
    peak_rss_delta_maxrss: int
    latency_median_s: float
    latency_p90_s: float
    session_create_s: float  # OpenVINO: compile_model + create_infer_request
    heap_peak_bytes: int | None = None  # None: heap not measured; what it is: BenchReport.heap_measured
    heap_reserved_bytes: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class BenchReport:
    """All runs of one ``bench`` call and the output comparison."""

    runs: tuple[RunResult, ...]
    outputs_equal: bool | None  # None when only one model was given
    mismatched_outputs: tuple[str, ...]
    seed: int
    repeats: int
    warmup: int
    input_shapes: Mapping[str, tuple[int, ...]]
    runtime: str = "ort"
    comparison: str = "bitwise"  # how outputs_equal was decided
    unchecked_outputs: tuple[str, ...] = ()  # left out of it: an unseeded random op feeds them (random_outputs)
    max_abs_error: float | None = None  # between OUT's and IN's outputs
    memory_measured: str = MEMORY_MEASURED["ort"]  # what peak_rss_delta is
    heap_measured: str | None = None  # what heap_peak_bytes is; None: not measured
    heap_note: str | None = None  # why the heap was not measured
    predictions: Mapping[str, PredictedPeak] = field(default_factory=dict)  # per label, file order
    prediction_errors: Mapping[str, str] = field(default_factory=dict)  # per label, why none
    savings: SavingComparison | None = None  # OUT vs IN, predicted vs heap-measured (arena off)

    def run(self, label: str, arena: bool | None = None) -> RunResult:
        """The run of ``label`` with ``arena`` (None: the first run of ``label``)."""
        for r in self.runs:
            if r.label == label and (arena is None or r.arena == arena):
                return r
        raise KeyError(f"no run {label!r} with arena={arena}")

    def heap_run(self, label: str) -> RunResult | None:
        """The run whose heap peak is ``label``'s activation peak (ORT: arena off), if measured."""
        runs = [r for r in self.runs if r.label == label and r.heap_peak_bytes is not None and not r.arena]
        return runs[0] if runs else None

    def models(self) -> dict[str, dict[str, Any]]:
        """Per model: path, heap peak (arena off), arena reservation and the prediction."""
        out: dict[str, dict[str, Any]] = {}
        for label in dict.fromkeys(r.label for r in self.runs):
            heap = self.heap_run(label)
            arena_on = [r for r in self.runs if r.label == label and r.arena]
            pred = self.predictions.get(label)
            out[label] = {
                "model": self.run(label).model,
                "heap_peak_bytes": None if heap is None else heap.heap_peak_bytes,
                "heap_reserved_bytes_arena_on": arena_on[0].heap_reserved_bytes if arena_on else None,
                "predicted_peak_bytes": None if pred is None else pred.peak_bytes,
                "predicted_inputs_bytes": None if pred is None else pred.inputs_bytes,
                "predicted_activation_bytes": None if pred is None else pred.activation_bytes,
                "predicted_activation_bytes_inplace": None if pred is None else pred.activation_bytes_inplace,
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["input_shapes"] = {k: list(v) for k, v in self.input_shapes.items()}
        d["predictions"] = {k: v.to_dict() for k, v in self.predictions.items()}
        d["savings"] = None if self.savings is None else self.savings.to_dict()
        d["models"] = self.models()
        return d

    def to_json(self, path: str | os.PathLike[str]) -> None:
        from onnx_sched.exporters.paths import atomic_write_bytes

        atomic_write_bytes(path, (json.dumps(self.to_dict(), indent=2) + "\n").encode())


def run_ort_subprocess(
    model_path: str | os.PathLike[str],
    inputs_npz: str | os.PathLike[str],
    *,
    arena: bool,
    opt_level: str,
    repeats: int,
    warmup: int,
    threads: int = 1,
    outputs_npz: str | os.PathLike[str] | None = None,
    profile_dir: str | None = None,
    timeout_s: float = 600.0,
    heap: bool = False,
    mem_pattern: bool = True,
) -> dict[str, Any]:
    """Run :mod:`onnx_sched.bench.ort_runner` in a fresh interpreter; return its JSON."""
    extra = ["--arena" if arena else "--no-arena", "--opt-level", opt_level,
             "--mem-pattern" if mem_pattern else "--no-mem-pattern"] + (["--heap"] if heap else [])
    if profile_dir is not None:
        extra += ["--profile-dir", profile_dir]
    module, name = _RUNNERS["ort"]
    return run_runner(module, name, model_path, inputs_npz, repeats=repeats, warmup=warmup, threads=threads,
                      outputs_npz=outputs_npz, extra_args=extra, timeout_s=timeout_s)


def compare_outputs(
    a_npz: str | os.PathLike[str], b_npz: str | os.PathLike[str], names: Sequence[str], *, bitwise: bool = True
) -> list[str]:
    """Names of outputs that differ in dtype, shape or any bit (NaN == NaN if same bits);
    with ``bitwise=False``, that differ beyond ``rtol = atol = 1e-5`` (NaN == NaN)."""
    return _compare_npz(a_npz, b_npz, names, bitwise=bitwise)[0]


def _compare_npz(
    a_npz: str | os.PathLike[str], b_npz: str | os.PathLike[str], names: Sequence[str], *, bitwise: bool,
    unchecked: Collection[str] = (),
) -> tuple[list[str], float]:
    bad: list[str] = []
    worst = 0.0
    with np.load(a_npz) as a, np.load(b_npz) as b:
        for i, name in enumerate(names):
            if name in unchecked:
                continue
            keys = npz_entries(a.files, i)  # one per tensor; a sequence's elements, an empty optional's marker
            if keys != npz_entries(b.files, i):
                bad.append(name)
                worst = float("inf")
                continue
            for key in keys:
                x, y = a[key], b[key]
                close, err = _within_tolerance({name: x}, {name: y})
                worst = max(worst, err)
                same = x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                if not (same if bitwise else close):
                    bad.append(name)
                    break
    return bad, worst


def _output_names_match(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same outputs, position by position (an OpenVINO port has several tensor names: one in common)."""
    names_a = a.get("output_tensor_names") or [[n] for n in a["outputs"]]
    names_b = b.get("output_tensor_names") or [[n] for n in b["outputs"]]
    return len(names_a) == len(names_b) and all(set(x) & set(y) for x, y in zip(names_a, names_b))


def _result(label: str, raw: Mapping[str, Any]) -> RunResult:
    return RunResult(
        label=label,
        model=str(raw["model"]),
        arena=None if raw.get("arena") is None else bool(raw["arena"]),
        opt_level=raw.get("opt_level"),
        peak_rss_delta=int(raw["peak_rss_delta"]),
        peak_rss_delta_sampled=int(raw["peak_rss_delta_sampled"]),
        peak_rss_delta_maxrss=int(raw["peak_rss_delta_maxrss"]),
        latency_median_s=float(raw["latency_median_s"]),
        latency_p90_s=float(raw["latency_p90_s"]),
        session_create_s=float(raw["session_create_s"]),
        heap_peak_bytes=raw.get("heap_peak_bytes"),
        heap_reserved_bytes=raw.get("heap_reserved_bytes"),
        raw=dict(raw),
    )


@dataclass(frozen=True)
class _Plan:
    """What the runs of one :func:`bench_models` call share."""

    runtime: str
    inputs_npz: Path
    repeats: int
    warmup: int
    threads: int
    timeout_s: float
    levels: Mapping[str, str]  # ORT optimization level per label
    headers: Mapping[str, Any]  # ONNX headers per label (ORT)
    profile_dir: str | None
    heap: bool
    mem_pattern: bool


def _launch(plan: _Plan, label: str, path: str, arena: bool | None, outputs_npz: Path | None) -> dict[str, Any]:
    """One fresh-process run of ``path`` in ``plan.runtime`` (``arena``: ORT only)."""
    heap = ["--heap"] if plan.heap else []
    if plan.runtime != "ort":
        module, name = _RUNNERS[plan.runtime]
        return run_runner(module, name, path, plan.inputs_npz, repeats=plan.repeats, warmup=plan.warmup,
                          threads=plan.threads, outputs_npz=outputs_npz, extra_args=heap, timeout_s=plan.timeout_s)
    raw = run_ort_subprocess(path, plan.inputs_npz, arena=bool(arena), opt_level=plan.levels[label],
                             repeats=plan.repeats, warmup=plan.warmup, threads=plan.threads, outputs_npz=outputs_npz,
                             profile_dir=plan.profile_dir, timeout_s=plan.timeout_s, heap=plan.heap,
                             mem_pattern=plan.mem_pattern)
    if "ort_profile" in raw and plan.levels[label] == "none":
        file_order = [n.name for n in plan.headers[label].graph.node]
        if all(file_order):  # ORT names unnamed nodes itself
            raw["executed_in_file_order"] = raw["ort_profile"]["executed_nodes"] == file_order
    return raw


def bench_models(
    model_in: str | os.PathLike[str],
    model_out: str | os.PathLike[str] | None = None,
    *,
    runtime: str = "ort",
    repeats: int = 10,
    warmup: int = 2,
    ort_opt: bool = True,
    arenas: Sequence[bool] = (False, True),
    threads: int = 1,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    profile: bool = False,
    timeout_s: float = 600.0,
    heap: bool | None = None,
    mem_pattern: bool = True,
) -> BenchReport:
    """Bench ``model_in`` (and ``model_out``, a reordering of it) in fresh ``runtime`` processes.

    ``runtime="ort"``: ``ort_opt=False`` runs both with ORT optimizations off.
    Otherwise a model marked by :func:`ort_optimized_model` runs with them off and
    an unmarked model runs at the marked one's level (``all`` when neither is
    marked), so both execute the same graph.  ``runtime="openvino"``: each model
    (ONNX or IR ``.xml``) compiled on CPU in f32; ``arenas`` does not apply and is
    ignored, ``ort_opt=False`` and ``profile`` are errors.  ``heap``: measure live
    heap bytes too (None: when the tracker is installed; True without it: an
    error naming the extra).  ``mem_pattern=False`` (ORT only) turns ORT's memory
    pattern off: each tensor its own allocation.  Never modifies the model files.
    """
    if runtime not in _RUNNERS:
        raise ValueError(f"bench: runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if repeats < 1 or warmup < 0 or threads < 1:
        raise ValueError(f"bench: repeats, threads must be >= 1 and warmup >= 0, got {repeats}, {threads}, {warmup}")
    if runtime == "openvino":  # before a runner process fails on it
        from onnx_sched.devices import openvino_core

        openvino_core()
    models = {"in": str(model_in)}
    if model_out is not None:
        models["out"] = str(model_out)
    headers: dict[str, Any] = {}
    levels: dict[str, str] = {}
    settings: tuple[bool | None, ...] = (None,)
    if runtime == "ort":
        if not arenas:
            raise ValueError("bench: at least one arena setting is needed")
        if any(is_ir(p) for p in models.values()):
            raise ValueError("bench: ONNX Runtime runs ONNX files; an OpenVINO IR .xml needs runtime 'openvino'")
        settings = tuple(arenas)
        headers = {label: load_model_header(p) for label, p in models.items()}
        marked = {label: model_opt_level(h) for label, h in headers.items()}
        base_level = next((lvl for lvl in marked.values() if lvl), "all")
        levels = {label: "none" if (not ort_opt or marked[label]) else base_level for label in models}
    elif profile or not ort_opt or not mem_pattern:
        raise ValueError(f"bench: profile, ort_opt=False and mem_pattern=False are ONNX Runtime options, "
                         f"not for runtime {runtime!r}")
    heap_note = None if heap is False or heap_tracker_available() else MISSING_TRACKER
    if heap and heap_note:
        raise OnnxSchedError(heap_note)
    measure_heap = heap is not False and heap_note is None
    feed = random_inputs(headers.get("in", models["in"]), seed=seed, dims=dims)
    if "out" in models:
        out_feed_names = set(random_inputs(headers.get("out", models["out"]), seed=seed, dims=dims))
        if out_feed_names != set(feed):
            raise OnnxSchedError(
                f"bench: inputs differ between models: {sorted(set(feed) ^ out_feed_names)}"
            )
    runs: list[RunResult] = []
    mismatched: list[str] = []
    max_err: float | None = None
    unchecked = frozenset().union(*(random_outputs(headers[label] if label in headers else load_model_header(p))
                                    for label, p in models.items() if not is_ir(p))) if "out" in models else frozenset()
    with tempfile.TemporaryDirectory(prefix="onnx_sched_bench_") as tmp:
        plan = _Plan(runtime, Path(tmp) / "inputs.npz", repeats, warmup, threads, timeout_s, levels, headers,
                     tmp if profile else None, measure_heap, mem_pattern)
        np.savez(plan.inputs_npz, **feed)
        first: dict[str, Mapping[str, Any]] = {}  # label -> report of its run that saved the outputs
        for arena in settings:
            for label, path in models.items():
                raw = _launch(plan, label, path, arena, None if label in first else Path(tmp) / f"{label}.npz")
                first.setdefault(label, raw)
                runs.append(_result(label, raw))
        if "out" in first and not _output_names_match(first["in"], first["out"]):
            mismatched = [f"output names differ: {first['in']['outputs']} vs {first['out']['outputs']}"]
        elif "out" in first:
            mismatched, max_err = _compare_npz(Path(tmp) / "in.npz", Path(tmp) / "out.npz", first["in"]["outputs"],
                                               bitwise=runtime == "ort", unchecked=unchecked)
    predictions, prediction_errors = _predictions(models, levels, dims)
    report = BenchReport(
        runs=tuple(runs),
        outputs_equal=(not mismatched) if model_out is not None else None,
        mismatched_outputs=tuple(mismatched),
        seed=seed,
        repeats=repeats,
        warmup=warmup,
        input_shapes={k: tuple(v.shape) for k, v in feed.items()},
        runtime=runtime,
        comparison="bitwise" if runtime == "ort" else f"allclose rtol={RTOL:g} atol={ATOL:g}",
        unchecked_outputs=tuple(sorted(unchecked)),
        max_abs_error=max_err,
        memory_measured=MEMORY_MEASURED[runtime],
        heap_measured=HEAP_MEASURED[runtime] if measure_heap else None,
        heap_note=heap_note,
        predictions=predictions,
        prediction_errors=prediction_errors,
    )
    return _with_savings(report)


def _predictions(
    models: Mapping[str, str], levels: Mapping[str, str], dims: Mapping[str, int] | None
) -> tuple[dict[str, PredictedPeak], dict[str, str]]:
    """The memory model's file-order peak of each model; why not, where it cannot be had."""
    predictions: dict[str, PredictedPeak] = {}
    errors: dict[str, str] = {}
    for label, path in models.items():
        if is_ir(path):
            errors[label] = ("no prediction for an OpenVINO IR file: OpenVINO plans its own op order, so there is no "
                             "file order to predict")
            continue
        try:
            predictions[label] = predict_file_order(path, dims, graph_is_run=levels.get(label) == "none")
        except (OnnxSchedError, ValueError) as exc:
            errors[label] = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return predictions, errors


def _with_savings(report: BenchReport) -> BenchReport:
    """``report`` with OUT's predicted vs measured saving over IN, when both are known."""
    heap_in, heap_out = report.heap_run("in"), report.heap_run("out")
    pred_in, pred_out = report.predictions.get("in"), report.predictions.get("out")
    if heap_in is None or heap_out is None or pred_in is None or pred_out is None:
        return report
    assert heap_in.heap_peak_bytes is not None and heap_out.heap_peak_bytes is not None
    savings = compare_savings(pred_in, pred_out, heap_in.heap_peak_bytes, heap_out.heap_peak_bytes)
    return replace(report, savings=savings)
