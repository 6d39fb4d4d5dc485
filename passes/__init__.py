"""The passes: one subpackage per objective, one module per method, each registered by name.

* ``order/``: peak-memory ordering (objective ``peak-mem``).
* ``makespan/``: scheduling on machine types or devices (objective ``makespan``).
* ``placement/``: device placement for latency (objective ``latency``).

Every pass has the same shape::

    @register("dfs", objective="peak-mem")
    def run(graph: Graph, ctx: PassContext) -> Schedule: ...

``PassContext`` carries the time limit, a seeded ``numpy.random.Generator``, the
memory model (``inplace``), method options (``beam_width``, ``samples`` ...) and
objective-specific problem data (built by the objective, :mod:`onnx_sched.objectives`).
The CLI's ``--method`` and the ``auto`` portfolios find passes through :func:`get_pass`;
a new pass is one module in its objective's folder (``Objective.pass_folder``), found by
:func:`_load`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, ItemsView, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.objectives import OBJECTIVES, get_objective
from onnx_sched.schedule import Schedule

__all__ = ["PassContext", "PassFn", "TrackedOptions", "available", "get_pass", "register"]


@dataclass(frozen=True)
class PassContext:
    """Everything a pass may use besides the graph."""

    time_limit: float = 10.0
    seed: int = 0
    inplace: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    problem: Any = None  # objective-specific data, e.g. a makespan Problem
    source: Any = None  # the imported model (ONNX or OpenVINO import), for passes that run it for real
    #: When real runs on a measured target must end: the caller held their time (the objective's
    #: ``target_seconds``) back from ``time_limit``, so a pass that times its own candidates runs them after its
    #: search until then, and the objective's scoring after the pass shares it.  ``None``: the pass's own limit.
    measure_deadline: Any = None

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def measure_by(self, own: Any) -> Any:
        """The deadline a pass's real runs on a measured target end by: the caller's ``measure_deadline``, else the
        pass's ``own``."""
        return own if self.measure_deadline is None else self.measure_deadline

    def option(self, name: str, default: Any) -> Any:
        """``options[name]``, or ``default`` when not given.  A text value for a numeric ``default`` (the CLI
        parses ``--option k=3`` as a number) is a ``ValueError`` that names the option.

        >>> PassContext(options={"episodes": "many"}).option("episodes", 100)
        Traceback (most recent call last):
        ...
        ValueError: --option episodes='many': expected a number (int), e.g. episodes=100
        """
        value = self.options.get(name)
        if value is None:
            return default
        if isinstance(default, (int, float)) and not isinstance(default, bool) and isinstance(value, str):
            kind = type(default).__name__
            try:
                return type(default)(value)
            except ValueError:
                raise ValueError(f"--option {name}={value!r}: expected a number ({kind}), "
                                 f"e.g. {name}={default}") from None
        return value

    def flag(self, name: str, default: bool) -> bool:
        """``options[name]`` read as a yes / no (``true``, ``1``, ``yes``; the CLI's ``--option k=true`` is text).

        >>> PassContext(options={"prior": "True"}).flag("prior", False)
        True
        """
        return str(self.option(name, default)).lower() in ("1", "true", "yes")


class TrackedOptions(Mapping[str, Any]):
    """Pass options that remember which ones were looked up (``get``, ``[]``, ``in``).

    A pass reads the options it understands, so a user's option nobody looked up did not change
    anything (a typo, or one meant for another method): ``schedule_graph`` reports it as unused.
    Copying the options (``items()``, ``dict(...)``) is not reading them.

    >>> opts = TrackedOptions({"samples": 8, "sampels": 8})
    >>> opts.get("samples"), opts.unused()
    (8, ['sampels'])
    """

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)
        self._read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self._read.add(key)
        return self._options[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._read.add(key)
        return self._options.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._read.add(str(key))
        return key in self._options

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def items(self) -> ItemsView[str, Any]:
        return self._options.items()

    def unused(self) -> list[str]:
        """The options given (not ``None``) that nothing looked up."""
        return sorted(k for k, v in self._options.items() if v is not None and k not in self._read)


PassFn = Callable[[Graph, PassContext], Schedule]
_REGISTRY: dict[tuple[str, str], PassFn] = {}
_FAILED: dict[str, str] = {}  # module -> why it could not be imported
_LOADED: set[str] = set()  # pass modules imported (or failed), relative to this package


def register(name: str, objective: str) -> Callable[[PassFn], PassFn]:
    """Register a pass under ``(objective, name)``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")

    def deco(fn: PassFn) -> PassFn:
        key = (objective, name)
        if key in _REGISTRY and _REGISTRY[key] is not fn:
            raise ValueError(f"pass {name!r} for {objective!r} registered twice")
        _REGISTRY[key] = fn
        return fn

    return deco


def _load(objective: str | None = None) -> None:
    """Import the pass modules of ``objective``'s folder (all folders when ``None``), once each.

    Loading one folder keeps a command from importing what other objectives' passes need
    (pymoo, CP-SAT ...)."""
    if objective is not None:
        folders = [get_objective(objective).pass_folder]
    else:
        folders = [m.name for m in pkgutil.iter_modules(__path__) if m.ispkg]
    for folder in folders:
        package = importlib.import_module(f"{__name__}.{folder}")
        for mod in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            rel = mod.name.removeprefix(f"{__name__}.")
            if mod.ispkg or rel.rsplit(".", 1)[-1].startswith("_") or rel in _LOADED:
                continue
            try:
                importlib.import_module(mod.name)
            except ImportError as exc:  # an optional dependency is missing: keep the other passes
                _FAILED[rel] = f"{type(exc).__name__}: {exc}"
            _LOADED.add(rel)


def available(objective: str) -> list[str]:
    """Names of the passes registered for ``objective``."""
    _load(objective)
    return sorted(name for (obj, name) in _REGISTRY if obj == objective)


def get_pass(name: str, objective: str) -> PassFn:
    """The pass registered as ``name`` for ``objective``; ``ValueError`` lists the choices."""
    _load(objective)
    try:
        return _REGISTRY[(objective, name)]
    except KeyError:
        why = "".join(f"; module {m!r} failed to load ({e})" for m, e in _FAILED.items())
        raise ValueError(
            f"no method {name!r} for objective {objective!r}; choose from {', '.join(available(objective))}{why}"
        ) from None
