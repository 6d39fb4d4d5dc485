"""Plots for reports (matplotlib is an optional extra: ``pip install onnx-sched[plot]``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from onnx_sched.cost.memory import MemoryProfile
from onnx_sched.errors import OnnxSchedError

__all__ = ["plot_memory", "pyplot"]


def pyplot():  # noqa: ANN201
    """matplotlib.pyplot on the Agg backend, or a one-line error naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise OnnxSchedError("plotting needs matplotlib: pip install 'onnx-sched[plot]'") from None
    return plt


def plot_memory(profiles: Mapping[str, MemoryProfile], path: str | os.PathLike, title: str = "") -> None:
    """Live memory (MiB) at every step for each labelled order, peaks marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for label, prof in profiles.items():
        mib = prof.step / 2**20
        ax.plot(range(len(mib)), mib, label=f"{label} (peak {prof.peak / 2**20:.1f} MiB)", linewidth=1)
        ax.scatter([prof.peak_step], [prof.peak / 2**20], s=14)
    ax.set_xlabel("step")
    ax.set_ylabel("live activation memory (MiB)")
    ax.set_title(title or "memory over the schedule")
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=120)
    plt.close(fig)
