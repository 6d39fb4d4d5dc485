"""Pieces shared by CLI commands: JSON output, model import options."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click

__all__ = ["import_options", "write_json_atomic"]


def write_json_atomic(data: Any, path: str | os.PathLike) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
        f.write("\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, out)


def import_options(fn):  # noqa: ANN001, ANN201
    """``--input-shape`` and ``--dim`` for commands that import models."""
    fn = click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE", help="Value for a symbolic dimension.")(fn)
    fn = click.option(
        "--input-shape", "input_shapes", multiple=True, metavar="NAME=1x3x224x224", help="Static shape for an input."
    )(fn)
    return fn
