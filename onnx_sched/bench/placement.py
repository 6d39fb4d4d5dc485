"""Run a placed model for real and measure it: OpenVINO HETERO or the ORT split executor.

Both paths run warm-ups then ``repeats`` timed inferences and report median and
p90 latency, busy time per device, the number of sub-models, and whether the
outputs equal single-device execution of the same runtime (``rtol = atol =
1e-5``, NaN equal to NaN: corpus weights are zeros, some outputs are NaN).

* ``openvino``: the placement goes through the OpenVINO exporter (model-level
  rt_info) and the :class:`~onnx_sched.plugins.openvino_affinity.ApplyAffinity`
  pass, then ``compile_model("HETERO:<devices>")``.  Precision is pinned to f32
  on every device (the CPU plugin would otherwise pick bf16 on AMX hardware and
  outputs could not be compared).  On a CPU-only machine the second device is
  the CPU plugin registered again as ``CPUB`` (:mod:`onnx_sched.devices`).
* ``ort``: :class:`~onnx_sched.bench.split_executor.SplitExecutor`, one session
  per part, one worker thread per device (concurrent unless ``concurrent=False``).

Placement files (``onnx-sched-placement/1`` JSON) name the device of every op by
op name; :func:`save_placement` / :func:`load_placement` read and write them, and
:func:`load_placement` also reads an ONNX model exported with per-node
``pkg.onnx_sched.device`` metadata.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import DeviceError, OnnxSchedError

__all__ = [
    "PLACEMENT_FORMAT",
    "bench_openvino",
    "bench_ort",
    "bench_ort_interleaved",
    "compare_outputs",
    "load_placement",
    "outputs_informative",
    "with_filled_weights",
    "with_random_weights",
    "save_placement",
    "summarize",
    "time_calls",
]

PLACEMENT_FORMAT = "onnx-sched-placement/1"
RTOL = ATOL = 1e-5


def save_placement(path: str | os.PathLike, graph: Any, placement: np.ndarray, device_names: Sequence[str],
                   **extra: Any) -> None:
    """Write a placement file: ``{"format", "model", "devices", "placement": {op: device}, ...extra}``."""
    from onnx_sched.cli._common import write_json_atomic

    p = np.asarray(placement, np.int64)
    data = {"format": PLACEMENT_FORMAT, "model": graph.name, "devices": list(device_names),
            "placement": {graph.op_names[i]: device_names[int(p[i])] for i in range(graph.n_ops)}, **extra}
    write_json_atomic(data, path)


def load_placement(path: str | os.PathLike, graph: Any) -> tuple[np.ndarray, list[str], dict[str, Any]]:
    """``(device index per op, device names, file metadata)`` from a placement JSON or an
    ONNX model with ``pkg.onnx_sched.device`` node metadata."""
    p = Path(path)
    if not p.is_file():
        raise OnnxSchedError(f"{p}: placement file not found")
    if p.suffix == ".onnx":
        import onnx

        from onnx_sched.exporters.onnx import DEVICE_KEY

        m = onnx.load(str(p), load_external_data=False)
        by_node = {n.name: {q.key: q.value for q in n.metadata_props}.get(DEVICE_KEY) for n in m.graph.node}
        mapping = {name: by_node.get(name) for name in graph.op_names}
        meta: dict[str, Any] = {"source": "onnx-metadata"}
        devices = list(dict.fromkeys(v for v in mapping.values() if v is not None))
    else:
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise OnnxSchedError(f"{p}: not JSON ({exc})") from None
        if data.get("format") != PLACEMENT_FORMAT:
            raise OnnxSchedError(f"{p}: not a placement file (format {data.get('format')!r}, expected {PLACEMENT_FORMAT!r})")
        mapping = data["placement"]
        devices = list(data["devices"])
        meta = {k: v for k, v in data.items() if k not in ("placement",)}
    missing = [n for n in graph.op_names if mapping.get(n) is None]
    if missing:
        raise OnnxSchedError(f"{p}: no device for {len(missing)} ops of {graph.name} (first: {missing[0]!r})")
    unknown = sorted({v for v in mapping.values() if v not in devices})
    if unknown:
        raise OnnxSchedError(f"{p}: devices {unknown} are not in the file's device list {devices}")
    placement = np.array([devices.index(mapping[n]) for n in graph.op_names], np.int64)
    return placement, devices, meta


def with_filled_weights(imported: Any, value: float = 0.01) -> Any:
    """A copy of ``imported`` whose stripped float weights (the corpus's
    ``ConstantOfShape`` weight nodes, see corpus README) are filled with ``value``
    instead of 0, so outputs are non-trivial and equality checks mean something.
    The graph (ops, tensors, sizes) is unchanged."""
    from dataclasses import replace

    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(imported.model)
    changed = 0
    for idx in imported.weight_nodes:
        node = model.graph.node[idx]
        if node.op_type != "ConstantOfShape":
            continue
        for attr in node.attribute:
            if attr.name == "value":
                arr = numpy_helper.to_array(attr.t)
                if arr.dtype.kind == "f" and arr.size == 1 and float(arr.ravel()[0]) == 0.0:
                    attr.t.CopyFrom(numpy_helper.from_array(np.full(arr.shape, value, arr.dtype), attr.t.name))
                    changed += 1
    return replace(imported, model=model) if changed else imported


# How with_random_weights reads a stripped weight's role: (consumer op, input index).
_MATRIX = {("MatMul", 1), ("Gemm", 1), ("Conv", 1), ("ConvTranspose", 1)}
_SCALE = {("Mul", 0), ("Mul", 1), ("LayerNormalization", 1), ("BatchNormalization", 1), ("BatchNormalization", 4),
          ("InstanceNormalization", 1), ("GroupNormalization", 1), ("SimplifiedLayerNormalization", 1),
          ("RMSNormalization", 1)}
_SHIFT = {("Add", 0), ("Add", 1), ("Sub", 0), ("Sub", 1), ("Conv", 2), ("ConvTranspose", 2), ("Gemm", 2),
          ("LayerNormalization", 2), ("BatchNormalization", 2), ("BatchNormalization", 3),
          ("InstanceNormalization", 2), ("GroupNormalization", 2)}
_INIT_STD = 0.02  # transformers' ``initializer_range`` (BERT, GPT-2, MobileBERT ...)


def _fan_in(uses: Sequence[tuple[Any, int]], shape: tuple[int, ...]) -> tuple[str, int] | None:
    """``(op_type, fan_in)`` of the first consumer reading the weight as its matrix
    operand, fan_in = inputs summed per output element: MatMul ``B [.., K, N]`` -> K;
    Gemm ``B`` -> ``B.shape[1 if transB else 0]``; Conv ``W [M, C/g, k..]`` and
    ConvTranspose ``W [C, M/g, k..]`` -> ``C/g * prod(k)``."""
    for node, k in uses:
        if (node.op_type, k) not in _MATRIX or len(shape) < 2:
            continue
        attrs = {a.name: a.i for a in node.attribute if a.type == a.INT}
        if node.op_type == "MatMul":
            return "MatMul", shape[-2]
        if node.op_type == "Gemm":
            return "Gemm", shape[1] if attrs.get("transB", 0) else shape[0]
        if node.op_type == "Conv":
            return "Conv", int(np.prod(shape[1:]))
        return node.op_type, max(1, shape[0] // max(1, attrs.get("group", 1))) * int(np.prod(shape[2:]))
    return None


def _random_weight(rng: np.random.Generator, shape: tuple[int, ...], uses: Sequence[tuple[Any, int]]) -> np.ndarray:
    """Seeded float32 values for one stripped weight read by ``uses`` ``(node, input index)``;
    the rules are listed in :func:`with_random_weights`."""
    z = rng.standard_normal(shape, dtype=np.float32)
    roles = {(n.op_type, k) for n, k in uses}
    matrix = _fan_in(uses, shape)
    if matrix is not None:
        op, fan_in = matrix
        std = 1.0 / np.sqrt(max(1, fan_in))
        return z * np.float32(min(std, _INIT_STD) if op in ("MatMul", "Gemm") else std)
    if roles and roles <= _SCALE:
        return np.abs(1.0 + _INIT_STD * z)
    if roles and roles <= _SHIFT | _SCALE:
        return _INIT_STD * z
    if len(shape) >= 2:
        return z / np.float32(np.sqrt(max(1, int(np.prod(shape[1:])))))
    return 1.0 + 0.1 * z


def with_random_weights(imported: Any, seed: int = 0) -> Any:
    """A copy of ``imported`` whose stripped float weights get seeded random values:
    each weight-producing ``ConstantOfShape`` node becomes ``Identity`` of a new
    initializer (node count and graph unchanged).  Unlike a constant fill, channels
    differ, so normalizations are well conditioned and output equality is a real
    check (a constant fill makes LayerNorm divide rounding noise by ~sqrt(eps)).

    Values follow the weight's role, read from the ops that consume it, and are
    drawn the way networks are initialised, so activations stay O(1): when they
    reach 1e15, fp32 rounding of differently fused kernels alone exceeds the 1e-5
    equality tolerance and the check proves nothing.

    * MatMul / Gemm matrix operand: ``N(0, s^2)``, ``s = min(1/sqrt(fan_in), 0.02)``,
      LeCun capped at the transformers ``initializer_range`` 0.02 (how BERT, GPT-2
      and the corpus's other transformers models were initialised).  The cap
      matters in un-normalized residual stacks (MobileBERT's NoNorm layers), where
      a variance-preserving branch doubles the residual variance at each of 100+
      residual adds: LeCun alone gives outputs of 1e13, the cap O(1);
    * Conv / ConvTranspose kernel: ``N(0, 1/fan_in)`` (LeCun); fan_in = inputs
      summed per output (MatMul ``B [K, N]``: K; Conv ``W [M, C/g, k..]``: C/g * prod(k));
    * scales (Mul operand, norm scale, BatchNorm variance): ``|1 + 0.02 N(0, 1)|``;
    * biases and shifts (Add/Sub operand, Conv/Gemm/norm bias, BatchNorm mean):
      ``0.02 N(0, 1)``.  Near the usual ones / zeros, yet every channel differs,
      so a mis-wired scale or bias changes the outputs;
    * other uses (Gather tables, Concat operands ...): ``N(0, 1/prod(shape[1:]))``,
      vectors ``1 + 0.1 N(0, 1)``.

    Deterministic for a given ``seed`` (weights drawn in node order).
    """
    from dataclasses import replace

    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    model = onnx.ModelProto()
    model.CopyFrom(imported.model)
    inits = {t.name: t for t in model.graph.initializer}
    uses: dict[str, list[tuple[Any, int]]] = {}
    for n in model.graph.node:
        for k, name in enumerate(n.input):
            uses.setdefault(name, []).append((n, k))
    changed = 0
    for idx in imported.weight_nodes:
        node = model.graph.node[idx]
        if node.op_type != "ConstantOfShape" or not node.input or node.input[0] not in inits:
            continue
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        dtype = numpy_helper.to_array(value).dtype if value is not None else np.dtype(np.float32)
        if dtype.kind != "f":
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]).ravel())
        data = _random_weight(rng, shape, uses.get(node.output[0], []))
        name = f"{node.output[0]}__onnx_sched_random"
        model.graph.initializer.append(numpy_helper.from_array(data.astype(dtype), name))
        new = helper.make_node("Identity", [name], list(node.output), name=node.name)
        node.CopyFrom(new)
        changed += 1
    if not changed:
        return imported
    from onnx_sched.importers.onnx import _subgraph_reads

    read = {x for n in model.graph.node for x in list(n.input) + _subgraph_reads(n)} | {o.name for o in model.graph.output}
    keep = [t for t in model.graph.initializer if t.name in read]  # drop the now unused W__SHAPE vectors
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    kept = {t.name for t in keep}
    inputs = [i for i in model.graph.input if i.name in kept or i.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    model.ir_version = max(int(model.ir_version), 4)  # new initializers are not graph inputs
    return replace(imported, model=model)


def outputs_informative(ref: Mapping[str, np.ndarray]) -> bool:
    """Whether some float output holds a finite non-zero value (the corpus's zero
    weights make many outputs all-zero or NaN, where equality proves little)."""
    for a in ref.values():
        a = np.asarray(a)
        if a.dtype.kind in "fc" and np.any(np.isfinite(a) & (a != 0)):
            return True
    return False


def compare_outputs(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> tuple[bool, float]:
    """All outputs equal within ``rtol = atol = 1e-5`` (NaN == NaN); also the max abs error."""
    ok, worst = True, 0.0
    for name, a in ref.items():
        b = np.asarray(got[name])
        a = np.asarray(a)
        if a.shape != b.shape:
            return False, float("inf")
        if a.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                ok = False
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.size else 0.0)
        elif not np.array_equal(a, b):
            ok = False
            worst = float("inf")
    return ok, worst


def summarize(times: Sequence[float]) -> dict[str, float]:
    t = np.asarray(times, np.float64)
    return {"median_s": float(np.median(t)), "p90_s": float(np.percentile(t, 90)), "min_s": float(t.min()),
            "runs": int(len(t))}


def time_calls(fn: Any, warmup: int, repeats: int) -> tuple[list[float], Any]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones, and the last result."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


# ----------------------------------------------------------------- ONNX Runtime
def bench_ort(imported: Any, placement: np.ndarray, devices: Sequence[Any], *, warmup: int = 2, repeats: int = 10,
              concurrent: bool = True, seed: int = 0, opt_level: str = "all",
              reference: bool = True) -> dict[str, Any]:
    """Split-executor run of ``placement`` on ORT ``devices`` (:class:`DeviceSpec` list);
    the reference is the whole model in one session on ``devices[0]``."""
    import onnxruntime as ort

    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.split_executor import SplitExecutor, random_feed, split_model

    feed = random_feed(imported.model, seed)
    outputs = [o.name for o in imported.model.graph.output]
    parts = split_model(imported, placement)
    report: dict[str, Any] = {"runtime": "ort", "devices": [d.name for d in devices], "sub_models": len(parts),
                              "concurrent": concurrent}
    ref_out = None
    if reference:
        spec = devices[0]
        so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
        sess = ort.InferenceSession(imported.model.SerializeToString(), so, providers=[spec.provider])

        def run_ref() -> dict[str, np.ndarray]:
            return dict(zip(outputs, sess.run(outputs, feed)))

        if spec.cores and hasattr(os, "sched_setaffinity"):
            from onnx_sched.bench.split_executor import _Worker

            # run the reference on a worker pinned like device 0
            w = _Worker(spec.cores)
            w.start()
            box: dict[str, Any] = {}
            import threading

            ev = threading.Event()

            def job() -> None:
                box["r"] = time_calls(run_ref, warmup, repeats)
                ev.set()

            w.jobs.put(job)
            ev.wait()
            w.jobs.put(None)
            ref_times, ref_out = box["r"]
        else:
            ref_times, ref_out = time_calls(run_ref, warmup, repeats)
        report["single_device"] = summarize(ref_times)
    with SplitExecutor(parts, devices, outputs, concurrent=concurrent, opt_level=opt_level) as ex:
        per_dev: list[dict[str, float]] = []

        def run_split() -> dict[str, np.ndarray]:
            out = ex.run(feed)
            per_dev.append(dict(ex.last_device_seconds))
            return out

        times, out = time_calls(run_split, warmup, repeats)
    per_dev = per_dev[warmup:]
    report["split"] = summarize(times)
    report["device_seconds"] = {k: float(np.median([d.get(k, 0.0) for d in per_dev])) for k in per_dev[0]}
    if ref_out is not None:
        ok, err = compare_outputs(ref_out, out)
        report["outputs_equal"] = ok
        report["max_abs_error"] = err
        report["outputs_informative"] = outputs_informative(ref_out)
    return report


def bench_ort_interleaved(imported: Any, placement: np.ndarray, devices: Sequence[Any], *, warmup: int = 3,
                          repeats: int = 20, seed: int = 0, opt_level: str = "all") -> dict[str, Any]:
    """One whole-model session on ``devices[0]`` versus the concurrent split executor,
    runs interleaved (single, split, single, split ...) so load drift on a shared
    machine hits both alike.  Reports medians, p90s, ``speedup`` = median single /
    median split and ``split_faster_share`` = share of the interleaved pairs where the
    split run was the faster one (a paired comparison: 0.5 = no difference)."""
    import threading

    import onnxruntime as ort

    from onnx_sched.bench.ort_runner import make_session_options
    from onnx_sched.bench.split_executor import SplitExecutor, _Worker, random_feed, split_model

    feed = random_feed(imported.model, seed)
    outputs = [o.name for o in imported.model.graph.output]
    parts = split_model(imported, placement)
    spec = devices[0]
    so = make_session_options(arena=True, opt_level=opt_level, threads=spec.threads)
    sess = ort.InferenceSession(imported.model.SerializeToString(), so, providers=[spec.provider])
    worker = _Worker(spec.cores)
    worker.start()

    def run_single() -> float:
        box: dict[str, float] = {}
        done = threading.Event()

        def job() -> None:
            t0 = time.perf_counter()
            box["out"] = sess.run(outputs, feed)
            box["t"] = time.perf_counter() - t0
            done.set()

        worker.jobs.put(job)
        done.wait()
        return box["t"]

    single, split = [], []
    try:
        with SplitExecutor(parts, devices, outputs, concurrent=True, opt_level=opt_level) as ex:
            for i in range(warmup + repeats):
                ts = run_single()
                t0 = time.perf_counter()
                ex.run(feed)
                tp = time.perf_counter() - t0
                if i >= warmup:
                    single.append(ts)
                    split.append(tp)
    finally:
        worker.jobs.put(None)
    a, b = summarize(single), summarize(split)
    faster = float(np.mean(np.asarray(split) < np.asarray(single)))
    return {"sub_models": len(parts), "single_device": a, "split": b, "speedup": a["median_s"] / b["median_s"],
            "split_faster_share": faster,
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


# --------------------------------------------------------------------- OpenVINO
def ov_inputs(compiled: Any, feed: Mapping[str, np.ndarray]) -> dict[Any, np.ndarray]:
    """Feed for an OpenVINO compiled model, keyed by port.  A port has several tensor
    names (``get_any_name`` may return a frontend alias such as
    ``/m/Reshape_output_0``), so match any of them; an unfed input is an error, never
    silently uninitialized memory."""
    out: dict[Any, np.ndarray] = {}
    for port in compiled.inputs:
        hit = [n for n in port.get_names() if n in feed]
        if not hit:
            raise ValueError(f"no data for OpenVINO input {sorted(port.get_names())}; feed has {sorted(feed)}")
        out[port] = feed[hit[0]]
    return out


def _subgraph_device_seconds(infos: Any, affinity: Mapping[str, str]) -> dict[str, float]:
    per: dict[str, float] = {}
    sub_dev: dict[str, str] = {}
    pending: dict[str, float] = {}
    for info in infos:
        name = info.node_name
        sub, sep, layer = name.partition(": ")
        if not sep:
            sub, layer = "subgraph", name
        secs = info.real_time.total_seconds()
        if sub not in sub_dev:
            dev = affinity.get(layer)
            if dev is not None:
                sub_dev[sub] = dev
        pending[sub] = pending.get(sub, 0.0) + secs
    for sub, secs in pending.items():
        dev = sub_dev.get(sub, sub)
        per[dev] = per.get(dev, 0.0) + secs
    return per


def bench_openvino(imported: Any, placement: np.ndarray, devices: Sequence[str], *, warmup: int = 2,
                   repeats: int = 10, seed: int = 0, reference_device: str | None = None,
                   precision: str = "f32") -> dict[str, Any]:
    """HETERO run of ``placement`` with device index ``i`` -> OpenVINO device ``devices[i]``.

    The reference is the whole model compiled on ``reference_device`` (default
    ``devices[0]``).  ``CPUB`` in ``devices`` is registered on demand.
    """
    from openvino.passes import Manager

    from onnx_sched.bench.split_executor import random_feed
    from onnx_sched.devices import CPU_ALIAS, openvino_core, register_cpu_alias
    from onnx_sched.exporters.openvino import export_openvino, placement_from_rt_info, read_onnx_into_openvino
    from onnx_sched.plugins.openvino_affinity import ApplyAffinity, hetero_device_string
    from onnx_sched.schedule import Schedule

    core = openvino_core()
    if CPU_ALIAS in devices:
        register_cpu_alias(core)
    for d in set(devices):
        if d not in core.available_devices:
            raise DeviceError(f"OpenVINO device {d!r} not available; this machine has {core.available_devices}")
        if precision:
            core.set_property(d, {"INFERENCE_PRECISION_HINT": precision})
    feed = random_feed(imported.model, seed)
    n = imported.graph.n_ops
    model = export_openvino(imported, Schedule(np.arange(n), "placement", placement=placement), list(devices))
    stored = placement_from_rt_info(model)
    mgr = Manager()
    mgr.register_pass(ApplyAffinity())
    mgr.run_passes(model)
    target = hetero_device_string(model)
    compiled = core.compile_model(model, target, {"PERF_COUNT": True})
    report: dict[str, Any] = {"runtime": "openvino", "target": target, "devices": list(devices),
                              "sub_models": int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")),
                              "execution_devices": list(compiled.get_property("EXECUTION_DEVICES"))}
    inputs = ov_inputs(compiled, feed)
    out_names = [o.name for o in imported.model.graph.output]  # OpenVINO keeps the ONNX output order
    req = compiled.create_infer_request()
    per_dev: list[dict[str, float]] = []

    def run_het() -> dict[str, np.ndarray]:
        res = req.infer(inputs)
        per_dev.append(_subgraph_device_seconds(req.get_profiling_info(), stored["affinity"]))
        return {k: np.array(res[p]) for k, p in zip(out_names, compiled.outputs)}

    times, out = time_calls(run_het, warmup, repeats)
    report["split"] = summarize(times)
    per_dev = per_dev[warmup:]
    report["device_seconds"] = {k: float(np.median([d.get(k, 0.0) for d in per_dev])) for k in per_dev[0]}
    ref_dev = reference_device or devices[0]
    ref_model = read_onnx_into_openvino(imported.model)
    ref_compiled = core.compile_model(ref_model, ref_dev)
    ref_req = ref_compiled.create_infer_request()
    ref_outs = out_names
    ref_inputs = ov_inputs(ref_compiled, feed)

    def run_ref() -> dict[str, np.ndarray]:
        res = ref_req.infer(ref_inputs)
        return {k: np.array(res[p]) for k, p in zip(ref_outs, ref_compiled.outputs)}

    ref_times, ref = time_calls(run_ref, warmup, repeats)
    report["single_device"] = summarize(ref_times)
    ok, err = compare_outputs(ref, out)
    report["outputs_equal"] = ok
    report["max_abs_error"] = err
    report["outputs_informative"] = outputs_informative(ref)
    return report
