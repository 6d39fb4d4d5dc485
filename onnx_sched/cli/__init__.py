"""The ``onnx-sched`` command line.

Each sub-command lives in its own module of this package and exposes a
``click.Command`` named ``command``; this group discovers them.  Every
:class:`~onnx_sched.errors.OnnxSchedError` (and ``ValueError`` raised on bad input, ``OSError`` from the
file system) is printed as one line on stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from onnx_sched import __version__
from onnx_sched.errors import OnnxSchedError, first_line


class _Group(click.Group):
    def main(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        """Usage errors (a bad flag or value) as one line too, with the command's ``--help`` hint in it."""
        kwargs.pop("standalone_mode", None)
        for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 is printed escaped, never a crash
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="backslashreplace")
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `onnx-sched`: the help, not an error line
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            click.echo(f"onnx-sched: error: {exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"onnx-sched: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("onnx-sched: interrupted", err=True)
            sys.exit(130)

    def invoke(self, ctx: click.Context):  # noqa: ANN201
        try:
            return super().invoke(ctx)
        except (OnnxSchedError, ValueError, OSError) as exc:  # OSError: missing files, a full disk, ...
            click.echo(f"onnx-sched: error: {first_line(exc, limit=None)}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("onnx-sched: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="onnx-sched")
def main() -> None:
    """Order and place the operators of ONNX / OpenVINO models for peak memory,
    makespan or latency."""


for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        _command = getattr(importlib.import_module(f"{__name__}.{_mod.name}"), "command", None)
        if isinstance(_command, click.Command):
            main.add_command(_command)
