"""Min-cut repair: lower an order's peak by rebuilding it around its peak step.

At a step where the order peaks, the op ``v`` running there may need less: its least memory over
all orders is a minimum cut (:func:`onnx_sched.cost.memory_cut_bound.least_memory_set`), and the
cut names the set of ops to run before ``v``.  The repair runs exactly that set first (in the
order's own sequence), then ``v``, then everything else (in sequence), and keeps the result when
its peak is lower, or equal at fewer steps.  A rebuild that only moves the peak to another step is
rebuilt again around that step (up to ``LOOKAHEAD`` times) before it is given up.  It repeats from
the new order until no peak step improves, ``max_rounds`` pass or the deadline does.  Every order
it returns is valid and never worse than the one it was given.

It is cheap (a cut and a profile per rebuild, at most 1 + ``LOOKAHEAD`` rebuilds per peak step tried:
milliseconds on a 1,000-op graph) and knows nothing about where the order came from, so it follows
the cheap heuristics, the beams and the learned policy alike.  What it fixes is the mistake a
step-by-step order cannot see coming: ops run early whose outputs wait across a later peak (on
t5_small the learned policy runs decoder ops during the encoder's feed-forward peak: 2.46 -> 2.31 MiB,
the optimum; docs/results.md section 20).
"""

from __future__ import annotations

import numpy as np

from onnx_sched.cost.memory import profile
from onnx_sched.cost.memory_bound import MAX_CLOSURE_OPS
from onnx_sched.cost.memory_cut_bound import least_memory_set
from onnx_sched.graph import Graph
from onnx_sched.jit import work_clock

__all__ = ["repair"]

MAX_ROUNDS = 100
#: Rebuilds in a row that may move the peak before one must lower it.
LOOKAHEAD = 5


def _score(graph: Graph, order: np.ndarray, inplace: bool) -> tuple[tuple[int, int], np.ndarray]:
    step = profile(graph, order, inplace).step
    peak = int(step.max(initial=0))
    return (peak, int((step == peak).sum())), step


def repair(graph: Graph, order: np.ndarray, inplace: bool, *, deadline: float | None = None,
           max_rounds: int = MAX_ROUNDS, lookahead: int = LOOKAHEAD) -> np.ndarray:
    """A valid order with a peak at most ``order``'s (module docstring); ``deadline`` is a
    :func:`onnx_sched.jit.work_clock` value: no rebuild starts that the last one's time says would end past it (a
    rebuild is a max-flow: 0.3-0.7 s on a 20,872-op graph).  A rebuild that moves the peak instead of lowering it is
    rebuilt again around its own peak, up to ``lookahead`` times, before it is given up.  Graphs
    beyond ``MAX_CLOSURE_OPS`` come back as given."""
    order = np.asarray(order, dtype=np.int64)
    if graph.n_ops < 2 or graph.n_ops > MAX_CLOSURE_OPS:
        return order
    last = 0.0  # the last rebuild's seconds: a rebuild that would end past the deadline does not start

    def late() -> bool:
        return deadline is not None and work_clock() + last >= deadline

    def rebuild(o: np.ndarray, k: int, peak: int) -> np.ndarray | None:
        nonlocal last
        began = work_clock()
        out = _rebuilt(graph, o, k, inplace, peak)
        last = work_clock() - began
        return out

    score, step = _score(graph, order, inplace)
    for _ in range(max_rounds):
        improved = False
        for k in np.flatnonzero(step == score[0]).tolist():
            if late():
                return order
            rebuilt = rebuild(order, k, score[0])
            if rebuilt is None:
                continue  # the op at k needs this much in any order
            new_score, new_step = _score(graph, rebuilt, inplace)
            for _ in range(lookahead):  # not better yet: rebuild around the new peak too
                if new_score < score or late():
                    break
                nxt = rebuild(rebuilt, int(np.argmax(new_step)), new_score[0])
                if nxt is None:
                    break
                rebuilt = nxt
                new_score, new_step = _score(graph, rebuilt, inplace)
            if new_score < score:
                order, score, step, improved = rebuilt, new_score, new_step, True
                break
        if not improved:
            break
    return order


def _rebuilt(graph: Graph, order: np.ndarray, k: int, inplace: bool, peak: int) -> np.ndarray | None:
    """``order`` rebuilt around its step ``k``: the cut's before-set, the op, the rest; ``None`` when
    the op needs ``peak`` or more in any order."""
    v = int(order[k])
    least, before = least_memory_set(graph, inplace, v)
    if least >= peak:
        return None
    first = before[order]
    return np.concatenate([order[first], [v], order[~first & (order != v)]])
