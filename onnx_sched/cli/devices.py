"""``onnx-sched devices``: the compute devices of this machine (OpenVINO, ONNX Runtime, torch's CUDA devices)."""

from __future__ import annotations

import json

import click

__all__ = ["command"]


@click.command("devices")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(as_json: bool) -> None:
    """List OpenVINO devices (with FULL_DEVICE_NAME), ONNX Runtime execution providers and, when torch
    is installed and sees CUDA, cuda:N devices (name, memory) for --devices / profile --device."""
    from onnx_sched.devices import list_devices

    devices = list_devices()
    if as_json:
        click.echo(json.dumps([d.to_dict() for d in devices], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="devices")
    for col in ("backend", "name", "kind", "full name"):
        table.add_column(col)
    for d in devices:
        table.add_row(d.backend, d.name, d.kind, d.full_name)
    Console().print(table)
    if not devices:
        click.echo("no devices found: neither OpenVINO nor ONNX Runtime is installed", err=True)
