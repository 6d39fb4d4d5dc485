"""Schedule -> the model in the format it came in: ONNX through the ONNX exporter, OpenVINO IR through the IR one.

:func:`check_output` says before any work whether a source can be written to an
output path (an IR is written as an IR, ONNX as ONNX); :func:`export_model` builds
the output model and the notes a report must carry about it (for an IR: that
OpenVINO does not apply the op order); :func:`save_model` writes it atomically.
Nothing here depends on the objective.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_sched.importers.openvino import is_openvino_source
from onnx_sched.schedule import Schedule

__all__ = ["Exported", "check_output", "export_model", "save_model"]


@dataclass(frozen=True, eq=False)
class Exported:
    """An exported model (``onnx.ModelProto`` or ``openvino.Model``) and what reports must say about it."""

    model: Any
    format: str  # "onnx" or "openvino"
    notes: tuple[str, ...] = ()


def check_output(source: Any, output: str | os.PathLike) -> None:
    """``ValueError`` when ``source`` cannot be written to ``output``: an OpenVINO input is written
    as an IR (``.xml``), an ONNX input as ONNX (any other suffix); onnx-sched converts neither way."""
    out_ir = Path(output).suffix.lower() == ".xml"
    if is_openvino_source(source) and not out_ir:
        raise ValueError(f"{output}: an OpenVINO IR input is written back as an IR; give -o NAME.xml "
                         "(onnx-sched does not convert OpenVINO to ONNX)")
    if not is_openvino_source(source) and out_ir:
        raise ValueError(f"{output}: an ONNX input is written back as ONNX; give -o NAME.onnx, or convert the model "
                         "to IR first (ovc model.onnx) and optimize the .xml")


def export_model(imported: Any, schedule: Schedule, metadata: Mapping[str, str] | None = None,
                 device_names: Sequence[str] | None = None, in_place: bool = False) -> Exported:
    """The imported model with ``schedule`` applied (ONNX: node order + metadata) or recorded (IR: rt_info).
    ``in_place``: an ONNX model is reordered itself, not a copy (see :func:`~onnx_sched.exporters.onnx.export_onnx`)."""
    if hasattr(imported, "op_index"):  # ImportedOpenVINO
        from onnx_sched.exporters.openvino_ir import ORDER_NOTE, export_ir

        return Exported(export_ir(imported, schedule, metadata, device_names), "openvino", (ORDER_NOTE,))
    from onnx_sched.exporters.onnx import export_onnx

    return Exported(export_onnx(imported, schedule, metadata, device_names=device_names, in_place=in_place),
                    "onnx")


def save_model(model: Any, output: str | os.PathLike, source_path: str | os.PathLike | None = None,
               inline: bool = False) -> list[Path]:
    """Write an exported model atomically, never over ``source_path``; returns the files written
    (an IR: ``.xml``, ``.bin`` and, with a placement, the sidecar placement file).  ``inline``: an ONNX model's
    external data is written into it (:func:`~onnx_sched.exporters.onnx.save_model_atomic`)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        from onnx_sched.exporters.onnx import save_model_atomic

        save_model_atomic(model, output, source_path=source_path, inline=inline)
        return [Path(output)]
    from onnx_sched.exporters.openvino_ir import save_ir_atomic

    return save_ir_atomic(model, output, source_path=source_path)
