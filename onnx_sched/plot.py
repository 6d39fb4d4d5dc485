"""Plots for reports (matplotlib is an optional extra: ``pip install onnx-sched[plot]``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from onnx_sched.cost.memory import MemoryProfile
from onnx_sched.errors import OnnxSchedError
from onnx_sched.exporters.paths import atomic_write

__all__ = ["check_plot_path", "plot_heap", "plot_memory", "pyplot", "save_figure"]


def pyplot():  # noqa: ANN201
    """matplotlib.pyplot on the Agg backend, or a one-line error naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise OnnxSchedError("plotting needs matplotlib: pip install 'onnx-sched[plot]'") from None
    return plt


def check_plot_path(path: str | os.PathLike) -> None:
    """``ValueError`` before any work when ``--plot``'s extension names no format matplotlib writes
    (or :class:`OnnxSchedError` without matplotlib), so no output is written for a plot that would fail."""
    pyplot()  # matplotlib or the one-line error naming the extra
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()  # a bare figure: pyplot's (the caller's) are left alone
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise ValueError(f"--plot {path}: the name must end in one of .{', .'.join(sorted(formats))}")


def save_figure(fig: object, path: str | os.PathLike) -> None:
    """Write ``fig`` to ``path`` atomically, in the format its extension names, and close it."""
    plt = pyplot()
    fmt = Path(path).suffix.lower().lstrip(".")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=120))  # type: ignore[attr-defined]
    plt.close(fig)


def plot_memory(profiles: Mapping[str, MemoryProfile], path: str | os.PathLike, title: str = "") -> None:
    """Live memory (MiB) at every step for each labelled order, peaks marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for label, prof in profiles.items():
        mib = prof.step / 2**20
        ax.plot(range(len(mib)), mib, label=f"{label} (peak {prof.peak / 2**20:.2f} MiB)", linewidth=1)
        ax.scatter([prof.peak_step], [prof.peak / 2**20], s=14)
    ax.set_xlabel("step")
    ax.set_ylabel("live activation memory (MiB)")
    ax.set_title(title or "memory over the schedule")
    ax.legend(loc="best")
    fig.tight_layout()
    save_figure(fig, path)


def plot_heap(
    measured: Mapping[str, Sequence[int]], predicted: Mapping[str, Sequence[int]], path: str | os.PathLike,
    title: str = "",
) -> None:
    """Measured live heap (MiB) over one run beside the predicted activation memory, per model.

    The two have different clocks (allocation events vs scheduled ops), so each
    is drawn over the fraction of its run; the peaks are what compares.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, label in enumerate(dict.fromkeys([*measured, *predicted])):
        color = colors[i % len(colors)]
        for curve, style, what in ((measured.get(label), "-", "measured heap"),
                                   (predicted.get(label), "--", "predicted")):
            if curve is None or len(curve) == 0:
                continue
            mib = [v / 2**20 for v in curve]
            x = [k / max(len(mib) - 1, 1) for k in range(len(mib))]
            ax.plot(x, mib, style, color=color, linewidth=1,
                    label=f"{label}, {what} (peak {max(mib):.2f} MiB)")
    ax.set_xlabel("fraction of the run (measured: allocation events; predicted: ops)")
    ax.set_ylabel("live bytes (MiB), caller inputs excluded")
    ax.set_title(title or "live heap: measured vs predicted")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
