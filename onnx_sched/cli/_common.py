"""Pieces shared by CLI commands: JSON output, the ``--report`` option, model import options."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from onnx_sched.deadline import positive_seconds
from onnx_sched.exporters.paths import atomic_write_bytes

__all__ = ["SECONDS", "OutputFile", "import_options", "refuse_ort_only", "report_option", "runtime_hint",
           "write_json_atomic"]


def refuse_ort_only(runtime: str, given: Iterable[tuple[str, bool]]) -> None:
    """One line for ONNX Runtime options (``(flag, given)`` pairs) given with another ``runtime``, which would
    ignore them."""
    flags = [flag for flag, used in given if used]
    if runtime != "ort" and flags:
        raise ValueError(f"{', '.join(flags)}: ONNX Runtime option(s), not for --runtime {runtime}")


@contextmanager
def runtime_hint(runtime: str) -> Iterator[None]:
    """A command with ``--runtime`` (default openvino): an ONNX model OpenVINO cannot read (an ``ai.onnx.ml`` op, a
    contrib op) may still run on ONNX Runtime, so its one-line refusal says how to ask for that."""
    from onnx_sched.errors import ModelLoadError

    try:
        yield
    except ModelLoadError as exc:
        if runtime == "openvino" and "OpenVINO cannot read the ONNX model" in str(exc):
            raise ModelLoadError(f"{exc} (--runtime ort runs an ONNX model with ONNX Runtime)") from None
        raise


def write_json_atomic(data: Any, path: str | os.PathLike) -> None:
    """Write ``data`` as indented JSON, atomically; numpy values as lists, anything else as text."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    atomic_write_bytes(out, (text + "\n").encode())


class Seconds(click.ParamType):
    """A positive, finite number of seconds (``float`` accepts ``nan`` and ``inf``, which no clock can keep)."""

    name = "seconds"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        try:
            return positive_seconds(value, "")
        except ValueError as exc:
            self.fail(str(exc).lstrip(), param, ctx)


SECONDS = Seconds()


class OutputFile(click.Path):
    """A file path to write (``pathlib.Path``): a name ending in a path separator names a folder, which
    ``pathlib`` would silently turn into a file of that name."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if isinstance(value, str) and value.endswith(("/", os.sep)):
            self.fail(f"{value!r} names a folder; give a file path", param, ctx)
        return super().convert(value, param, ctx)


def import_options(fn):  # noqa: ANN001, ANN201
    """``--input-shape`` and ``--dim`` for commands that import models."""
    fn = click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE", help="Value for a symbolic dimension.")(fn)
    fn = click.option(
        "--input-shape", "input_shapes", multiple=True, metavar="NAME=1x3x224x224",
        help="Static shape for an input (in an ONNX model a fixed dimension must keep its size).",
    )(fn)
    return fn


class _OptionWithOldNames(click.Option):
    """An option whose help shows only its first flag; the other flags are old names that keep working."""

    def get_help_record(self, ctx: click.Context):  # noqa: ANN201
        opts, self.opts = self.opts, self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts


def report_option(*old_names: str):  # noqa: ANN201
    """``--report FILE`` (the JSON report, the same flag in every command) as ``report_path``;
    ``old_names`` (e.g. ``"--json"``) still work but are not shown in ``--help``."""
    return click.option("--report", *old_names, "report_path", cls=_OptionWithOldNames, default=None,
                        type=OutputFile(), help="Write the JSON report here.")
