"""OpenVINO bench of a placement: a ``HETERO`` compile against the whole model on one device.

The model is an ONNX or an OpenVINO IR import
(:mod:`~onnx_sched.bench.runtimes.openvino_inputs`).  The placement goes through the
OpenVINO exporter (model-level rt_info) and the
:class:`~onnx_sched.plugins.openvino_affinity.ApplyAffinity` pass, then
``compile_model("HETERO:<devices>")``.  Precision is pinned to f32 on every
device (the CPU plugin would otherwise pick bf16 on AMX hardware and outputs
could not be compared).  On a CPU-only machine the second device is the CPU
plugin registered again as ``CPUB`` (:mod:`onnx_sched.devices`).
:func:`ov_inputs` (an OpenVINO feed keyed by port) also serves OpenVINO profiling.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onnx_sched.bench.outputs import compare_outputs, outputs_informative, random_outputs
from onnx_sched.bench.timing import summarize, time_calls
from onnx_sched.errors import DeviceError, OnnxSchedError, last_line

__all__ = ["PAPER_KEEP", "PAPER_RUNS", "PlacementTimer", "bench_openvino", "mean_of_last", "ov_inputs"]


def ov_inputs(compiled: Any, feed: Mapping[str, np.ndarray]) -> dict[Any, np.ndarray]:
    """Feed for an OpenVINO compiled model, keyed by port.  A port has several tensor
    names (``get_any_name`` may return a frontend alias such as
    ``/m/Reshape_output_0``), so match any of them; an unfed input is an error, never
    silently uninitialized memory (OpenVINO 2026.4 reads onnx's ``test_sequence_model1-3`` with one of
    their outputs as an input)."""
    out: dict[Any, np.ndarray] = {}
    for port in compiled.inputs:
        hit = [n for n in port.get_names() if n in feed]
        if not hit:
            raise ValueError(f"OpenVINO reads the model with an input {sorted(port.get_names())} that it does not have "
                             f"(its inputs: {sorted(feed)}), so OpenVINO cannot run it as written")
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


def _by_name(results: Any, names: Sequence[str], compiled: Any) -> dict[str, np.ndarray]:
    """An inference's results as arrays keyed by the graph's output names (``compiled.outputs`` order)."""
    return {k: np.array(results[p]) for k, p in zip(names, compiled.outputs)}


def _prepare_core(devices: Sequence[str], precision: str) -> Any:
    """The process-wide Core with the CPU plugin's extra names registered when named (``CPUB``, and ``CPU2``,
    ``CPU3``, ... for splits over more CPU "devices") and ``precision`` pinned on every device."""
    from onnx_sched.devices import exact_f32, is_cpu_alias, openvino_core, register_cpu_alias

    core = openvino_core()
    for d in sorted(set(devices)):
        if is_cpu_alias(d):
            register_cpu_alias(core, d)
    for d in set(devices):
        if d not in core.available_devices:
            raise DeviceError(f"OpenVINO device {d!r} not available; this machine has {core.available_devices}")
        if precision:
            core.set_property(d, exact_f32(core, d) if precision == "f32" else {"INFERENCE_PRECISION_HINT": precision})
    return core


def _placed_model(imported: Any, placement: np.ndarray, devices: Sequence[str]) -> tuple[Any, str, dict[str, Any]]:
    """A fresh ``ov.Model`` of the import with per-op affinities applied: ``(model, "HETERO:<devices>", stored placement)``."""
    from openvino.passes import Manager

    from onnx_sched.bench.runtimes.openvino_inputs import openvino_model_of
    from onnx_sched.exporters.openvino import export_openvino, placement_from_rt_info
    from onnx_sched.plugins.openvino_affinity import ApplyAffinity, hetero_device_string
    from onnx_sched.schedule import Schedule

    n = imported.graph.n_ops
    model = export_openvino(imported, Schedule(np.arange(n), "placement", placement=placement), list(devices),
                            ov_model=openvino_model_of(imported))
    stored = placement_from_rt_info(model)
    mgr = Manager()
    mgr.register_pass(ApplyAffinity())
    mgr.run_passes(model)
    return model, hetero_device_string(model), stored


def _time_split(core: Any, imported: Any, placement: np.ndarray, devices: Sequence[str], feed: Mapping[str, Any],
                out_names: Sequence[str], warmup: int, repeats: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``bench_openvino``'s HETERO half: ``(report, outputs)``; its compiled model is released on return, before
    the whole model is compiled (each holds its own copy of the weights)."""
    model, target, stored = _placed_model(imported, placement, devices)
    compiled = core.compile_model(model, target, {"PERF_COUNT": True})
    report: dict[str, Any] = {"runtime": "openvino", "target": target, "devices": list(devices),
                              "sub_models": int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")),
                              "execution_devices": list(compiled.get_property("EXECUTION_DEVICES"))}
    inputs = ov_inputs(compiled, feed)
    req = compiled.create_infer_request()
    per_dev: list[dict[str, float]] = []

    def run_het() -> dict[str, np.ndarray]:
        res = req.infer(inputs)
        per_dev.append(_subgraph_device_seconds(req.get_profiling_info(), stored["affinity"]))
        return _by_name(res, out_names, compiled)

    times, out = time_calls(run_het, warmup, repeats)
    report["split"] = summarize(times)
    per_dev = per_dev[warmup:]
    report["device_seconds"] = {k: float(np.median([d.get(k, 0.0) for d in per_dev])) for k in per_dev[0]}
    return report, out


def bench_openvino(imported: Any, placement: np.ndarray, devices: Sequence[str], *, warmup: int = 2,
                   repeats: int = 10, seed: int = 0, reference_device: str | None = None,
                   precision: str = "f32") -> dict[str, Any]:
    """HETERO run of ``placement`` with device index ``i`` -> OpenVINO device ``devices[i]``.

    The reference is the whole model compiled on ``reference_device`` (default
    ``devices[0]``).  ``CPUB`` in ``devices`` is registered on demand.
    """
    from onnx_sched.bench.runtimes.openvino_inputs import openvino_model_of, output_names, seeded_inputs
    from onnx_sched.bench.runtimes.openvino_survives import survives_openvino

    feed = seeded_inputs(imported, seed)
    survives_openvino(imported, feed, devices)
    core = _prepare_core(devices, precision)
    out_names = output_names(imported)
    try:  # OpenVINO's own failures (compile or infer) come as RuntimeError: one line, as bad input
        report, out = _time_split(core, imported, placement, devices, feed, out_names, warmup, repeats)
    except RuntimeError as exc:
        raise OnnxSchedError(f"OpenVINO's HETERO cannot run this placement: {last_line(exc)}") from None
    ref_dev = reference_device or devices[0]  # compiled once the split's compiled model is gone
    try:
        ref_compiled = core.compile_model(openvino_model_of(imported), ref_dev)
        ref_req = ref_compiled.create_infer_request()
    except RuntimeError as exc:
        raise OnnxSchedError(f"OpenVINO cannot run the model on {ref_dev}: {last_line(exc)}") from None
    ref_inputs = ov_inputs(ref_compiled, feed)

    def run_ref() -> dict[str, np.ndarray]:
        return _by_name(ref_req.infer(ref_inputs), out_names, ref_compiled)

    ref_times, ref = time_calls(run_ref, warmup, repeats)
    report["single_device"] = summarize(ref_times)
    unchecked = random_outputs(imported.model)
    if unchecked:
        report["unchecked_outputs"] = sorted(unchecked)
    ok, err = compare_outputs(ref, out, unchecked=unchecked)
    report["outputs_equal"] = ok
    report["max_abs_error"] = err
    report["outputs_informative"] = outputs_informative(ref)
    return report


#: Paper 004's protocol (tables 2-3): run the same placement 10 times, report the mean of the last 5.
PAPER_RUNS, PAPER_KEEP = 10, 5


def mean_of_last(times: Sequence[float], keep: int = PAPER_KEEP) -> float:
    """Mean of the last ``keep`` timed runs (paper 004's protocol with 10 runs and ``keep = 5``)."""
    if not 0 < keep <= len(times):
        raise ValueError(f"mean of the last {keep} of {len(times)} runs is undefined")
    return float(np.mean(np.asarray(times, np.float64)[-keep:]))


class PlacementTimer:
    """Times placements of one model for real, paper 004's protocol, reusing one Core and one feed.

    :meth:`time_placement` compiles ``HETERO:<devices>`` with the placement's affinities (the
    same path as :func:`bench_openvino`, single-device placements included, so every
    candidate is timed alike); :meth:`time_device` compiles the whole model on a device string
    such as ``AUTO:CPU,CPUB`` (OpenVINO's AUTO plugin choosing for itself).  Each does
    ``runs`` timed inferences with no untimed warm-up (the first runs are the warm-up the
    protocol discards) and reports ``mean_of_last(keep)``; :meth:`time_compiled` re-times an
    already compiled model, for interleaved comparisons.

    A placement is only worth its time if HETERO computes the model: :meth:`time_placement`
    also compares its outputs with the whole model on ``devices[0]`` (``outputs_equal``).
    OpenVINO 2026.4's HETERO gets some splits wrong -- light_squeezenet with its last Conv,
    Relu or GlobalAveragePool alone on the second device returns a uniform softmax, and other
    cuts of that tail fail at the first inference with an empty tensor between the parts
    (docs/results.md 6.1) -- so a placement that raises in OpenVINO is reported with
    ``error`` and infinite ``seconds`` instead of raising.
    """

    def __init__(self, imported: Any, devices: Sequence[str], *, seed: int = 0, runs: int = PAPER_RUNS,
                 keep: int = PAPER_KEEP, precision: str = "f32") -> None:
        from onnx_sched.bench.runtimes.openvino_inputs import seeded_inputs
        from onnx_sched.bench.runtimes.openvino_survives import survives_openvino

        if not 0 < keep <= runs:
            raise ValueError(f"keep must be in 1..runs ({runs}), got {keep}")
        self.feed = seeded_inputs(imported, seed)
        survives_openvino(imported, self.feed, devices)
        self.imported, self.devices, self.runs, self.keep = imported, list(devices), int(runs), int(keep)
        self.core = _prepare_core(self.devices, precision)
        self._reference: dict[str, np.ndarray] | None = None
        self.unchecked = random_outputs(imported.model)  # outputs no comparison applies to

    def compile_placement(self, placement: np.ndarray) -> tuple[Any, str]:
        """``(compiled model, target)`` of ``placement`` (device ``i`` -> ``devices[i]``)."""
        model, target, _ = _placed_model(self.imported, np.asarray(placement, np.int64), self.devices)
        return self.core.compile_model(model, target), target

    def compile_device(self, device: str) -> tuple[Any, str]:
        """``(compiled model, device)``: the whole model on one OpenVINO device string."""
        from onnx_sched.bench.runtimes.openvino_inputs import openvino_model_of

        return self.core.compile_model(openvino_model_of(self.imported), device), device

    def time_compiled(self, compiled: Any) -> dict[str, Any]:
        """``runs`` timed inferences of ``compiled``: ``{"seconds": mean of the last keep, "times": [...]}``."""
        req = compiled.create_infer_request()
        inputs = ov_inputs(compiled, self.feed)
        times, _ = time_calls(lambda: req.infer(inputs), 0, self.runs)
        return {"seconds": mean_of_last(times, self.keep), "times": times,
                "execution_devices": list(compiled.get_property("EXECUTION_DEVICES"))}

    def time_placement(self, placement: np.ndarray) -> dict[str, Any]:
        """Compile and time ``placement``; the report adds ``target``, ``compile_seconds`` and
        ``outputs_equal`` (``max_abs_error``) against :meth:`reference_outputs`; where OpenVINO fails
        on the placement, ``error`` (its last line), ``seconds`` inf and ``outputs_equal`` False."""
        reference = self.reference_outputs()  # outside the try: a failure of the whole model is not the placement's
        t0 = time.perf_counter()
        try:
            compiled, target = self.compile_placement(placement)
            report = {"target": target, "compile_seconds": time.perf_counter() - t0, **self.time_compiled(compiled)}
            ok, err = compare_outputs(reference, self.outputs(compiled), unchecked=self.unchecked)
        except RuntimeError as exc:  # OpenVINO's own failures (compile or infer) come as RuntimeError
            return {"target": None, "seconds": float("inf"), "times": [], "outputs_equal": False,
                    "max_abs_error": None, "error": last_line(exc)}
        return {**report, "outputs_equal": ok, "max_abs_error": err}

    def outputs(self, compiled: Any) -> dict[str, np.ndarray]:
        """One inference of ``compiled`` on the timer's feed, by graph output name."""
        from onnx_sched.bench.runtimes.openvino_inputs import output_names

        res = compiled.create_infer_request().infer(ov_inputs(compiled, self.feed))
        return _by_name(res, output_names(self.imported), compiled)

    def reference_outputs(self) -> dict[str, np.ndarray]:
        """The whole model's outputs on ``devices[0]`` (computed once); :class:`OnnxSchedError` in one line when
        OpenVINO cannot run the model there on the timer's seeded inputs (then no placement can be timed)."""
        if self._reference is None:
            try:
                self._reference = self.outputs(self.compile_device(self.devices[0])[0])
            except RuntimeError as exc:
                raise OnnxSchedError(f"OpenVINO cannot run the model on {self.devices[0]} with seeded inputs (so "
                                     f"its placements cannot be timed): {last_line(exc)}") from exc
        return self._reference

    def time_device(self, device: str) -> dict[str, Any]:
        """Compile the whole model on ``device`` (e.g. ``AUTO:CPU,CPUB``) and time it, once the seeded inputs have
        run on ``devices[0]`` (:meth:`reference_outputs`; a failing inference under AUTO can crash OpenVINO)."""
        self.reference_outputs()
        t0 = time.perf_counter()
        compiled, target = self.compile_device(device)
        return {"target": target, "compile_seconds": time.perf_counter() - t0, **self.time_compiled(compiled)}
