"""Calibrating transfer models: time real tensor copies and fit ``latency + bytes / bandwidth``.

:func:`measure_transfer` times host copies the way a runtime hands tensors
between sub-models (OpenVINO tensors, ORT values or numpy);
:func:`measure_split_transfer` times what one device boundary costs in the ORT
split executor between two ORT devices, :func:`measure_split_boundary` between any two
of its devices (an ORT CPU core and a torch GPU: copy, stream synchronisation,
thread hand-off and part start together).  Each returns a
:class:`~onnx_sched.profiling.profiles.TransferModel`; :func:`fit_transfer` is
their least-squares fit, shared with the torch devices' calibration
(:func:`onnx_sched.profiling.cuda.measure_torch_transfer`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from onnx_sched.profiling.profiles import TransferModel

__all__ = ["fit_transfer", "measure_host_boundary", "measure_split_boundary", "measure_split_transfer",
           "measure_transfer", "relu_chain"]


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


def relu_chain(n: int, ops: int):  # noqa: ANN201
    """The import of ``ops`` ``Relu`` nodes in a chain over a float vector of ``n`` elements (``x`` in, ``y{ops}``
    out): the smallest model whose split crosses device boundaries where one chooses."""
    import onnx
    from onnx import TensorProto, helper

    from onnx_sched.importers.onnx import import_onnx

    names = ["x", *(f"y{i + 1}" for i in range(ops))]
    nodes = [helper.make_node("Relu", [a], [b], name=f"r{i}") for i, (a, b) in enumerate(zip(names, names[1:]))]
    vec = [helper.make_tensor_value_info(t, TensorProto.FLOAT, [n]) for t in names]
    graph = helper.make_graph(nodes, "boundary", vec[:1], vec[-1:], value_info=vec[1:-1])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return import_onnx(model)


def _median_run(imported, placement: Sequence[int], devices: Sequence, feed: dict, repeats: int) -> float:  # noqa: ANN001
    """Median seconds of one split-executor run of ``imported`` placed by ``placement`` (after 3 warm-up runs)."""
    from onnx_sched.bench.split_executor import SplitExecutor, iter_parts

    out = [o.name for o in imported.model.graph.output]
    with SplitExecutor(iter_parts(imported, np.asarray(placement, np.int64)), devices, out) as ex:
        for _ in range(3):
            ex.run(feed)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            ex.run(feed)
            ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def measure_split_transfer(sizes: Sequence[int] = (1 << 12, 1 << 18, 1 << 22), repeats: int = 30,
                           cores: Sequence[int] = (0, 1)) -> TransferModel:
    """Calibrate the cost of one device boundary in the ORT split executor.

    For each size, ``Relu(Relu(x))`` runs as one single-thread session and split
    into two parts on two devices (worker threads pinned to ``cores``); the median
    difference is what crossing a boundary costs (session call, thread hand-off,
    tensor hand-over).  Least squares gives ``latency + bytes / bandwidth``.
    """
    from onnx_sched.bench.split_executor import DeviceSpec

    xs, ys = [], []
    devs = [DeviceSpec("d0", cores=(cores[0],)), DeviceSpec("d1", cores=(cores[-1],))]
    for size in sizes:
        n = max(1, int(size) // 4)
        imp = relu_chain(n, 2)
        feed = {"x": np.random.default_rng(0).standard_normal(n).astype(np.float32)}
        one, two = (_median_run(imp, p, devs, feed, repeats) for p in ([0, 0], [0, 1]))
        xs.append(n * 4)
        ys.append(max(two - one, 0.0))
    x, y = np.asarray(xs, float), np.asarray(ys)
    A = np.stack([np.ones(len(x)), x], axis=1)
    (lat, inv_bw), *_ = np.linalg.lstsq(A, y, rcond=None)
    lat = max(float(lat), float(y.min()), 0.0)
    inv_bw = max(float(inv_bw), 1e-12)
    return TransferModel(lat, 1.0 / inv_bw)


def measure_split_boundary(devices: Sequence, sizes: Sequence[int] = (1 << 12, 1 << 18, 1 << 22),
                           repeats: int = 30) -> TransferModel:
    """What one boundary between ``devices[0]`` and ``devices[1]`` (split-executor ``DeviceSpec``s, e.g. an ONNX
    Runtime CPU core and a torch GPU) costs in the split executor, in either direction.

    A copy alone is the smaller part of a boundary: the executor also ends the producing part (a stream
    synchronisation on a GPU), hands the tensor to the other device's worker thread and starts a part there.  For
    each size, a chain of three ``Relu`` with the middle one on ``devices[1]`` crosses two boundaries; taking away
    the all-``devices[0]`` two-op chain and the middle op's own time on ``devices[1]`` (three-op minus two-op chain,
    all there) leaves the two boundaries:
    ``(t[0,1,0] - t[0,0]) - (t[1,1,1] - t[1,1])``.  Half of that per size, fitted as ``latency + bytes /
    bandwidth`` (:func:`fit_transfer`)."""
    xs, ys = [], []
    for size in sizes:
        n = max(1, int(size) // 4)
        three, two = relu_chain(n, 3), relu_chain(n, 2)
        feed = {"x": np.random.default_rng(0).standard_normal(n).astype(np.float32)}
        crossing = _median_run(three, [0, 1, 0], devices, feed, repeats) - _median_run(two, [0, 0], devices, feed,
                                                                                       repeats)
        middle = _median_run(three, [1, 1, 1], devices, feed, repeats) - _median_run(two, [1, 1], devices, feed,
                                                                                     repeats)
        xs.append(n * 4)
        ys.append(max((crossing - middle) / 2, 0.0))
    return fit_transfer(xs, ys)


def measure_host_boundary(label: str, threads: int = 1) -> TransferModel:
    """One split-executor boundary between an ONNX Runtime CPU device (``threads`` threads from core 0) and the
    device of the runtime label ``label`` (a torch device ``cuda:N`` / ``torch:cpu`` or an ONNX Runtime GPU provider,
    its worker on the next core): :func:`measure_split_boundary`."""
    import os

    from onnx_sched.bench.split_executor import device_spec

    ncpu = os.cpu_count() or 1
    return measure_split_boundary([device_spec("CPU", threads=threads, cores=tuple(range(min(threads, ncpu)))),
                                   device_spec(label, threads=threads, cores=(threads % ncpu,))])
