"""``onnx-sched inspect``: graph and memory statistics of a model."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnx_sched.cli._common import import_options, report_option, write_json_atomic
from onnx_sched.report import fmt_bytes

__all__ = ["command"]


@click.command("inspect")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--inplace/--no-inplace", default=False, help="Memory model with in-place reuse.")
@report_option("--json")
@import_options
def command(model: Path, inplace: bool, report_path: Path | None, input_shapes: tuple[str, ...], dims: tuple[str, ...]) -> None:
    """Print MODEL's graph and memory statistics (ONNX or OpenVINO IR .xml)."""
    from onnx_sched.cost.memory import profile
    from onnx_sched.cost.memory_bound import lower_bound
    from onnx_sched.dag import longest_path_to_sink
    from onnx_sched.exporters.paths import check_output_paths, model_files
    from onnx_sched.importers.dispatch import import_model
    from onnx_sched.importers.onnx import parse_dims, parse_input_shapes
    from onnx_sched.objectives.peak_mem_bodies import bound_graph, read_graph

    check_output_paths(model_files(model), {"--report": report_path})
    imported = import_model(model, parse_input_shapes(input_shapes), parse_dims(dims), weights_in_file=True)
    g = imported.graph
    prof = profile(read_graph(imported, inplace), np.arange(g.n_ops), inplace)
    lb = lower_bound(bound_graph(imported, inplace), inplace)  # over orders of control-flow bodies too
    stats = g.summary()
    stats.update(
        {
            "weight_nodes": len(imported.weight_nodes),
            "longest_path_ops": int(longest_path_to_sink(g).max()) if g.n_ops else 0,
            "max_fanout": int(g.op_succs.lengths().max()) if g.n_ops else 0,
            "file_order_peak_bytes": prof.peak,
            "file_order_peak_op": g.op_names[prof.peak_step] if g.n_ops else None,
            "lower_bound_bytes": lb,
            "gap_to_bound": (prof.peak - lb) / lb if lb else 0.0,
            "gflops": float(g.op_flops.sum() / 1e9),
            "shape_sources": dict(getattr(imported, "shape_sources", {})),  # ONNX only: which inference gave shapes
            **({"control_flow_bodies": g.metadata.get("control_flow_bodies", 0),
                "unsized_bodies": g.metadata.get("unsized_bodies", 0)}
               if g.metadata.get("control_flow_bodies") or g.metadata.get("unsized_bodies") else {}),
        }
    )
    table = Table(title=Text(str(model)))  # Text: names with brackets are not rich markup
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in stats.items():
        table.add_row(key, Text(_shown(key, value)))
    console = Console()
    console.print(table)
    types = Table(title="op types (top 12)")
    types.add_column("op type")
    types.add_column("count", justify="right")
    for t, c in Counter(g.op_types).most_common(12):
        types.add_row(Text(t), str(c))
    console.print(types)
    placed = placement_stats(model, imported)
    if placed is not None:
        table, note = placement_table(placed)
        console.print(table)
        console.print(Text(note))
    if report_path is not None:
        write_json_atomic({**stats, "op_types": dict(Counter(g.op_types)),
                           **({"placement": placed} if placed is not None else {})}, report_path)


def _shown(key: str, value: Any) -> str:
    """A statistic as the table shows it: bytes in binary units, the gap in percent, other floats to four significant
    digits, a count per kind as ``kind: n`` (``-`` when none: every shape from onnx's inference)."""
    if key.endswith("bytes"):
        return fmt_bytes(value)
    if key == "gap_to_bound":
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    return str(value)


def placement_stats(model: Path, imported: Any) -> dict[str, Any] | None:
    """What a placed model (``optimize --devices``, or devices written by hand) holds per device: ops, and for ONNX the
    per-device peaks of its file order with the transfers where the export recorded them (else as early as
    possible); None for a model without a placement, ``{"error": ...}`` for one that does not place every op."""
    from onnx_sched.bench.placement_file import load_placement, placement_of_ir, sidecar_path
    from onnx_sched.bench.runtimes.device_plan import placed_schedule
    from onnx_sched.errors import OnnxSchedError
    from onnx_sched.exporters.onnx import DEVICE_KEY
    from onnx_sched.exporters.openvino import placement_from_rt_info

    g = imported.graph
    is_ir = model.suffix.lower() == ".xml"
    if is_ir:
        placed = sidecar_path(model).is_file() or placement_from_rt_info(imported.model) is not None
    else:
        placed = any(q.key == DEVICE_KEY for n in imported.model.graph.node for q in n.metadata_props)
    if not placed:
        return None
    try:
        placement, devices, meta = load_placement(placement_of_ir(model) if is_ir else model, g, as_onnx=not is_ir)
    except OnnxSchedError as exc:
        return {"error": str(exc)}
    out: dict[str, Any] = {"devices": list(devices),
                           "ops_per_device": {d: int(c) for d, c in zip(devices, np.bincount(placement,
                                                                                           minlength=len(devices)))}}
    if is_ir:  # OpenVINO plans its own order: no file order to walk
        return out
    sched, recorded = placed_schedule(imported, placement, devices, meta.get("transfer_steps"))
    walked = sched.walk
    moved = [s.item for s in sched.steps if s.kind == "transfer"]
    out.update({"per_device_peak_bytes": {d: int(v) for d, v in zip(devices, walked.per_device_peak)},
                "peak_bytes": walked.peak, "transfers": len(moved),
                "transferred_bytes": int(sched.problem.arrays.size[moved].sum()) if moved else 0,
                "transfer_timing": "recorded" if recorded else "as early as possible"})
    return out


def placement_table(placed: dict[str, Any]) -> tuple[Table, str]:
    """One row per device (its ops and its peak) and a line on the transfers."""
    table = Table(title="placement")
    if "error" in placed:
        table.add_column("placement")
        table.add_row(Text(placed["error"]))
        return table, "the placement does not cover the model"
    table.add_column("device")
    table.add_column("ops", justify="right")
    peaks = placed.get("per_device_peak_bytes")
    if peaks is not None:
        table.add_column("peak", justify="right")
    for d in placed["devices"]:
        row = [Text(d), str(placed["ops_per_device"][d])]
        table.add_row(*row, *([fmt_bytes(peaks[d])] if peaks is not None else []))
    if peaks is None:
        return table, "an OpenVINO IR: OpenVINO plans its own order, so no per-device peaks"
    from onnx_sched.bench.runtimes.device_plan import transfer_timing

    when = transfer_timing(placed["transfer_timing"] == "recorded")
    n = placed["transfers"]
    return table, (f"peaks of the file's order with {n} transfer{'' if n == 1 else 's'} "
                   f"({fmt_bytes(placed['transferred_bytes'])}), {when}")
