"""ONNX Runtime's optimized graph as a file, marked so ``onnx-sched bench`` knows it.

ORT rewrites the graph (constant folding, fusions) before it orders it, so a
schedule of the file ORT would rewrite anyway does not survive into ORT's
execution.  :func:`ort_optimized_model` saves the graph ORT will execute, to be
reordered and then benched with ORT optimizations off; it marks the file in
``metadata_props`` (:data:`ORT_OPTIMIZED_KEY`), and :func:`model_opt_level` reads
the mark (:func:`onnx_sched.bench.measure.bench_models` runs a marked model with
optimizations off and the original it is compared to at the marked level).
``onnx-sched optimize --ort-graph`` and ``bench`` use it through
:mod:`onnx_sched.bench.measure`, which re-exports these names.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from onnx_sched.errors import ModelLoadError

__all__ = ["ORT_OPTIMIZED_KEY", "model_opt_level", "ort_optimized_model"]

#: metadata_props key written by :func:`ort_optimized_model` (value: the level).
ORT_OPTIMIZED_KEY = "onnx_sched.ort_optimized_level"


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

    from onnx_sched.bench.ort_load import ort_loads

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
        with ort_loads(str(src)):
            ort.InferenceSession(str(src), sess_options=so, providers=["CPUExecutionProvider"])
        # ORT keeps external initializers as references into the input's data files (relative to the
        # input's folder); the weights are not read here, and are copied next to ``dst`` below
        model = onnx.load(str(tmp_path), load_external_data=False)
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
    from onnx_sched.exporters.onnx import save_model_atomic

    save_model_atomic(model, dst, source_path=src)
    return dst
