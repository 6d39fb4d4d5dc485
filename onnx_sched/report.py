"""What a command shows a person: byte formatting and the before/after table of a report.

Objectives describe their table as plain data (:class:`ReportTable`); the CLI draws it
with rich.  Keeping the rows as data lets the Python API, the JSON report and the
terminal agree on what was compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ReportTable", "fmt_bytes", "fmt_times", "yes_no"]


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


def fmt_times(*seconds: float) -> list[str]:
    """Durations in seconds, in the one unit (s, ms or µs) that suits the largest, to four significant digits,
    so a table's rows compare at a glance.

    Example:
        >>> fmt_times(0.00143661, 0.000793036)
        ['1.437 ms', '0.793 ms']
        >>> fmt_times(2.5, float("inf"))
        ['2.500 s', 'inf']
    """
    top = max((abs(s) for s in seconds if math.isfinite(s)), default=0.0)
    scale, unit = (1.0, "s") if top >= 1 else (1e3, "ms") if top >= 1e-3 else (1e6, "µs")
    digits = max(0, 3 - math.floor(math.log10(top * scale))) if top > 0 else 3
    return [f"{s * scale:.{digits}f} {unit}" if math.isfinite(s) else str(s) for s in seconds]


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


@dataclass(frozen=True)
class ReportTable:
    """A titled table comparing the baseline (``columns[0]``) with the result (``columns[1]``)."""

    title: str
    columns: tuple[str, str]
    rows: tuple[tuple[str, str, str], ...]
