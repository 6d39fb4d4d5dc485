"""Device profiles: per-op latency on a device plus a transfer model, measured or simulated.

A :class:`DeviceProfile` holds what one device costs:

* ``op_seconds``: measured seconds per op name of one model (OpenVINO
  ``PERF_COUNT`` / ``get_profiling_info()`` mapped back to the ONNX nodes through
  the runtime model's ``originalLayersNames``; or ONNX Runtime's profiling JSON);
* a fitted rate model (``flops_per_s`` for compute-bound op classes,
  ``bytes_per_s`` for memory-bound ones, ``op_overhead_s`` per op) that prices ops
  of *other* models, so one profile serves the whole corpus;
* ``class_speedup``/``extra_overhead_s`` when the profile is **simulated**: derived
  from a measured profile by documented scaling factors (:func:`derive_profile`)
  for a device this machine lacks.  ``simulated`` is then true and every result
  computed from it says so.

A :class:`ProfileSet` is several devices plus a :class:`TransferModel` per
ordered device pair (``latency_s + bytes / bandwidth_Bps``), calibrated by
timing real copies (:func:`measure_transfer`).  Files are JSON
(``format: onnx-sched-profiles/1``); a single-device file from ``onnx-sched
profile`` is a ProfileSet with one device.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import DeviceError, OnnxSchedError
from onnx_sched.graph import Graph

__all__ = [
    "COMPUTE_OPS",
    "FORMAT",
    "DeviceProfile",
    "ProfileSet",
    "TransferModel",
    "derive_profile",
    "fit_rates",
    "load_profiles",
    "measure_split_transfer",
    "measure_transfer",
    "op_class",
    "op_seconds_matrix",
    "scaled_to",
    "profile_model",
    "profile_openvino",
    "profile_ort",
    "save_profiles",
    "SIMULATED_PRESETS",
    "add_simulated",
]

FORMAT = "onnx-sched-profiles/1"
# Op classes for the rate model and for simulated speed-ups.
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Convolution", "GroupConvolution", "FusedMatMul",
                         "ConvolutionBackpropData", "Einsum"})
_REDUCE_OPS = frozenset({"Softmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
                         "GroupNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "GlobalAveragePool",
                         "AveragePool", "MaxPool", "MVN", "NormalizeL2"})
_SHAPE_OPS = frozenset({"Shape", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Gather", "Slice", "Concat",
                        "Transpose", "Expand", "Identity", "Cast", "Split", "Range", "ConstantOfShape", "Where",
                        "Equal", "ShapeOf", "StridedSlice"})


def op_class(op_type: str) -> str:
    """``compute`` (GEMM-like), ``reduce`` (normalization / pooling), ``data`` (shape and
    data movement) or ``elementwise``: the classes rates and speed-ups are given for."""
    if op_type in COMPUTE_OPS:
        return "compute"
    if op_type in _REDUCE_OPS or op_type.startswith("Reduce"):
        return "reduce"
    if op_type in _SHAPE_OPS:
        return "data"
    return "elementwise"


CLASSES = ("compute", "reduce", "data", "elementwise")


@dataclass(frozen=True)
class TransferModel:
    """Time to move ``n`` bytes between two devices: ``latency_s + n / bandwidth_Bps``."""

    latency_s: float
    bandwidth_Bps: float

    def seconds(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        return self.latency_s + np.asarray(nbytes, dtype=np.float64) / self.bandwidth_Bps

    def __post_init__(self) -> None:
        if self.latency_s < 0 or not self.bandwidth_Bps > 0:
            raise ValueError(f"transfer model needs latency >= 0 and bandwidth > 0, got {self}")


@dataclass(frozen=True)
class DeviceProfile:
    """What one device costs (see module docstring).  Times are seconds."""

    name: str
    kind: str = "cpu"
    full_name: str = ""
    backend: str = ""
    simulated: bool = False
    model: str = ""
    op_seconds: Mapping[str, float] = field(default_factory=dict)
    flops_per_s: Mapping[str, float] = field(default_factory=dict)  # per op class
    bytes_per_s: float = 10e9
    op_overhead_s: float = 2e-6
    class_speedup: Mapping[str, float] = field(default_factory=dict)  # simulated: base time / speedup
    extra_overhead_s: float = 0.0  # simulated: per-op launch cost added
    total_seconds: float | None = None  # measured end-to-end latency of ``model``
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["op_seconds"] = dict(self.op_seconds)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> DeviceProfile:
        known = {f for f in DeviceProfile.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"device profile {d.get('name')!r}: unknown fields {sorted(unknown)}")
        if "name" not in d:
            raise ValueError("device profile without a 'name'")
        return DeviceProfile(**{k: v for k, v in d.items()})


@dataclass(frozen=True)
class ProfileSet:
    """Devices (index = device id in placements) plus transfer models between them.

    ``transfers[(src, dst)]`` for device names; a missing pair falls back to
    ``default_transfer``.  ``host`` is the device that holds graph inputs and
    receives graph outputs (the CPU).
    """

    devices: tuple[DeviceProfile, ...]
    transfers: Mapping[tuple[str, str], TransferModel] = field(default_factory=dict)
    default_transfer: TransferModel = TransferModel(10e-6, 10e9)
    host: str = ""

    def __post_init__(self) -> None:
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names):
            raise ValueError(f"profile set: duplicate device names {names}")
        if not self.host and names:
            cpu = [d.name for d in self.devices if d.kind == "cpu"]
            object.__setattr__(self, "host", cpu[0] if cpu else names[0])
        if self.host and self.host not in names:
            raise ValueError(f"profile set: host {self.host!r} is not one of {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    @property
    def simulated(self) -> bool:
        return any(d.simulated for d in self.devices)

    def transfer(self, src: str, dst: str) -> TransferModel:
        if src == dst:
            return TransferModel(0.0, float("inf"))
        return self.transfers.get((src, dst), self.default_transfer)

    def subset(self, names: Sequence[str]) -> ProfileSet:
        """The same profiles restricted to ``names`` (in that order)."""
        by = {d.name: d for d in self.devices}
        missing = [n for n in names if n not in by]
        if missing:
            raise DeviceError(f"no profile for device(s) {missing}; profiles have {list(by)}")
        host = self.host if self.host in names else ""
        return ProfileSet(tuple(by[n] for n in names), self.transfers, self.default_transfer, host)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "host": self.host,
            "simulated": self.simulated,
            "devices": [d.to_dict() for d in self.devices],
            "transfers": [
                {"src": s, "dst": t, "latency_s": m.latency_s, "bandwidth_Bps": m.bandwidth_Bps}
                for (s, t), m in self.transfers.items()
            ],
            "default_transfer": asdict(self.default_transfer),
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> ProfileSet:
        if d.get("format") != FORMAT:
            raise ValueError(f"not an onnx-sched profile file (format {d.get('format')!r}, expected {FORMAT!r})")
        devices = tuple(DeviceProfile.from_dict(x) for x in d.get("devices", []))
        if not devices:
            raise ValueError("profile file lists no devices")
        transfers = {(t["src"], t["dst"]): TransferModel(float(t["latency_s"]), float(t["bandwidth_Bps"]))
                     for t in d.get("transfers", [])}
        dt = d.get("default_transfer") or {"latency_s": 10e-6, "bandwidth_Bps": 10e9}
        return ProfileSet(devices, transfers, TransferModel(float(dt["latency_s"]), float(dt["bandwidth_Bps"])),
                          d.get("host", ""))

    def merged(self, other: ProfileSet) -> ProfileSet:
        """Devices of both sets (``other`` wins on name clashes), transfers of both."""
        by = {d.name: d for d in self.devices}
        by.update({d.name: d for d in other.devices})
        return ProfileSet(tuple(by.values()), {**self.transfers, **other.transfers}, self.default_transfer,
                          self.host or other.host)


def load_profiles(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> ProfileSet:
    """Read one or more profile files into one :class:`ProfileSet` (later files win)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: ProfileSet | None = None
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise OnnxSchedError(f"{path}: profile file not found")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise OnnxSchedError(f"{path}: not JSON ({exc})") from None
        try:
            ps = ProfileSet.from_dict(data)
        except (ValueError, TypeError, KeyError) as exc:
            raise OnnxSchedError(f"{path}: {exc}") from None
        out = ps if out is None else out.merged(ps)
    if out is None:
        raise OnnxSchedError("no profile file given")
    return out


def save_profiles(ps: ProfileSet, path: str | os.PathLike) -> None:
    from onnx_sched.cli._common import write_json_atomic

    write_json_atomic(ps.to_dict(), path)


# ------------------------------------------------------------------ cost per op
def fit_rates(graph: Graph, op_seconds: Mapping[str, float]) -> dict[str, Any]:
    """Rates that explain measured op times: per-class FLOP/s (median of ops with
    measurable work), memory bytes/s, and the per-op overhead (10th percentile).

    Returns keyword arguments for :class:`DeviceProfile`.
    """
    idx = {n: i for i, n in enumerate(graph.op_names)}
    times = {idx[n]: float(t) for n, t in op_seconds.items() if n in idx and t > 0}
    if not times:
        return {}
    ts = np.array(list(times.values()))
    overhead = float(np.percentile(ts, 10))
    rates: dict[str, float] = {}
    for cls in CLASSES:
        vals = [graph.op_flops[i] / max(t - overhead, 1e-9) for i, t in times.items()
                if op_class(graph.op_types[i]) == cls and graph.op_flops[i] > 0]
        if vals:
            rates[cls] = float(np.median(vals))
    bw = [graph.op_bytes[i] / max(t - overhead, 1e-9) for i, t in times.items()
          if op_class(graph.op_types[i]) != "compute" and graph.op_bytes[i] > 0]
    out: dict[str, Any] = {"flops_per_s": rates, "op_overhead_s": overhead}
    if bw:
        out["bytes_per_s"] = float(np.median(bw))
    return out


def _rate_seconds(graph: Graph, prof: DeviceProfile) -> np.ndarray:
    """Rate-model seconds per op (no speed-ups applied)."""
    n = graph.n_ops
    out = np.empty(n)
    default_flops = prof.flops_per_s.get("compute", 50e9)
    for i in range(n):
        cls = op_class(graph.op_types[i])
        rate = prof.flops_per_s.get(cls, default_flops if cls == "compute" else 5e9)
        out[i] = prof.op_overhead_s + max(graph.op_flops[i] / rate, graph.op_bytes[i] / prof.bytes_per_s)
    return out


def op_seconds_vector(graph: Graph, prof: DeviceProfile) -> np.ndarray:
    """Seconds per op of ``graph`` on ``prof``'s device.

    Ops named in ``prof.op_seconds`` use the measurement when the profile was
    measured on this model (``prof.model`` equals ``graph.name``, or is empty);
    others use the fitted rate model.  Simulated speed-ups and extra overhead are
    applied last.
    """
    out = _rate_seconds(graph, prof)
    if prof.op_seconds and (not prof.model or prof.model == graph.name):
        for i, name in enumerate(graph.op_names):
            t = prof.op_seconds.get(name)
            if t is not None:
                out[i] = float(t)
    if prof.class_speedup or prof.extra_overhead_s:
        for i in range(graph.n_ops):
            s = float(prof.class_speedup.get(op_class(graph.op_types[i]), 1.0))
            out[i] = out[i] / s + prof.extra_overhead_s
    return out


def op_seconds_matrix(graph: Graph, profiles: ProfileSet) -> np.ndarray:
    """``(n_ops, n_devices)`` seconds of every op on every device."""
    if not profiles.devices:
        return np.zeros((graph.n_ops, 0))
    return np.stack([op_seconds_vector(graph, p) for p in profiles.devices], axis=1)


def derive_profile(base: DeviceProfile, name: str, kind: str, class_speedup: Mapping[str, float],
                   extra_overhead_s: float, full_name: str = "", notes: str = "") -> DeviceProfile:
    """A *simulated* device: ``base`` times divided by a per-class speed-up plus a
    per-op launch overhead.  The factors are data in the result (and in the file)."""
    for cls, s in class_speedup.items():
        if cls not in CLASSES or not s > 0:
            raise ValueError(f"derive_profile: speed-up for class {cls!r} must be > 0 and class one of {CLASSES}")
    return replace(base, name=name, kind=kind, full_name=full_name or f"simulated {kind} from {base.name}",
                   simulated=True, class_speedup=dict(class_speedup), extra_overhead_s=float(extra_overhead_s),
                   total_seconds=None, notes=notes)


# Documented scaling factors for simulated Intel GPUs, relative to a measured CPU
# profile (orders of magnitude from public specs: an Iris Xe class iGPU has ~2x
# the GEMM throughput of a client CPU and shares its memory; an Arc A770 class
# dGPU ~6x, behind PCIe 4.0 x16).  Every op also pays a kernel-launch overhead.
SIMULATED_PRESETS: dict[str, dict[str, Any]] = {
    "igpu": {
        "name": "GPU.0", "full_name": "simulated Intel iGPU (Iris Xe class)",
        "class_speedup": {"compute": 2.0, "reduce": 1.5, "elementwise": 1.2, "data": 0.8},
        "extra_overhead_s": 15e-6,
        "transfer": TransferModel(20e-6, 20e9),  # shared memory: map/unmap cost, no PCIe
    },
    "dgpu": {
        "name": "GPU.1", "full_name": "simulated Intel dGPU (Arc A770 class)",
        "class_speedup": {"compute": 6.0, "reduce": 3.0, "elementwise": 3.0, "data": 1.0},
        "extra_overhead_s": 25e-6,
        "transfer": TransferModel(30e-6, 12e9),  # PCIe 4.0 x16, effective
    },
}


def add_simulated(ps: ProfileSet, kinds: Sequence[str], base: str | None = None) -> ProfileSet:
    """``ps`` plus simulated devices (``igpu``/``dgpu`` presets) derived from its host
    (or ``base``) profile, with host<->device transfers from the presets and
    GPU<->GPU transfers through the host (sum of both legs)."""
    by = {d.name: d for d in ps.devices}
    src = by.get(base or ps.host)
    if src is None:
        raise ValueError(f"add_simulated: no base profile {base or ps.host!r}")
    devices = list(ps.devices)
    transfers = dict(ps.transfers)
    added: list[tuple[str, TransferModel]] = []
    for kind in kinds:
        preset = SIMULATED_PRESETS.get(kind)
        if preset is None:
            raise ValueError(f"unknown simulated device kind {kind!r}; choose from {sorted(SIMULATED_PRESETS)}")
        dev = derive_profile(src, preset["name"], kind, preset["class_speedup"], preset["extra_overhead_s"],
                             preset["full_name"], notes=f"simulated from {src.name} by SIMULATED_PRESETS[{kind!r}]")
        devices.append(dev)
        tm = preset["transfer"]
        transfers[(src.name, dev.name)] = tm
        transfers[(dev.name, src.name)] = tm
        for other, otm in added:
            via = TransferModel(tm.latency_s + otm.latency_s, 1.0 / (1.0 / tm.bandwidth_Bps + 1.0 / otm.bandwidth_Bps))
            transfers[(dev.name, other)] = via
            transfers[(other, dev.name)] = via
        added.append((dev.name, tm))
    return ProfileSet(tuple(devices), transfers, ps.default_transfer, ps.host)


# --------------------------------------------------------------- measurement
def _median_times(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = set().union(*samples) if samples else set()
    return {k: float(np.median([s.get(k, 0.0) for s in samples])) for k in keys}


def profile_openvino(imported: Any, device: str = "CPU", repeats: int = 10, warmup: int = 2,
                     config: Mapping[str, Any] | None = None, seed: int = 0) -> DeviceProfile:
    """Per-op latency of an imported ONNX model on an OpenVINO device.

    ``PERF_COUNT`` profiling info gives real time per executed runtime layer; each
    layer's ``originalLayersNames`` lists the ``ov.Model`` ops it fused, which map to
    ONNX nodes (:func:`onnx_sched.exporters.openvino.map_ov_to_graph_ops`).  A
    layer's time is split evenly over the graph ops it covers; ops fused away or
    constant-folded get 0.  Median over ``repeats`` inferences.
    """
    from onnx_sched.bench.split_executor import random_feed
    from onnx_sched.devices import openvino_core
    from onnx_sched.exporters.openvino import map_ov_to_graph_ops, read_onnx_into_openvino

    core = openvino_core()
    if device not in core.available_devices:
        raise DeviceError(f"OpenVINO device {device!r} not available; this machine has {core.available_devices}")
    graph = imported.graph
    ov_model = read_onnx_into_openvino(imported.model)
    ov_to_op = map_ov_to_graph_ops(ov_model, imported)
    cfg = {"PERF_COUNT": True, **dict(config or {})}
    compiled = core.compile_model(ov_model, device, cfg)
    runtime = compiled.get_runtime_model()
    layer_ops: dict[str, list[int]] = {}
    for op in runtime.get_ordered_ops():
        info = op.get_rt_info()
        names = str(info["originalLayersNames"].astype(str)) if "originalLayersNames" in info else ""
        ops = sorted({ov_to_op[n] for n in names.split(",") if n and ov_to_op.get(n, -1) >= 0})
        layer_ops[op.get_friendly_name()] = ops
    feed = random_feed(imported.model, seed)
    req = compiled.create_infer_request()
    from onnx_sched.bench.placement import ov_inputs

    inputs = ov_inputs(compiled, feed)
    for _ in range(warmup):
        req.infer(inputs)
    samples, totals = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        req.infer(inputs)
        totals.append(time.perf_counter() - t0)
        per: dict[str, float] = {}
        for info in req.get_profiling_info():
            ops = layer_ops.get(info.node_name, [])
            secs = info.real_time.total_seconds()
            if not ops or secs <= 0:
                continue
            share = secs / len(ops)
            for o in ops:
                per[graph.op_names[o]] = per.get(graph.op_names[o], 0.0) + share
        samples.append(per)
    op_secs = _median_times(samples)
    for name in graph.op_names:
        op_secs.setdefault(name, 0.0)
    full = str(core.get_property(device, "FULL_DEVICE_NAME"))
    from onnx_sched.devices import device_kind

    base = DeviceProfile(name=device, kind=device_kind(device, full), full_name=full, backend="openvino",
                         model=graph.name, op_seconds=op_secs, total_seconds=float(np.median(totals)),
                         notes=f"OpenVINO PERF_COUNT, median of {repeats} runs, config {dict(config or {})}")
    return replace(base, **fit_rates(graph, op_secs))


def profile_ort(imported: Any, provider: str = "CPUExecutionProvider", threads: int = 1, repeats: int = 10,
                warmup: int = 2, seed: int = 0) -> DeviceProfile:
    """Per-op latency from ONNX Runtime's profiling JSON (``Node`` events named
    ``<node>_kernel_time``), median over ``repeats`` runs; graph optimizations off so
    every event is one ONNX node."""
    import tempfile

    import onnxruntime as ort

    from onnx_sched.bench.split_executor import random_feed

    if provider not in ort.get_available_providers():
        raise DeviceError(f"ONNX Runtime provider {provider!r} not available; have {ort.get_available_providers()}")
    graph = imported.graph
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "prof")
        sess = ort.InferenceSession(imported.model.SerializeToString(), so, providers=[provider])
        feed = random_feed(imported.model, seed)
        totals = []
        for i in range(warmup + repeats):
            t0 = time.perf_counter()
            sess.run(None, feed)
            if i >= warmup:
                totals.append(time.perf_counter() - t0)
        path = sess.end_profiling()
        events = json.loads(Path(path).read_text())
    runs: list[dict[str, float]] = []
    current: dict[str, float] = {}
    run_index = -1
    for ev in events:
        if ev.get("cat") == "Session" and ev.get("name") == "model_run":
            continue
        if ev.get("cat") != "Node" or not str(ev.get("name", "")).endswith("_kernel_time"):
            continue
        node = ev["name"][: -len("_kernel_time")]
        if node in current:  # a new run starts when a node repeats
            runs.append(current)
            current = {}
            run_index += 1
        current[node] = float(ev.get("dur", 0)) * 1e-6
    if current:
        runs.append(current)
    runs = runs[warmup:] if len(runs) > warmup else runs
    op_secs = _median_times(runs)
    op_secs = {n: op_secs.get(n, 0.0) for n in graph.op_names}
    base = DeviceProfile(name=provider, kind="cpu" if "CPU" in provider else "dgpu", full_name=f"ONNX Runtime {provider}",
                         backend="onnxruntime", model=graph.name, op_seconds=op_secs,
                         total_seconds=float(np.median(totals)),
                         notes=f"ORT profiling, {threads} thread(s), optimizations off, median of {repeats} runs")
    return replace(base, **fit_rates(graph, op_secs))


def scaled_to(profile: DeviceProfile, seconds: float, note: str = "") -> DeviceProfile:
    """``profile`` with its per-op times scaled so they sum to ``seconds``: e.g. a profile taken
    with graph optimizations off (one event per ONNX node) calibrated to the measured latency of
    the optimized model, so a planner weighs op times against transfer costs at the right scale."""
    total = float(sum(profile.op_seconds.values()))
    if total <= 0 or seconds <= 0:
        raise ValueError(f"scaled_to: need positive times, profile sums to {total}, target {seconds}")
    k = seconds / total
    return replace(profile, op_seconds={n: t * k for n, t in profile.op_seconds.items()},
                   flops_per_s={c: r / k for c, r in profile.flops_per_s.items()}, op_overhead_s=profile.op_overhead_s * k,
                   total_seconds=seconds, notes=(profile.notes + f"; scaled x{k:.3f} to {seconds * 1e3:.3f} ms {note}").strip())


def measure_transfer(sizes: Sequence[int] = (1 << 12, 1 << 16, 1 << 20, 1 << 22, 1 << 24), repeats: int = 7,
                     backend: str = "openvino") -> TransferModel:
    """Calibrate ``latency + bytes / bandwidth`` by timing real copies of each size
    (least squares on the median time per size).

    ``openvino``: ``ov.Tensor.copy_to`` between two host tensors (what HETERO does
    between CPU sub-models); ``onnxruntime``: ``OrtValue.ortvalue_from_numpy`` (what
    the split executor does when it hands a tensor to the next session).
    """
    xs, ys = [], []
    for size in sizes:
        n = max(1, int(size) // 4)
        src = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        if backend == "openvino":
            import openvino as ov

            a, b = ov.Tensor(src), ov.Tensor(np.empty_like(src))
            fn = lambda: a.copy_to(b)  # noqa: E731
        elif backend == "onnxruntime":
            import onnxruntime as ort

            fn = lambda: ort.OrtValue.ortvalue_from_numpy(src.copy())  # noqa: E731
        else:
            dst = np.empty_like(src)
            fn = lambda: np.copyto(dst, src)  # noqa: E731
        fn()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        xs.append(n * 4)
        ys.append(float(np.median(ts)))
    x, y = np.asarray(xs, float), np.asarray(ys)
    A = np.stack([np.ones(len(x)), x], axis=1)
    (lat, inv_bw), *_ = np.linalg.lstsq(A, y, rcond=None)
    if lat < 0:  # a negative intercept is noise: refit through the origin
        lat, inv_bw = 0.0, float(x @ y / (x @ x))
    inv_bw = max(float(inv_bw), 1e-13)
    return TransferModel(float(lat), 1.0 / inv_bw)


def measure_split_transfer(sizes: Sequence[int] = (1 << 12, 1 << 18, 1 << 22), repeats: int = 30,
                           cores: Sequence[int] = (0, 1)) -> TransferModel:
    """Calibrate the cost of one device boundary in the ORT split executor.

    For each size, ``Relu(Relu(x))`` runs as one single-thread session and split
    into two parts on two devices (worker threads pinned to ``cores``); the median
    difference is what crossing a boundary costs (session call, thread hand-off,
    tensor hand-over).  Least squares gives ``latency + bytes / bandwidth``.
    """
    import onnx
    from onnx import TensorProto, helper

    from onnx_sched.bench.split_executor import DeviceSpec, SplitExecutor, split_model
    from onnx_sched.importers.onnx import import_onnx

    xs, ys = [], []
    for size in sizes:
        n = max(1, int(size) // 4)
        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Relu", ["y"], ["z"], name="b")],
            "boundary", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [n])],
            value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.checker.check_model(model)
        imp = import_onnx(model)
        feed = {"x": np.random.default_rng(0).standard_normal(n).astype(np.float32)}
        devs = [DeviceSpec("d0", cores=(cores[0],)), DeviceSpec("d1", cores=(cores[-1],))]
        times = {}
        for label, placement in (("one", [0, 0]), ("two", [0, 1])):
            with SplitExecutor(split_model(imp, np.array(placement)), devs, ["z"]) as ex:
                for _ in range(3):
                    ex.run(feed)
                ts = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    ex.run(feed)
                    ts.append(time.perf_counter() - t0)
            times[label] = float(np.median(ts))
        xs.append(n * 4)
        ys.append(max(times["two"] - times["one"], 0.0))
    x, y = np.asarray(xs, float), np.asarray(ys)
    A = np.stack([np.ones(len(x)), x], axis=1)
    (lat, inv_bw), *_ = np.linalg.lstsq(A, y, rcond=None)
    lat = max(float(lat), float(y.min()), 0.0)
    inv_bw = max(float(inv_bw), 1e-12)
    return TransferModel(lat, 1.0 / inv_bw)


def profile_model(imported: Any, device: str, runtime: str = "openvino", repeats: int = 10, threads: int = 1,
                  transfer: bool = True) -> ProfileSet:
    """Profile one device and (optionally) calibrate its host transfer; a one-device set."""
    if runtime == "openvino":
        prof = profile_openvino(imported, device, repeats=repeats)
    elif runtime in ("ort", "onnxruntime"):
        prof = profile_ort(imported, device, threads=threads, repeats=repeats)
    else:
        raise ValueError(f"runtime must be openvino or ort, got {runtime!r}")
    if not transfer:
        return ProfileSet((prof,))
    tm = measure_transfer(backend="openvino" if runtime == "openvino" else "onnxruntime")
    return ProfileSet((prof,), {}, tm)
