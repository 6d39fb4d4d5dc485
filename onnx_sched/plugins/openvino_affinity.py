"""OpenVINO ``ModelPass`` that turns a stored onnx-sched placement into per-op affinity.

The HETERO plugin splits a model by each op's ``rt_info["affinity"]``; that
per-op attribute does not survive an IR save and read (measured:
:mod:`onnx_sched.exporters.openvino_ir`), so onnx-sched stores the placement in
model-level rt_info (:mod:`onnx_sched.exporters.openvino`) and, for an IR written
by ``onnx-sched optimize``, in a sidecar placement file beside it.  This pass
applies it to every op before ``compile_model("HETERO:...")``;
:func:`read_placed_model` reads an IR and applies its placement at load time.  Ops
the stored map does not name (Constants, shape sub-graphs or ops added after
export) get their consumer's device, else their producer's.

Example:
    >>> from openvino.passes import Manager                          # doctest: +SKIP
    >>> m = Manager(); m.register_pass(ApplyAffinity()); m.run_passes(model)  # doctest: +SKIP
    >>> core.compile_model(model, "HETERO:CPU,GPU")                   # doctest: +SKIP
    >>> model, target = read_placed_model("out.xml")                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openvino.passes import ModelPass

from onnx_sched.exporters.openvino import complete_affinity, placement_from_rt_info

__all__ = ["ApplyAffinity", "apply_affinity", "hetero_device_string", "read_placed_model"]


def apply_affinity(model: Any, affinity: Mapping[str, str] | None = None, fold_constants: bool = True) -> list[str]:
    """Set ``rt_info["affinity"]`` on every op of ``model``; returns the devices used
    (in first-use order).  ``affinity`` defaults to the placement stored in the model.

    With ``fold_constants`` OpenVINO's ``ConstantFolding`` runs first, so shape
    sub-graphs of static shapes become Constants; every Constant read on several
    devices is then copied per device.  Without this, HETERO cuts the model at
    every cross-device shape computation (dozens of sub-models) and some of those
    boundaries fail at run time (empty tensors for folded shape values)."""
    if fold_constants:
        import openvino as ov
        from openvino.passes import ConstantFolding, Manager

        mgr = Manager()
        mgr.register_pass(ConstantFolding())
        mgr.run_passes(model if isinstance(model, ov.Model) else ov.Model(model))
    if affinity is None:
        stored = placement_from_rt_info(model)
        if stored is None:
            raise ValueError("model has no onnx-sched placement in its rt_info (onnx_sched/placement)")
        affinity = stored["affinity"]
    full = complete_affinity(model, affinity)
    _split_shared_constants(model, full)
    used: list[str] = []
    for op in model.get_ordered_ops():
        dev = full[op.get_friendly_name()]
        op.get_rt_info()["affinity"] = dev
        if dev not in used:
            used.append(dev)
    return used


def _split_shared_constants(model: Any, full: dict[str, str]) -> int:
    """Give every device its own copy of a Constant read on several devices (HETERO
    would otherwise cut the model at each cross-device read of, e.g., the shared zero
    scalar of all stripped weights).  Updates ``full``; returns the copies made."""
    import openvino as ov

    made = 0
    for op in list(model.get_ordered_ops()):
        if op.get_type_name() != "Constant":
            continue
        name = op.get_friendly_name()
        by_dev: dict[str, list[Any]] = {}
        for port in op.outputs():
            for target in port.get_target_inputs():
                dev = full.get(target.get_node().get_friendly_name())
                if dev is None:  # a reader inside a Loop / If body, placed with its op: left as it is
                    continue
                by_dev.setdefault(dev, []).append(target)
        if len(by_dev) < 2:
            continue
        own = full[name]
        for dev, targets in by_dev.items():
            if dev == own:
                continue
            copy = ov.op.Constant(op.get_data().copy(), shared_memory=False)
            if copy.get_element_type() != op.get_element_type():
                copy = ov.op.Constant(op.get_element_type(), op.get_output_shape(0), op.get_data().ravel().tolist())
            copy.set_friendly_name(f"{name}/onnx_sched_copy_{dev}")
            full[copy.get_friendly_name()] = dev
            for t in targets:
                t.replace_source_output(copy.output(0))
            made += 1
    return made


def hetero_device_string(model: Any) -> str:
    """``HETERO:<devices>`` for the devices of the stored placement (stored order)."""
    stored = placement_from_rt_info(model)
    if stored is None:
        raise ValueError("model has no onnx-sched placement in its rt_info (onnx_sched/placement)")
    used = set(stored["affinity"].values())
    return "HETERO:" + ",".join(d for d in stored["devices"] if d in used)


def read_placed_model(xml_path: str | os.PathLike, placement_path: str | os.PathLike | None = None,
                      core: Any = None) -> tuple[Any, str]:
    """Read an IR and apply its placement: ``(ov.Model with per-op affinity, "HETERO:<devices>")``.

    The placement is ``placement_path`` (a placement file), else the IR's sidecar
    ``<stem>.placement.json`` when present, else the placement in the IR's rt_info.
    A placement file replaces the rt_info copy, so the target names its devices.
    """
    from onnx_sched.bench.placement_file import read_placement_map, sidecar_path
    from onnx_sched.exporters.openvino import RT_INFO_KEY
    from onnx_sched.importers.openvino import read_ir

    model = read_ir(xml_path) if core is None else core.read_model(str(xml_path))
    side = Path(placement_path) if placement_path is not None else sidecar_path(xml_path)
    if placement_path is not None or side.is_file():
        mapping, devices, _ = read_placement_map(side)
        model.set_rt_info(json.dumps({"devices": devices, "affinity": mapping}), RT_INFO_KEY)
    apply_affinity(model)
    return model, hetero_device_string(model)


class ApplyAffinity(ModelPass):
    """``openvino.passes.ModelPass`` applying the stored (or given) placement."""

    def __init__(self, affinity: Mapping[str, str] | None = None, fold_constants: bool = True) -> None:
        super().__init__()
        self._affinity = affinity
        self._fold = fold_constants
        self.devices: list[str] = []

    def run_on_model(self, model: Any) -> bool:  # noqa: D102 - OpenVINO API
        self.devices = apply_affinity(model, self._affinity, self._fold)
        return True
