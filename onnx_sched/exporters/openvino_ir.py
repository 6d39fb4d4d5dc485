"""Schedule -> OpenVINO IR: the imported ``ov.Model`` annotated with the result, saved as ``.xml`` + ``.bin``.

What an IR can carry was measured (``benchmarks/ov_ir_fidelity.py``; numbers in
docs/results.md) on OpenVINO 2026.4:

- per-op ``rt_info`` (the ``affinity`` HETERO reads) is dropped by ``ov.save_model``,
  and layer ``<rt_info>`` attributes written into the XML by hand are dropped by
  ``read_model`` (it keeps only attribute types it knows), so HETERO compiles a read
  IR as one sub-model whatever affinities the file had;
- the order of ``<layer>`` elements in the XML is not kept: ``read_model`` gives the
  same ``get_ordered_ops()`` for every layer order, and the CPU plugin's execution
  order (``execOrder`` of ``get_runtime_model()``) is the same for every order -- it
  plans its own order and memory.

So the result goes into *model-level* rt_info, which survives a save and a read:
``onnx_sched/<key>`` holds the metadata the ONNX exporter writes as
``metadata_props`` (objective, method, predicted cost...), ``onnx_sched/order`` the
scheduled op order (a JSON list of friendly names: a record, OpenVINO does not apply
it; :data:`ORDER_NOTE` is what reports say), and ``onnx_sched/placement`` the
placement (:func:`~onnx_sched.exporters.openvino.export_openvino`).  A placement is
also written as a sidecar placement file ``<stem>.placement.json`` beside the IR
(:func:`~onnx_sched.bench.placement_file.sidecar_path`), which ``onnx-sched bench-placement`` and
:func:`onnx_sched.plugins.openvino_affinity.read_placed_model` apply at load time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.errors import OnnxSchedError
from onnx_sched.schedule import Schedule

__all__ = ["ORDER_KEY", "ORDER_NOTE", "export_ir", "order_from_rt_info", "save_ir_atomic"]

ORDER_KEY = ["onnx_sched", "order"]
META_KEY = "onnx_sched"
#: What a report says about the op order of an IR output (measured: module docstring).
ORDER_NOTE = ("OpenVINO plans its own execution order and memory: read_model does not keep an IR's layer order and "
              "the CPU plugin's execution order is the same for every layer order (measured, docs/results.md). The "
              "order is recorded in the IR's rt_info (onnx_sched/order) but OpenVINO does not apply it.")


def _meta_path(key: str) -> list[str]:
    """``onnx_sched.predicted_peak_bytes`` -> ``["onnx_sched", "predicted_peak_bytes"]``."""
    name = key.split(".", 1)[1] if key.startswith(f"{META_KEY}.") else key
    if not name.replace("_", "").isalnum():
        raise ValueError(f"metadata key {key!r} is not a valid rt_info name (letters, digits, '_')")
    return [META_KEY, name]


def export_ir(imported: Any, schedule: Schedule, metadata: Mapping[str, str] | None = None,
              device_names: Sequence[str] | None = None, ov_model: Any = None) -> Any:
    """``imported.model`` (an :class:`~onnx_sched.importers.openvino.ImportedOpenVINO`) with the
    schedule in its model-level rt_info (replacing what an earlier run wrote there).

    Annotates a clone unless ``ov_model`` is given (then that model, in place: the
    OpenVINO pass does this).  ``device_names`` name the placement's devices (default
    ``"0"``, ``"1"``...).  Ops, weights and outputs are unchanged.
    """
    from onnx_sched.exporters.openvino import export_openvino

    order = np.asarray(schedule.order, dtype=np.int64)
    if len(order) != len(imported.op_index):
        raise ValueError(f"schedule has {len(order)} ops, model has {len(imported.op_index)}")
    model = imported.model.clone() if ov_model is None else ov_model
    rt_info = model.get_rt_info()
    if META_KEY in rt_info:  # an earlier run's order, placement and result: this schedule replaces them
        del rt_info[META_KEY]
    for key, value in (metadata or {}).items():
        model.set_rt_info(str(value), _meta_path(key))
    model.set_rt_info(json.dumps([imported.op_index[int(i)] for i in order]), ORDER_KEY)
    if schedule.placement is not None:
        names = list(device_names) if device_names else [str(i) for i in range(int(np.max(schedule.placement)) + 1)]
        export_openvino(imported, schedule, names, ov_model=model)
    return model


def order_from_rt_info(ov_model: Any) -> list[str] | None:
    """The op order (friendly names) stored by :func:`export_ir`, or None."""
    if not ov_model.has_rt_info(ORDER_KEY):
        return None
    value = ov_model.get_rt_info(ORDER_KEY)
    return json.loads(value.astype(str) if hasattr(value, "astype") else str(value))


def _check_paths(out: Path, source_path: str | os.PathLike | None) -> None:
    if out.suffix.lower() != ".xml":
        raise ValueError(f"{out}: an OpenVINO IR is written as NAME.xml (+ NAME.bin); give -o NAME.xml")
    from onnx_sched.exporters.paths import check_output_paths, model_files

    inputs = [] if source_path is None else model_files(source_path)
    check_output_paths(inputs, {"-o": out, "-o (its .bin)": out.with_suffix(".bin")})


def save_ir_atomic(model: Any, out_path: str | os.PathLike, source_path: str | os.PathLike | None = None) -> list[Path]:
    """Write ``model`` as ``out_path`` (``.xml``) + its ``.bin``, and the sidecar placement file
    when the model carries a placement; returns the paths written.

    Each file is written under a temporary name in the output folder and moved into
    place with ``os.replace`` (``.bin`` first, so the ``.xml`` never names missing
    weights).  Weights keep their precision (``compress_to_fp16=False``).  Refuses to
    write over ``source_path`` or its ``.bin``.  A stale sidecar (a placement file left
    from an earlier run) is removed when the model has no placement.
    """
    import openvino as ov

    from onnx_sched.exporters.openvino import placement_from_rt_info

    out = Path(out_path)
    _check_paths(out, source_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    stored = placement_from_rt_info(model)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        ov.save_model(model, str(tmp / "model.xml"), compress_to_fp16=False)
        os.replace(tmp / "model.bin", out.with_suffix(".bin"))
        os.replace(tmp / "model.xml", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    written = [out, out.with_suffix(".bin")]
    from onnx_sched.bench.placement_file import read_placement_map, save_placement_map, sidecar_path

    side = sidecar_path(out)
    if stored is not None:
        save_placement_map(side, out.stem, stored["devices"], stored["affinity"], source="openvino-ir", ir=out.name)
        written.append(side)
    elif side.is_file():
        try:
            read_placement_map(side)  # only a placement file is ours to remove
        except OnnxSchedError:
            return written
        side.unlink()
    return written
