"""Shapes observed on a run: the last resort of shape inference, for ops no inference engine knows.

ONNX Runtime's contrib ops (``com.microsoft``: ``QLinearGlobalAveragePool``, ``QGemm``, ... as the
quantizer writes them) have shapes neither onnx's inference, ONNX Runtime's symbolic inference nor
OpenVINO (which cannot read them) give, although every input shape is known.  ONNX Runtime runs them:
:func:`observed_shapes` runs the model twice on seeded inputs with the tensors still unknown as extra
outputs and keeps the shapes both runs agree on (integer inputs are zeros, valid as indices; float
inputs differ between the runs, so a size that follows the data is left out rather than guessed).
Only for models whose every input has a static shape (pin the others with ``--dim``).

    >>> import onnx
    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    ...                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    >>> m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    >>> observed_shapes(m, ["y"], None)
    {'y': (1, (2, 3))}
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from onnx_sched.ort_crashes import for_onnx_runtime

__all__ = ["observed_shapes"]


def observed_shapes(model: onnx.ModelProto, names: list[str], data_dir: Path | None) -> dict:
    """``{name: (elem_type, shape)}`` for the tensors of ``names`` (node outputs of the main graph) that two
    ONNX Runtime runs on seeded inputs give the same shape; ``{}`` when an input shape is not static or the
    model does not run (``data_dir``: where its external data files are)."""
    try:
        import onnxruntime as ort
        from onnx.external_data_helper import load_external_data_for_model, uses_external_data
    except Exception:  # noqa: BLE001
        return {}
    specs = _input_specs(model)
    if specs is None or not names:
        return {}
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    listed = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in listed)
    wanted = [o.name for o in probe.graph.output]
    try:
        if any(uses_external_data(t) for t in probe.graph.initializer):
            if data_dir is None:
                return {}
            load_external_data_for_model(probe, str(data_dir))
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(for_onnx_runtime(probe).SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        runs = [session.run(None, _feed(specs, seed)) for seed in (0, 1)]
    except Exception:  # noqa: BLE001 -- a model ONNX Runtime cannot run tells nothing
        return {}
    found = {}
    for name, first, second in zip(wanted, *runs):
        if name in names and isinstance(first, np.ndarray) and isinstance(second, np.ndarray) \
                and first.shape == second.shape and first.dtype == second.dtype:
            found[name] = (onnx.helper.np_dtype_to_tensor_dtype(first.dtype), tuple(int(d) for d in first.shape))
    return found


def _input_specs(model: onnx.ModelProto) -> list[tuple[str, np.dtype, tuple[int, ...]]] | None:
    """``(name, dtype, shape)`` of every fed graph input, or ``None`` if one is not a tensor of static shape."""
    initializers = {t.name for t in model.graph.initializer}
    specs = []
    for i in model.graph.input:
        if i.name in initializers:
            continue
        t = i.type.tensor_type
        if not i.type.HasField("tensor_type") or not t.HasField("shape") \
                or any(not d.HasField("dim_value") for d in t.shape.dim):
            return None
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
        except Exception:  # noqa: BLE001 -- a type numpy has no dtype for
            return None
        specs.append((i.name, dtype, tuple(int(d.dim_value) for d in t.shape.dim)))
    return specs


def _feed(specs: list[tuple[str, np.dtype, tuple[int, ...]]], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.random(shape).astype(dtype) if dtype.kind in "fc" else np.zeros(shape, dtype)
            for name, dtype, shape in specs}
