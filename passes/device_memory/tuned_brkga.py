"""``tuned-brkga``: BRKGA with the hyper-parameters a grid search chose on training graphs
(paper 003's "Tuned BRKGA" baseline).

The setting (elite bias, the Beta parameters of the mutant distribution,
population / elites / children) is read from the grid search for the problem's device count,
``models/checkpoints/tuned_brkga.json`` for 2 devices and ``tuned_brkga_d{N}.json`` for N, written by
``python benchmarks/tune_brkga.py [--devices N]``; a count never tuned takes the two-device setting (the
report's ``details.tuned_for_devices`` says which).  Every gene gets the same Beta and elite bias.  Same
evaluation budget as ``brkga`` (option ``evaluations``, default 5,000), and the same ``tidy`` afterwards (fewer
bytes moved at the same peak).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.brkga import BrkgaParams, GeneDistributions
from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.errors import OnnxSchedError
from onnx_sched.graph import Graph
from onnx_sched.models import CHECKPOINTS
from onnx_sched.passes import PassContext, register
from onnx_sched.passes.device_memory._common import problem_of, schedule_of_keys
from onnx_sched.passes.device_memory.brkga import solve
from onnx_sched.passes.device_memory.local_search import tidy_transfers
from onnx_sched.schedule import Schedule

__all__ = ["TUNED", "run", "setting_file", "tuned_setting"]

TUNED = CHECKPOINTS / "tuned_brkga.json"


def setting_file(n_devices: int) -> Path:
    """Where the grid search for ``n_devices`` devices writes its setting.

    >>> setting_file(3).name
    'tuned_brkga_d3.json'
    """
    return TUNED if n_devices == 2 else CHECKPOINTS / f"tuned_brkga_d{n_devices}.json"


@lru_cache(maxsize=4)
def tuned_setting(n_devices: int = 2) -> tuple[dict[str, Any], int]:
    """(best setting, device count it was tuned for): the grid search for ``n_devices``, else the two-device one;
    one-line error when that file is missing or unreadable."""
    path = setting_file(n_devices)
    tuned_for = n_devices if path.is_file() else 2
    path = setting_file(tuned_for)
    try:
        return json.loads(path.read_text())["best"], tuned_for
    except (OSError, KeyError, ValueError) as exc:
        raise OnnxSchedError(f"tuned-brkga needs {path} (python benchmarks/tune_brkga.py --devices {tuned_for} "
                             f"--out {path}): {exc}") from None


@register("tuned-brkga", objective="peak-mem-devices")
def run(graph: Graph, ctx: PassContext) -> Schedule:
    problem = problem_of(graph, ctx)
    best, tuned_for = tuned_setting(problem.n_devices)
    n = dm.chromosome_size(problem)
    params = BrkgaParams(population=int(best["population"]), elites=int(best["elites"]),
                         children=int(best["children"]), elite_bias=float(best["elite_bias"]),
                         evaluations=int(ctx.option("evaluations", 5000)))
    dist = GeneDistributions(alpha=np.full(n, float(best["alpha"])), beta=np.full(n, float(best["beta"])),
                             rho=np.full(n, params.elite_bias))
    clock = Deadline(ctx.time_limit)
    result = solve(problem, params, seed=ctx.seed, deadline=clock, distributions=dist)
    keys, tidied = tidy_transfers(problem, result.best_keys, ctx, clock)
    return schedule_of_keys(problem, keys, "tuned-brkga", evaluations=result.evaluations, tidy_evaluations=tidied,
                            tuned_for_devices=tuned_for,
                            setting={k: best[k] for k in ("elite_bias", "alpha", "beta", "population", "elites",
                                                          "children")})
