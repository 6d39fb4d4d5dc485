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

import numpy as np

from onnx_sched.errors import ModelLoadError
from onnx_sched.ort_crashes import for_onnx_runtime

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
    path_in: str | os.PathLike[str], path_out: str | os.PathLike[str], level: str = "basic",
    weights_file: bool = False,
) -> Path:
    """Save the graph ONNX Runtime will execute (after its rewrites at ``level``).

    Reordering that graph (instead of the file ORT would rewrite anyway) is how a
    schedule survives into ORT's execution; bench it with optimizations off.  The
    output is marked in ``metadata_props`` (:data:`ORT_OPTIMIZED_KEY`) so ``bench``
    knows.  ``level`` is ``basic`` (portable ONNX ops only) or ``extended``/``all``
    (may emit ``com.microsoft`` ops that only ORT runs).  The input is never modified.  An input with external
    data gives an output that refers to copies of its data files.  ``weights_file`` (meant for an input with
    inline weights, the only one ``optimize --ort-graph`` asks it for): ORT writes the weights to a data file
    beside the output (``DST.data``), which is copied as a file instead of parsed and written again -- for a
    caller that writes its final model inline again (``save_model_atomic(..., inline=True)``).  Off, an inline
    input gives an inline output: a model whose weights ORT maps from a file adds those pages to the peak RSS
    of its first run, which is what ``bench`` measures.
    """
    import onnx
    import onnxruntime as ort

    from onnx_sched.bench.ort_load import ort_loads
    from onnx_sched.importers.onnx import initializer_names

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
    from onnx_sched.exporters.onnx import save_model_atomic

    with tempfile.TemporaryDirectory(prefix="onnx_sched_ortopt_") as tmp:
        tmp_path = Path(tmp) / "optimized.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = levels[level]
        so.optimized_model_filepath = str(tmp_path)
        so.log_severity_level = 4  # fatal only: its errors come back raised, said in one line
        if weights_file:  # ORT writes the weights to a data file beside its graph: copied as a file, not parsed
            so.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                        f"{dst.name}.data")  # named after the output: several can share a folder
            so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        with ort_loads(str(src)):
            session = ort.InferenceSession(str(src), sess_options=so, providers=["CPUExecutionProvider"])
        fed = {i.name for i in session.get_inputs()}  # what the caller feeds: not an initializer's name
        del session
        # the weights are not read here: they are in ORT's data file (``weights_file``), inline, or references
        # into the input's data files (relative to its folder); a data file is copied next to ``dst`` below
        model = onnx.load(str(tmp_path), load_external_data=False)
        weights_from = tmp_path if weights_file else src
        # an input that had an initializer (IR < 4 lists every initializer as an input) and lost it to ORT's
        # constant folding would become one the caller must feed: drop it (nothing reads it any more)
        inits = initializer_names(model.graph)
        kept_inputs = [i for i in model.graph.input if i.name in fed or i.name in inits]
        del model.graph.input[:]
        model.graph.input.extend(kept_inputs)
        if model.ir_version < 4:
            # IR < 4 requires every initializer to be a graph input; ORT's constant
            # folding adds initializers without listing them
            listed = {i.name for i in model.graph.input}
            for init in model.graph.initializer:
                if init.name not in listed:
                    model.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type,
                                                                                list(init.dims)))
        _int64_sparse_indices(model)
        _record_ort_shapes(model, weights_from.parent)
        kept = [p for p in model.metadata_props if p.key != ORT_OPTIMIZED_KEY]
        del model.metadata_props[:]
        model.metadata_props.extend(kept)
        model.metadata_props.add(key=ORT_OPTIMIZED_KEY, value=level)
        save_model_atomic(model, dst, source_path=weights_from)
    return dst


def _int64_sparse_indices(model: Any) -> None:
    """ORT writes a sparse initializer's indices in the narrowest integer type (int8 for small tensors); onnx
    allows int64 only: widen them."""
    import onnx
    from onnx import numpy_helper

    for sparse in model.graph.sparse_initializer:
        if sparse.indices.data_type != onnx.TensorProto.INT64:
            index = numpy_helper.to_array(sparse.indices).astype(np.int64)
            sparse.indices.CopyFrom(numpy_helper.from_array(index, sparse.indices.name))


def _record_ort_shapes(model: Any, folder: Path) -> None:
    """Write into ``model.graph.value_info`` the types and shapes onnx's shape inference cannot give but ONNX
    Runtime knows: the outputs of ORT's own ops (the ``com.microsoft.nchwc`` layout ops of levels
    ``extended`` / ``all``).  One run of the graph with those tensors as extra outputs, on seeded inputs,
    optimizations off (the graph as written); models with symbolic input dims, or that fail to run, are
    left as they are (the import then names the tensors whose size is unknown).

    Only plain tensors whose shape inference knows nothing are recorded: a size that depends on the data
    (``NonZero``, ``TopK`` with a computed ``k``: inference gives a partial shape), and everything computed from
    one, is not what one run shows, so those stay to the import's worst-case bounds; an ``optional`` or
    ``sequence`` value is not a tensor type to write."""
    import onnx
    import onnxruntime as ort
    from onnx.external_data_helper import load_external_data_for_model

    from onnx_sched.bench.inputs import random_inputs

    g = model.graph
    if any(not d.HasField("dim_value") for i in g.input for d in i.type.tensor_type.shape.dim):
        return
    missing = _unknown_sizes(model)
    if not missing:
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in missing)
    try:
        load_external_data_for_model(probe, str(folder))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 4  # fatal only: its errors come back raised, said in one line
        session = ort.InferenceSession(for_onnx_runtime(probe).SerializeToString(), so,
                                       providers=["CPUExecutionProvider"])
        values = session.run(missing, random_inputs(model, 0))
    except Exception:  # noqa: BLE001 - sizes stay unknown; the import says which
        return
    kinds = {o.name: o.type for o in session.get_outputs()}
    for name, value in zip(missing, values):
        if isinstance(value, np.ndarray) and kinds.get(name, "").startswith("tensor("):
            elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
            g.value_info.append(onnx.helper.make_tensor_value_info(name, elem, list(value.shape)))


def _unknown_sizes(model: Any) -> list[str]:
    """Node outputs of ``model`` (fixed input shapes) of which onnx's shape inference knows neither a non-tensor
    type nor any shape, and that read nothing whose shape inference found data-dependent (partly known)."""
    from onnx_sched.importers.control_flow import subgraph_reads
    from onnx_sched.onnx_structure import infer_shapes

    g = model.graph
    try:
        inferred = infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - then every node output is measured
        inferred = model
    known, tainted = {t.name for t in g.initializer}, set()
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        kind = vi.type.WhichOneof("value")
        if kind == "tensor_type" and vi.type.tensor_type.HasField("shape"):
            static = all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)
            (known if static else tainted).add(vi.name)
        elif kind is not None and kind != "tensor_type":  # optional, sequence, map: not a tensor to record
            known.add(vi.name)
    missing = []
    for node in g.node:  # ORT writes its graph in a topological order
        reads_tainted = any(x in tainted for x in [*node.input, *subgraph_reads(node)])
        for out in node.output:
            if not out or out in known or out in tainted:
                continue
            if reads_tainted:
                tainted.add(out)
            else:
                missing.append(out)
    return list(dict.fromkeys(missing))
