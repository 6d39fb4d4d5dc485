"""Measuring per-op profiles on real runtimes: OpenVINO ``PERF_COUNT`` and ONNX Runtime profiling.

:func:`profile_openvino` and :func:`profile_ort` time every op of an imported
model (median over repeats) and fit the rate model to the result;
:func:`profile_model` (``onnx-sched profile``) picks the runtime and adds a
calibrated host transfer model; runtime ``torch`` (a ``cuda:N`` or ``torch:cpu``
device) is :func:`onnx_sched.profiling.cuda.profile_torch_set`.  Runtimes are imported when called, so this
module imports without OpenVINO or ONNX Runtime installed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import DeviceError, OnnxSchedError, last_line
from onnx_sched.onnx_inline import inline_calls
from onnx_sched.profiling.profiled_model import named_by_op
from onnx_sched.profiling.profiles import DeviceProfile, ProfileSet
from onnx_sched.profiling.rates import fit_rates
from onnx_sched.profiling.transfer import measure_transfer

__all__ = ["profile_model", "profile_openvino", "profile_ort", "split_run_seconds"]


def _median_times(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = set().union(*samples) if samples else set()
    return {k: float(np.median([s.get(k, 0.0) for s in samples])) for k in keys}


def profile_openvino(imported: Any, device: str = "CPU", repeats: int = 10, warmup: int = 2,
                     config: Mapping[str, Any] | None = None, seed: int = 0) -> DeviceProfile:
    """Per-op latency of an imported ONNX or OpenVINO IR model on an OpenVINO device.

    ``PERF_COUNT`` profiling info gives real time per executed runtime layer; each
    layer's ``originalLayersNames`` lists the ``ov.Model`` ops it fused, which map to
    graph ops (:func:`onnx_sched.exporters.openvino.map_ov_to_graph_ops`).  A
    layer's time is split evenly over the graph ops it covers; ops fused away or
    constant-folded get 0.  Median over ``repeats`` inferences.
    """
    from onnx_sched.bench.runtimes.openvino_inputs import openvino_model_of, seeded_inputs
    from onnx_sched.bench.runtimes.openvino_survives import survives_openvino
    from onnx_sched.devices import openvino_core
    from onnx_sched.exporters.openvino import map_ov_to_graph_ops

    core = openvino_core()
    if device not in core.available_devices:
        raise DeviceError(f"OpenVINO device {device!r} not available; this machine has {core.available_devices}")
    graph = imported.graph
    feed = seeded_inputs(imported, seed)
    survives_openvino(imported, feed, [device])
    ov_model = openvino_model_of(imported)
    ov_to_op = map_ov_to_graph_ops(ov_model, imported)
    cfg = {"PERF_COUNT": True, **dict(config or {})}
    try:  # OpenVINO's own refusals come as RuntimeError: one line, as bad input
        compiled = core.compile_model(ov_model, device, cfg)
    except RuntimeError as exc:
        raise OnnxSchedError(f"OpenVINO cannot compile {graph.name} on {device}: {last_line(exc)}") from None
    runtime = compiled.get_runtime_model()
    layer_ops: dict[str, list[int]] = {}
    for op in runtime.get_ordered_ops():
        info = op.get_rt_info()
        names = str(info["originalLayersNames"].astype(str)) if "originalLayersNames" in info else ""
        ops = sorted({ov_to_op[n] for n in names.split(",") if n and ov_to_op.get(n, -1) >= 0})
        layer_ops[op.get_friendly_name()] = ops
    req = compiled.create_infer_request()
    from onnx_sched.bench.runtimes.openvino import ov_inputs

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

    from onnx_sched.bench.file_weights import model_for_sessions
    from onnx_sched.bench.inputs import import_feed, import_label
    from onnx_sched.bench.ort_load import ort_loads
    from onnx_sched.bench.ort_session import inference_session

    if provider not in ort.get_available_providers():
        raise DeviceError(f"ONNX Runtime provider {provider!r} not available; have {ort.get_available_providers()}")
    graph = imported.graph
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.log_severity_level = 4  # fatal only: its warnings are not the user's business, its errors come back raised
        so.profile_file_prefix = os.path.join(tmp, "prof")
        # the import's own model: ONNX Runtime reads its weights from its files (bench.file_weights)
        source, weights = model_for_sessions(imported)
        model, owner = inline_calls(named_by_op(source))  # a call's body times add up to the call
        with ort_loads(import_label(imported)):  # the user's model: a refusal is one line
            sess = inference_session(model, so, [provider], weights)
        feed = import_feed(imported, seed)
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
    seen: set[str] = set()
    run_index = -1
    for ev in events:
        if ev.get("cat") == "Session" and ev.get("name") == "model_run":
            continue
        if ev.get("cat") != "Node" or not str(ev.get("name", "")).endswith("_kernel_time"):
            continue
        node = ev["name"][: -len("_kernel_time")]
        if node in seen:  # a new run starts when a node repeats
            runs.append(current)
            current, seen = {}, set()
            run_index += 1
        seen.add(node)
        op = owner.get(node, node)
        current[op] = current.get(op, 0.0) + float(ev.get("dur", 0)) * 1e-6
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


def profile_model(imported: Any, device: str, runtime: str = "openvino", repeats: int = 10, threads: int = 1,
                  transfer: bool = True, hosts: tuple[str, ...] = ("CPU", "CPUExecutionProvider"),
                  scale_to_run: bool = False) -> ProfileSet:
    """Profile one device and (optionally) calibrate its host transfer; a one-device set.
    ``runtime="torch"``: ``device`` is ``cuda:N`` or ``torch:cpu``, transfers to and from ``hosts``.
    ``scale_to_run`` (ONNX Runtime and torch devices): op times scaled to sum to :func:`split_run_seconds`."""
    from onnx_sched.bench.runtimes.openvino_inputs import is_openvino_import

    if runtime in ("ort", "onnxruntime", "torch") and is_openvino_import(imported):
        engine = "PyTorch" if runtime == "torch" else "ONNX Runtime"
        raise ValueError(f"{engine} cannot run an OpenVINO IR; profile it with --runtime openvino")
    if scale_to_run and runtime == "openvino":
        raise ValueError("scaling to a split-executor run is for ONNX Runtime and torch profiles (OpenVINO's "
                         "PERF_COUNT already times the compiled model)")
    if runtime == "torch":
        from onnx_sched.bench.runtimes.torch_parts import torch_device
        from onnx_sched.profiling.cuda import profile_torch_set

        tdev = torch_device(device)
        if tdev is None:
            raise ValueError(f"runtime torch needs a device cuda:N or torch:cpu, got {device!r}")
        from onnx_sched.bench.split_executor import check_devices, device_spec

        check_devices([device_spec(device)])  # torch installed, the CUDA device seen: else one line
        ps = profile_torch_set(imported, tdev, repeats=repeats, threads=threads, transfer=transfer, hosts=hosts)
        if scale_to_run:
            ps = replace(ps, devices=(_scaled_to_run(imported, ps.devices[0], device, threads, repeats),))
        return ps
    if runtime == "openvino":
        prof = profile_openvino(imported, device, repeats=repeats)
    elif runtime in ("ort", "onnxruntime"):
        prof = profile_ort(imported, device, threads=threads, repeats=repeats)
        if scale_to_run:
            prof = _scaled_to_run(imported, prof, device, threads, repeats)
    else:
        raise ValueError(f"runtime must be openvino, ort or torch, got {runtime!r}")
    if not transfer:
        return ProfileSet((prof,))
    if runtime != "openvino" and device != "CPUExecutionProvider":  # an ORT GPU provider: a boundary to a CPU core
        from onnx_sched.profiling.transfer import measure_host_boundary

        return ProfileSet.with_hosts(prof, measure_host_boundary(device, threads), hosts)
    tm = measure_transfer(backend="openvino" if runtime == "openvino" else "onnxruntime")
    return ProfileSet((prof,), {}, tm)


def split_run_seconds(imported: Any, device: str, threads: int = 1, repeats: int = 10, warmup: int = 2) -> float:
    """Median seconds of the whole model run as one split-executor part on ``device`` (an ONNX Runtime provider name,
    all graph optimizations on, or a torch device ``cuda:N`` / ``torch:cpu``): what a placement's parts are run by.

    Per-op profiles are taken op by op -- ONNX Runtime with optimizations off (one event per node), CUDA events
    around each op with its launch gap -- so their sum misses what the device really spends on the model (on an
    H200 machine, four corpus models: ORT's sums 0.85-2.9x its optimized run on one core, CUDA events' 1.2-1.65x
    the run on the GPU; docs/results.md 17.3), and a planner would trade ops between devices at the wrong rate."""
    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.split_executor import SplitExecutor, device_spec, iter_parts
    from onnx_sched.bench.timing import time_calls

    spec = device_spec(device, threads=threads)
    outputs = [o.name for o in imported.model.graph.output]
    feed = import_feed(imported, 0)
    with SplitExecutor(iter_parts(imported, np.zeros(imported.graph.n_ops, np.int64)), [spec], outputs) as ex:
        times, _ = time_calls(lambda: ex.run(feed), warmup, repeats)
    return float(np.median(times))


def _scaled_to_run(imported: Any, prof: DeviceProfile, device: str, threads: int, repeats: int) -> DeviceProfile:
    from onnx_sched.profiling.simulated import scaled_to

    return scaled_to(prof, split_run_seconds(imported, device, threads, repeats), "(the whole model run as one "
                     "split-executor part)")
