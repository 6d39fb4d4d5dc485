"""What a command shows a person: byte formatting and the before/after table of a report.

Objectives describe their table as plain data (:class:`ReportTable`); the CLI draws it
with rich.  Keeping the rows as data lets the Python API, the JSON report and the
terminal agree on what was compared.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReportTable", "fmt_bytes", "yes_no"]


def fmt_bytes(n: float | int | None) -> str:
    """``1536`` -> ``'1.50 KiB'``; ``None`` -> ``'-'``.

    Example:
        >>> fmt_bytes(3 * 2**20)
        '3.00 MiB'
    """
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


@dataclass(frozen=True)
class ReportTable:
    """A titled table comparing the baseline (``columns[0]``) with the result (``columns[1]``)."""

    title: str
    columns: tuple[str, str]
    rows: tuple[tuple[str, str, str], ...]
