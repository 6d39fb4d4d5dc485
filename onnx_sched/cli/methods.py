"""``onnx-sched methods``: list the registered passes per objective."""

from __future__ import annotations

import click

from onnx_sched.objectives import OBJECTIVES
from onnx_sched.passes import available

__all__ = ["command"]


@click.command("methods")
def command() -> None:
    """List the methods available for each objective."""
    for objective in OBJECTIVES:
        names = available(objective)
        click.echo(f"{objective}: {', '.join(names) if names else '(none)'}")
