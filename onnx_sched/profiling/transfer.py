"""Calibrating transfer models: time real tensor copies and fit ``latency + bytes / bandwidth``.

:func:`measure_transfer` times host copies the way a runtime hands tensors
between sub-models (OpenVINO tensors, ORT values or numpy);
:func:`measure_split_transfer` times what one device boundary costs in the ORT
split executor.  Both return a
:class:`~onnx_sched.profiling.profiles.TransferModel`; :func:`fit_transfer` is
their least-squares fit, shared with the torch devices' calibration
(:func:`onnx_sched.profiling.cuda.measure_torch_transfer`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from onnx_sched.profiling.profiles import TransferModel

__all__ = ["fit_transfer", "measure_split_transfer", "measure_transfer"]


def fit_transfer(nbytes: Sequence[float], seconds: Sequence[float]) -> TransferModel:
    """``latency + bytes / bandwidth`` by least squares on (bytes, median seconds) points; a
    negative intercept is noise, refit through the origin."""
    x, y = np.asarray(nbytes, float), np.asarray(seconds, float)
    A = np.stack([np.ones(len(x)), x], axis=1)
    (lat, inv_bw), *_ = np.linalg.lstsq(A, y, rcond=None)
    if lat < 0:
        lat, inv_bw = 0.0, float(x @ y / (x @ x))
    inv_bw = max(float(inv_bw), 1e-13)
    return TransferModel(float(lat), 1.0 / inv_bw)


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
    return fit_transfer(xs, ys)


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
