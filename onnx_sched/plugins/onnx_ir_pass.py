"""An ``onnx_ir`` pass that reorders a model's nodes with onnx-sched.

:class:`OnnxSchedPass` is an :class:`onnx_ir.passes.InPlacePass`, so it slots into
an :class:`onnx_ir.passes.PassManager` next to other IR passes.  It serializes the
model, schedules it with :func:`onnx_sched.api.optimize_model` (the same entry
point as the CLI), then moves the *same* ``ir.Node`` objects of the main graph
into the chosen order: no node, value or initializer is copied or rewritten, so
other passes' references stay valid.  The ``onnx_sched.*`` metadata of the
result (objective, method, predicted peak) is copied into
``model.metadata_props`` and the report is kept in ``pass_.last_report``.  An
objective that places ops (``makespan``, ``latency``, ``peak-mem`` with
``devices``) also writes each node's device into its ``metadata_props``
(``pkg.onnx_sched.device``, as the ONNX exporter does; IR version at least 10).

Example:
    >>> import onnx_ir as ir, onnx_ir.passes                       # doctest: +SKIP
    >>> pm = ir.passes.PassManager([OnnxSchedPass("peak-mem", time_limit=5)])  # doctest: +SKIP
    >>> result = pm(ir.load("model.onnx"))                         # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir
import onnx_ir.passes

from onnx_sched.exporters.onnx import DEVICE_KEY

__all__ = ["OnnxSchedPass"]

_TAG = "onnx_sched.pass_node"  # node metadata key: the node's index in the input
_META_PREFIX = "onnx_sched."


class OnnxSchedPass(onnx_ir.passes.InPlacePass):
    """Reorder the main graph's nodes for ``objective`` (``peak-mem`` by default).

    Args:
        objective: ``peak-mem``, ``makespan`` or ``latency`` (see ``onnx_sched.api``).
        method: a registered method name or ``auto``.
        time_limit: seconds the scheduler may spend.
        inplace, seed, input_shapes, dims, options: passed to ``optimize_model``.
        machines, profiles, devices, latency_mode, memory_limits: the objective's problem, passed to
            ``optimize_model`` (``makespan`` needs ``machines``, ``latency`` ``profiles``; ``devices`` splits
            ``peak-mem`` over several devices).
    """

    def __init__(
        self,
        objective: str = "peak-mem",
        method: str = "auto",
        time_limit: float = 10.0,
        *,
        inplace: bool = False,
        seed: int = 0,
        input_shapes: Mapping[str, tuple[int, ...]] | None = None,
        dims: Mapping[str, int] | None = None,
        options: Mapping[str, Any] | None = None,
        machines: str | os.PathLike | None = None,
        profiles: Sequence[str | os.PathLike] = (),
        devices: Sequence[str] | str | None = None,
        latency_mode: str = "sequential",
        memory_limits: Mapping[str, int] | None = None,
    ) -> None:
        from onnx_sched.api import checked_arguments

        super().__init__()
        self.objective = objective
        self.method = method
        self.inplace = inplace
        self.input_shapes = dict(input_shapes) if input_shapes else None
        self.dims = dict(dims) if dims else None
        self.options = dict(options) if options else None
        checked = checked_arguments("OnnxSchedPass", objective, method, time_limit=time_limit, seed=seed,
                                    machines=machines, profiles=profiles, latency_mode=latency_mode,
                                    devices=devices, memory_limits=memory_limits, input_shapes=input_shapes,
                                    dims=dims, options=options)
        for name in ("input_shapes", "dims", "options"):  # kept apart, as given
            checked.pop(name)
        self.time_limit, self.seed = checked.pop("time_limit"), checked.pop("seed")
        self.problem_args = checked  # the objective's problem: machines, profiles, devices, ...
        self.last_report: Mapping[str, Any] | None = None

    def call(self, model: ir.Model) -> onnx_ir.passes.PassResult:
        from onnx_sched.api import optimize_model
        from onnx_sched.errors import NothingToScheduleError

        nodes = list(model.graph)
        if not nodes:
            self.last_report = None
            return onnx_ir.passes.PassResult(model, modified=False)
        proto = ir.serde.serialize_model(model)
        # Tag nodes by position so the scheduled proto maps back to these ir.Node objects, whatever their names
        # (may be empty or repeated).  The tag is node metadata, not the name: op names stay the model's, so
        # profiles measured on the model's file apply and errors name the user's nodes.
        for i, node in enumerate(proto.graph.node):
            node.metadata_props.add(key=_TAG, value=str(i))
        try:
            result = optimize_model(
                proto,
                self.objective,
                self.method,
                time_limit=self.time_limit,
                inplace=self.inplace,
                seed=self.seed,
                input_shapes=self.input_shapes,
                dims=self.dims,
                options=self.options,
                **self.problem_args,
            )
        except NothingToScheduleError:  # only constants: nothing to reorder
            self.last_report = None
            return onnx_ir.passes.PassResult(model, modified=False)
        tags = [{p.key: p.value for p in n.metadata_props}.get(_TAG) for n in result.model.graph.node]
        order = [int(t) for t in tags if t is not None]
        if sorted(order) != list(range(len(nodes))):
            raise onnx_ir.passes.PassError(
                f"OnnxSchedPass: the scheduled model has {len(result.model.graph.node)} nodes, "
                f"not a permutation of the {len(nodes)} input nodes"
            )
        modified = order != list(range(len(nodes)))
        if modified:
            graph = model.graph
            graph.remove(nodes, safe=False)
            graph.extend(nodes[i] for i in order)
        placed = {int(t): p.value for t, n in zip(tags, result.model.graph.node) if t is not None
                  for p in n.metadata_props if p.key == DEVICE_KEY}
        for i, node in enumerate(nodes):
            device = placed.get(i)
            modified |= node.metadata_props.get(DEVICE_KEY) != device
            if device is None:  # an earlier run's placement, not this schedule's
                node.metadata_props.pop(DEVICE_KEY, None)
            else:
                node.metadata_props[DEVICE_KEY] = device
        if placed and (model.ir_version or 0) < 10:
            model.ir_version = 10  # node metadata_props needs IR >= 10
        # the exported model's onnx_sched.* keys are the model's facts and this result (an earlier result's gone)
        ours = {p.key: p.value for p in result.model.metadata_props if p.key.startswith(_META_PREFIX)}
        for key in [k for k in model.metadata_props if k.startswith(_META_PREFIX) and k not in ours]:
            del model.metadata_props[key]
        model.metadata_props.update(ours)
        self.last_report = dict(result.report)
        return onnx_ir.passes.PassResult(model, modified=modified)
