"""Layer-by-layer search over scheduled-set states, shared by ``beam`` and ``exact``.

Layer ``t`` holds states whose set has ``t`` more ops than the start state.  Each
layer is expanded (every ready op of every state), collapsed (one state per set,
the lowest peak) and, for beam search, cut to the ``width`` best by (peak, live).
With no width cap and a ``cutoff`` (the incumbent's peak) it is the exact dynamic
program of paper 000 appendix C.3 with branch-and-bound pruning.  Back-pointers
kept per layer rebuild the order of the best final state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onnx_sched.jit import work_clock
from onnx_sched.passes.order._kernels import (
    KernelGraph,
    collapse_kernel,
    expand_kernel,
    materialize_kernel,
    select_children,
)

__all__ = ["Layer", "SearchResult", "layered_search", "start_layer", "zobrist_keys"]


@dataclass
class Layer:
    """States of one layer: set and frontier bitsets, peak so far, live bytes, set hashes."""

    S: np.ndarray
    F: np.ndarray
    peak: np.ndarray
    live: np.ndarray
    h1: np.ndarray
    h2: np.ndarray

    def __len__(self) -> int:
        return len(self.peak)


@dataclass(frozen=True)
class SearchResult:
    """``order``: ops added after the start state by the best complete state (``None`` when
    every state was pruned or the search stopped; a beam that not even width 1 lets finish in
    time hands back its best state's ops so far, not ``complete``).  ``peak``: its peak (clamped below by the
    floor).  ``complete``: all layers were expanded without a width cap being hit
    (``exhaustive``) or with one (beam).  ``bound``: for exhaustive runs, a proven lower bound
    on the best peak reachable from the start (capped at the cutoff)."""

    order: np.ndarray | None
    peak: int | None
    complete: bool
    exhaustive: bool
    bound: int
    layers_done: int
    max_states: int
    widths: tuple[int, ...]
    shrunk: bool = False  # a beam whose width was cut to meet the deadline


def zobrist_keys(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two independent random 64-bit keys per op (set hash = XOR of its ops' keys)."""
    rng = np.random.default_rng([seed, 0x5EED])
    hi = np.iinfo(np.uint64).max
    return rng.integers(0, hi, size=n, dtype=np.uint64, endpoint=True), rng.integers(
        0, hi, size=n, dtype=np.uint64, endpoint=True
    )


def start_layer(kg: KernelGraph, prefix: Sequence[int] | np.ndarray, live: int, peak: int, z1: np.ndarray, z2: np.ndarray) -> Layer:
    """A one-state layer whose set is ``prefix`` (a downward-closed set of ops)."""
    n, words = kg.n, kg.words
    in_set = np.zeros(n, dtype=bool)
    prefix = np.asarray(prefix, dtype=np.int64)
    in_set[prefix] = True
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(kg.pred_ptr))
    blocked = np.zeros(n, dtype=bool)
    blocked[dst[~in_set[kg.pred_idx]]] = True  # some predecessor not yet run
    ready = ~in_set & ~blocked
    return Layer(
        S=_pack(in_set, words),
        F=_pack(ready, words),
        peak=np.array([peak], dtype=np.int64),
        live=np.array([live], dtype=np.int64),
        h1=np.array([np.bitwise_xor.reduce(z1[prefix]) if len(prefix) else 0], dtype=np.uint64),
        h2=np.array([np.bitwise_xor.reduce(z2[prefix]) if len(prefix) else 0], dtype=np.uint64),
    )


def _pack(mask: np.ndarray, words: int) -> np.ndarray:
    padded = np.zeros(words * 64, dtype=np.uint64)
    padded[: len(mask)] = mask
    weights = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))
    return (padded.reshape(words, 64) * weights).sum(axis=1, dtype=np.uint64).reshape(1, words)


def layered_search(
    kg: KernelGraph,
    start: Layer,
    steps: int,
    *,
    z1: np.ndarray,
    z2: np.ndarray,
    width: int | None = None,
    floor: int = 0,
    cutoff: int = np.iinfo(np.int64).max,
    deadline: float | None = None,
    max_states: int | None = None,
    max_total: int | None = None,
    max_candidates: int | None = None,
    shrink_to_fit: bool = False,
) -> SearchResult:
    """Expand ``steps`` layers from ``start``.

    ``width=None``: exhaustive DP (stops, incomplete, at ``deadline`` (a
    ``onnx_sched.jit.work_clock`` value), when a layer would exceed ``max_states`` or the
    states kept over all layers would exceed ``max_total``, or a layer would have more
    than ``max_candidates`` children before collapsing; it also stops when the next
    layer is predicted to end past the deadline).  With
    a width: beam search; with ``shrink_to_fit`` the width shrinks whenever the
    projected time of the remaining layers passes the deadline, down to 1 (greedy by
    (peak, live)); when width 1 is still projected past it the search stops and returns the
    best state's ops so far (``complete`` false) for the caller to finish.
    """
    layer = start
    bps: list[tuple[np.ndarray, np.ndarray]] = []
    widths: list[int] = []
    cur_width = width
    biggest = len(layer)
    ex_args, live_args, adj_args = kg.expand_args(), kg.live_args(), kg.adj_args()
    t1, expanded, shrunk = 0.0, 0, False
    for t in range(steps):
        if len(layer) == 0:
            break
        n_parents = len(layer)
        tl = work_clock()
        max_cand = -1 if max_candidates is None else int(max_candidates)
        cpar, cop, cpeak, ch1, ch2 = expand_kernel(
            layer.S, layer.F, layer.peak, layer.live, layer.h1, layer.h2, np.int64(floor), np.int64(cutoff),
            np.int64(max_cand), z1, z2, *ex_args
        )
        if max_cand >= 0 and len(cpar) == 0 and layer.F.any():
            if _could_have_children(layer, max_cand):
                return _stopped(layer, cutoff, t, biggest, widths)
        idx = collapse_kernel(cpeak, ch1, ch2)
        if cur_width is None:
            kept = sum(widths) + len(idx)
            if (max_states is not None and len(idx) > max_states) or (max_total is not None and kept > max_total):
                return _stopped(layer, cutoff, t, biggest, widths)
            sel = idx
        else:
            sel = select_children(idx, cpar, cop, cpeak, int(cur_width), layer.S, layer.live, *live_args)
        S, F, peak, live, h1, h2, bp_par, bp_op = materialize_kernel(
            sel, layer.S, layer.F, layer.live, cpar, cop, cpeak, ch1, ch2, *adj_args, *live_args
        )
        layer = Layer(S, F, peak, live, h1, h2)
        bps.append((bp_par, bp_op))
        widths.append(len(layer))
        biggest = max(biggest, len(layer))
        now = work_clock()
        if deadline is not None and t + 1 < steps:
            if cur_width is None:
                growth = len(layer) / max(n_parents, 1)
                if now + (now - tl) * max(growth, 1.0) > deadline:
                    return _stopped(layer, cutoff, t + 1, biggest, widths)
            elif shrink_to_fit:
                # seconds per expanded state, measured after the first layer (which may load kernels)
                if t == 0:
                    t1, expanded = now, 0
                else:
                    expanded += n_parents
                    per_state = (now - t1) / max(expanded, 1)
                    left_layers = steps - t - 1
                    fit = 0.8 * max(deadline - now, 0.0) / left_layers / max(per_state, 1e-9)
                    if fit < 1 and cur_width == 1 and len(layer):  # not even width 1 fits: the best state's prefix
                        return _prefix(layer, bps, biggest, widths)
                    cur_width = int(max(1, min(width, fit)))
                    shrunk = shrunk or cur_width < width
    if len(layer) == 0:
        return SearchResult(None, None, True, cur_width is None, int(cutoff), len(bps), biggest, tuple(widths))
    best, order = _best_path(layer, bps)
    best_peak = int(layer.peak[best])
    exhaustive = cur_width is None
    return SearchResult(order, best_peak, True, exhaustive, best_peak if exhaustive else 0, len(bps), biggest, tuple(widths), shrunk)


def _best_path(layer: Layer, bps: list[tuple[np.ndarray, np.ndarray]]) -> tuple[int, np.ndarray]:
    """The best state of ``layer`` by (peak, live) and the ops that led to it, rebuilt from the back-pointers."""
    best = int(np.lexsort((layer.live, layer.peak))[0])
    order = np.empty(len(bps), dtype=np.int64)
    j = best
    for t in range(len(bps) - 1, -1, -1):
        bp_par, bp_op = bps[t]
        order[t] = bp_op[j]
        j = int(bp_par[j])
    return best, order


def _prefix(layer: Layer, bps: list[tuple[np.ndarray, np.ndarray]], biggest: int, widths: list[int]) -> SearchResult:
    """A beam stopped for time at width 1: the best state's ops so far, ``complete`` false (the caller
    finishes the order)."""
    best, order = _best_path(layer, bps)
    return SearchResult(order, int(layer.peak[best]), False, False, 0, len(bps), biggest, tuple(widths), True)


def _could_have_children(layer: Layer, max_cand: int) -> bool:
    """True when the empty expansion was the candidate budget, not pruning."""
    return int(np.unpackbits(layer.F.view(np.uint8)).sum()) > max_cand


def _stopped(layer: Layer, cutoff: int, done: int, biggest: int, widths: list[int]) -> SearchResult:
    """An exhaustive search cut short: every order passes through some state of ``layer``
    (or was pruned at >= cutoff), so the lowest state peak bounds the optimum."""
    bound = int(min(int(layer.peak.min()), cutoff)) if len(layer) else int(cutoff)
    return SearchResult(None, None, False, True, bound, done, biggest, tuple(widths))
