"""Every docstring example in the library runs and gives what it shows (``doctest``, ELLIPSIS on).

The examples double as documentation of behaviour (bounded shapes, part merging, option checks, ...): a
stale example is a bug.  Training code is left out (torch), as are modules whose examples need a file
(marked ``+SKIP`` there)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import onnx_sched
import onnx_sched.models
import onnx_sched.passes


def _modules() -> list[str]:
    names = []
    for package in (onnx_sched, onnx_sched.passes, onnx_sched.models):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".training" not in info.name and not info.name.endswith("olive_pass"):
                names.append(info.name)
    return sorted(set(names))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed"


def test_the_examples_are_found() -> None:
    """The walk reaches the packages this file is about (a silent empty walk would make it pass)."""
    names = _modules()
    assert {"onnx_sched.passes", "onnx_sched.bench.part_merge", "onnx_sched.importers.bounded_shapes"} <= set(names)
