"""Duration files for the makespan model: read a per-op duration profile or a device profile set into seconds.

Two kinds of file give a makespan problem its op durations (``durations=PATH``
of :func:`onnx_sched.cost.makespan.makespan_problem`, or a machine file's
``profile``):

* a duration profile ``{"unit": "s"|"ms"|"us", "ops": {op: {unit: t} | t}}``
  (:func:`load_profile`): measured times keyed by op name;
* a device profile set (``format: onnx-sched-profiles/1``, recognised by
  :func:`is_profile_set`), whose rate model prices every op of any graph
  (:func:`profile_set_durations`).

Reading and checking files is profiling's job, so it lives here rather than in
the cost model; this module imports nothing of :mod:`onnx_sched.cost`, so the
cost model can import it without an import cycle.  Errors are ``ValueError``
naming the file and the bad entry.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.profiling.profiles import FORMAT, load_profiles
from onnx_sched.profiling.rates import op_seconds_matrix

__all__ = ["is_profile_set", "load_profile", "profile_set_durations"]


def load_profile(path: str | os.PathLike) -> dict[str, dict[str, float] | float]:
    """Read a per-op duration profile: ``{"unit": "s"|"ms"|"us", "ops": {op: {unit: t} | t}}``.

    Returns durations in seconds; ``ValueError`` names the file and the bad entry.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{p}: cannot read profile ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a duration profile (not UTF-8 text)") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("ops"), Mapping):
        raise ValueError(f"{p}: a profile is an object with an 'ops' mapping (op name -> durations)")
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6}.get(data.get("unit", "s"))
    if scale is None:
        raise ValueError(f"{p}: 'unit' must be one of s, ms, us; got {data.get('unit')!r}")
    out: dict[str, dict[str, float] | float] = {}
    for op, entry in data["ops"].items():
        if isinstance(entry, Mapping):
            row = {}
            for unit, t in entry.items():
                if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0 or not math.isfinite(t):
                    raise ValueError(f"{p}: ops[{op!r}][{unit!r}] must be a finite number >= 0, got {t!r}")
                row[str(unit)] = float(t) * scale
            out[str(op)] = row
        elif isinstance(entry, (int, float)) and not isinstance(entry, bool) and math.isfinite(entry) and entry >= 0:
            out[str(op)] = float(entry) * scale
        else:
            raise ValueError(f"{p}: ops[{op!r}] must be a number or a unit -> number object, got {entry!r}")
    return out


def is_profile_set(path: str | os.PathLike) -> bool:
    """True for a device-profile file of :mod:`onnx_sched.profiling` (``format: onnx-sched-profiles/1``)."""
    try:
        head = Path(path).read_text(encoding="utf-8")[:4096]
    except OSError:
        return False
    return f'"{FORMAT}"' in head


def profile_set_durations(graph: Graph, unit_names: Sequence[str],
                          path: str | os.PathLike) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per-op seconds from a measured / simulated device profile set (its rate model prices unprofiled ops).

    Units are matched by name.  Returns ``(seconds, known)``: ``seconds[:, j]`` is
    the time of every op on ``known[j]``, the units of ``unit_names`` (in that
    order) that the profile set covers; the caller prices the others.
    ``ValueError`` when the file cannot be read or covers none of the units.
    """
    try:
        ps = load_profiles(path)
    except Exception as exc:  # OnnxSchedError: keep the one-line message
        raise ValueError(str(exc)) from None
    known = [u for u in unit_names if u in ps.names]
    if not known:
        raise ValueError(f"{path}: profiles cover devices {list(ps.names)}, none of {list(unit_names)}")
    sub = ps.subset(known)
    return op_seconds_matrix(graph, sub), tuple(sub.names)
