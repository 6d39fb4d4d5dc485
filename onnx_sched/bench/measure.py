"""Measure real peak memory and latency of ONNX models in ONNX Runtime.

Each (model, arena setting) runs in its own fresh Python process
(:mod:`onnx_sched.bench.ort_runner`), on the same seeded random inputs, so the
numbers of two orderings of one model are comparable and nothing of one run
leaks into the next.  When a reordered model is given, its outputs are compared
to the original's *bitwise* (a reorder must not change a single bit).

ORT rewrites the graph (constant folding, fusions) before it orders it, so a
model that already is ORT's optimized graph (:func:`ort_optimized_model`, which
marks it in ``metadata_props``) is run with optimizations off, and the original
it is compared to is run at the level that graph was produced with.

Example:
    >>> report = bench_models("in.onnx", "out.onnx", repeats=5)   # doctest: +SKIP
    >>> report.outputs_equal, report.runs[0].peak_rss_delta        # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import ModelLoadError, OnnxSchedError

__all__ = [
    "ORT_OPTIMIZED_KEY",
    "BenchReport",
    "RunResult",
    "bench_models",
    "compare_outputs",
    "model_opt_level",
    "ort_optimized_model",
    "random_inputs",
    "run_ort_subprocess",
]

#: metadata_props key written by :func:`ort_optimized_model` (value: the level).
ORT_OPTIMIZED_KEY = "onnx_sched.ort_optimized_level"

# Fixed malloc threshold: large buffers are mmap'ed and returned to the OS at once
# when freed, so RSS follows live memory.  Without it glibc raises the threshold
# after the first big free and later buffers stay in the heap, blurring the peak
# (measured: a depth-first 3 x 16 MiB model read +67.7 MB without it, +17.3 MB with it).
_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}


@dataclass(frozen=True)
class RunResult:
    """One model run in one fresh process with one arena setting."""

    label: str  # "in" or "out"
    model: str
    arena: bool
    opt_level: str
    peak_rss_delta: int  # bytes above the RSS just before the first run
    peak_rss_delta_sampled: int
    peak_rss_delta_maxrss: int
    latency_median_s: float
    latency_p90_s: float
    session_create_s: float
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

    def run(self, label: str, arena: bool) -> RunResult:
        for r in self.runs:
            if r.label == label and r.arena == arena:
                return r
        raise KeyError(f"no run {label!r} with arena={arena}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["input_shapes"] = {k: list(v) for k, v in self.input_shapes.items()}
        return d

    def to_json(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


def _load_model_header(path: str | os.PathLike[str]) -> Any:
    import onnx

    p = Path(path)
    if not p.is_file():
        raise ModelLoadError(f"model file not found: {p}")
    try:
        return onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and friends
        raise ModelLoadError(f"cannot read ONNX model {p}: {exc}") from exc


def random_inputs(
    model: Any, seed: int = 0, dims: Mapping[str, int] | None = None
) -> dict[str, np.ndarray]:
    """Seeded random data for every graph input that is not an initializer.

    Floats are standard normal; integer inputs are 0 or 1 (valid token ids,
    attention masks, indices); bools are random.  Symbolic dims take their value
    from ``dims`` or 1.
    """
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    if isinstance(model, (str, os.PathLike)):
        model = _load_model_header(model)
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    dims = dict(dims or {})
    feed: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise OnnxSchedError(f"input {vi.name!r} is not a tensor; bench supports tensor inputs only")
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            else:
                shape.append(int(dims.get(d.dim_param, 1)))
        dtype = np.dtype(tensor_dtype_to_np_dtype(tt.elem_type))
        if dtype == np.bool_:
            arr = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, 2, size=shape).astype(dtype)
        elif np.issubdtype(dtype, np.floating):
            arr = rng.standard_normal(size=shape).astype(dtype)
        else:
            type_name = onnx.TensorProto.DataType.Name(tt.elem_type)
            raise OnnxSchedError(f"input {vi.name!r}: element type {type_name} not supported by bench")
        feed[vi.name] = arr
    return feed


def model_opt_level(model: Any) -> str | None:
    """The ORT level a model was produced with by :func:`ort_optimized_model`, else None."""
    for prop in model.metadata_props:
        if prop.key == ORT_OPTIMIZED_KEY:
            return prop.value
    return None


def ort_optimized_model(
    path_in: str | os.PathLike[str], path_out: str | os.PathLike[str], level: str = "basic"
) -> Path:
    """Save the graph ONNX Runtime will execute (after its rewrites at ``level``).

    Reordering that graph (instead of the file ORT would rewrite anyway) is how a
    schedule survives into ORT's execution; bench it with optimizations off.  The
    output is marked in ``metadata_props`` (:data:`ORT_OPTIMIZED_KEY`) so ``bench``
    knows.  ``level`` is ``basic`` (portable ONNX ops only) or ``extended``/``all``
    (may emit ``com.microsoft`` ops that only ORT runs).  The input is never modified.
    """
    import onnx
    import onnxruntime as ort

    levels = {
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    if level not in levels:
        raise ValueError(f"ort_optimized_model: level must be one of {sorted(levels)}, got {level!r}")
    src, dst = Path(path_in), Path(path_out)
    if not src.is_file():
        raise ModelLoadError(f"model file not found: {src}")
    if src.resolve() == dst.resolve():
        raise ValueError(f"ort_optimized_model: output {dst} would overwrite the input")
    with tempfile.TemporaryDirectory(prefix="onnx_sched_ortopt_") as tmp:
        tmp_path = Path(tmp) / "optimized.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = levels[level]
        so.optimized_model_filepath = str(tmp_path)
        so.log_severity_level = 3
        ort.InferenceSession(str(src), sess_options=so, providers=["CPUExecutionProvider"])
        model = onnx.load(str(tmp_path))
    if model.ir_version < 4:
        # IR < 4 requires every initializer to be a graph input; ORT's constant
        # folding adds initializers without listing them
        listed = {i.name for i in model.graph.input}
        for init in model.graph.initializer:
            if init.name not in listed:
                model.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    kept = [p for p in model.metadata_props if p.key != ORT_OPTIMIZED_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    model.metadata_props.add(key=ORT_OPTIMIZED_KEY, value=level)
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    onnx.save(model, str(part))
    os.replace(part, dst)
    return dst


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
) -> dict[str, Any]:
    """Run :mod:`onnx_sched.bench.ort_runner` in a fresh interpreter; return its JSON."""
    cmd = [
        sys.executable,
        "-m",
        "onnx_sched.bench.ort_runner",
        str(model_path),
        str(inputs_npz),
        "--repeats",
        str(repeats),
        "--warmup",
        str(warmup),
        "--arena" if arena else "--no-arena",
        "--opt-level",
        opt_level,
        "--threads",
        str(threads),
    ]
    if outputs_npz is not None:
        cmd += ["--outputs", str(outputs_npz)]
    if profile_dir is not None:
        cmd += ["--profile-dir", profile_dir]
    env = {**os.environ, **_MALLOC_ENV}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise OnnxSchedError(f"ORT run of {model_path} took longer than {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise OnnxSchedError(f"ORT run of {model_path} failed (exit {proc.returncode}): {tail}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise OnnxSchedError(f"ORT run of {model_path} printed no JSON report")
    return json.loads(lines[-1])


def compare_outputs(a_npz: str | os.PathLike[str], b_npz: str | os.PathLike[str], names: Sequence[str]) -> list[str]:
    """Names of outputs that differ in dtype, shape or any bit (NaN == NaN if same bits)."""
    bad: list[str] = []
    with np.load(a_npz) as a, np.load(b_npz) as b:
        if len(a.files) != len(b.files):
            return list(names) or ["<output count>"]
        for i, name in enumerate(names):
            x, y = a[f"o{i}"], b[f"o{i}"]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                bad.append(name)
    return bad


def _result(label: str, raw: Mapping[str, Any]) -> RunResult:
    return RunResult(
        label=label,
        model=str(raw["model"]),
        arena=bool(raw["arena"]),
        opt_level=str(raw["opt_level"]),
        peak_rss_delta=int(raw["peak_rss_delta"]),
        peak_rss_delta_sampled=int(raw["peak_rss_delta_sampled"]),
        peak_rss_delta_maxrss=int(raw["peak_rss_delta_maxrss"]),
        latency_median_s=float(raw["latency_median_s"]),
        latency_p90_s=float(raw["latency_p90_s"]),
        session_create_s=float(raw["session_create_s"]),
        raw=dict(raw),
    )


def bench_models(
    model_in: str | os.PathLike[str],
    model_out: str | os.PathLike[str] | None = None,
    *,
    repeats: int = 10,
    warmup: int = 2,
    ort_opt: bool = True,
    arenas: Sequence[bool] = (False, True),
    threads: int = 1,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    profile: bool = False,
    timeout_s: float = 600.0,
) -> BenchReport:
    """Bench ``model_in`` (and ``model_out``, a reordering of it) in fresh ORT processes.

    ``ort_opt=False`` runs both with ORT optimizations off.  Otherwise a model
    marked by :func:`ort_optimized_model` runs with them off and an unmarked
    model runs at the marked one's level (``all`` when neither is marked), so both
    execute the same graph.  Never modifies the model files.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"bench: repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    if not arenas:
        raise ValueError("bench: at least one arena setting is needed")
    models = {"in": str(model_in)}
    if model_out is not None:
        models["out"] = str(model_out)
    headers = {label: _load_model_header(p) for label, p in models.items()}
    marked = {label: model_opt_level(h) for label, h in headers.items()}
    base_level = next((lvl for lvl in marked.values() if lvl), "all")
    levels = {
        label: "none" if (not ort_opt or marked[label]) else base_level for label in models
    }
    feed = random_inputs(headers["in"], seed=seed, dims=dims)
    if "out" in headers:
        out_feed_names = set(random_inputs(headers["out"], seed=seed, dims=dims))
        if out_feed_names != set(feed):
            raise OnnxSchedError(
                f"bench: inputs differ between models: {sorted(set(feed) ^ out_feed_names)}"
            )
    runs: list[RunResult] = []
    mismatched: list[str] = []
    with tempfile.TemporaryDirectory(prefix="onnx_sched_bench_") as tmp:
        inputs_npz = Path(tmp) / "inputs.npz"
        np.savez(inputs_npz, **feed)
        out_files: dict[str, Path] = {}
        out_names: list[str] = []
        for arena in arenas:
            for label, path in models.items():
                outputs_npz = Path(tmp) / f"{label}_outputs.npz"
                raw = run_ort_subprocess(
                    path,
                    inputs_npz,
                    arena=arena,
                    opt_level=levels[label],
                    repeats=repeats,
                    warmup=warmup,
                    threads=threads,
                    outputs_npz=outputs_npz if label not in out_files else None,
                    profile_dir=tmp if profile else None,
                    timeout_s=timeout_s,
                )
                if label not in out_files:
                    out_files[label] = outputs_npz
                    if label == "in":
                        out_names = list(raw["outputs"])
                    elif list(raw["outputs"]) != out_names:
                        mismatched = [f"output names differ: {out_names} vs {raw['outputs']}"]
                if "ort_profile" in raw and levels[label] == "none":
                    file_order = [n.name for n in headers[label].graph.node]
                    if all(file_order):  # ORT names unnamed nodes itself
                        raw["executed_in_file_order"] = raw["ort_profile"]["executed_nodes"] == file_order
                runs.append(_result(label, raw))
        if "out" in out_files and not mismatched:
            mismatched = compare_outputs(out_files["in"], out_files["out"], out_names)
    return BenchReport(
        runs=tuple(runs),
        outputs_equal=(not mismatched) if model_out is not None else None,
        mismatched_outputs=tuple(mismatched),
        seed=seed,
        repeats=repeats,
        warmup=warmup,
        input_shapes={k: tuple(v.shape) for k, v in feed.items()},
    )
