"""Numba kernels of the peak-memory state searches (beam search, exact DP).

A state is the *set* of ops scheduled so far, stored as ``uint64`` words, plus its frontier (ready ops) as
a second bitset, the peak so far and the live bytes.  The live bytes after a set of ops depend only on the
set, so two partial orders with the same set differ only in their peak and the one with the lower peak
dominates (paper 000, "state collapsing").  Sets are identified by two independent 64-bit Zobrist hashes
(XOR of a random key per op), compared together.

The bitset step (:func:`_child_cost`) is the same model as :func:`onnx_sched.cost.memory.step_kernel`: an
input is freed when every other consumer of it is already in the set, and in-place reuse takes the first
candidate input that dies at this op.  Tests check both agree with
:func:`onnx_sched.cost.memory.peak_memory`.  The list schedulers (greedy, random orders) are
:mod:`onnx_sched.passes.order._list_kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

from onnx_sched.cost.memory import memory_arrays
from onnx_sched.dag_kernels import popcount
from onnx_sched.graph import Graph

_ONE = np.uint64(1)


@dataclass(frozen=True, eq=False)
class KernelGraph:
    """Flat arrays of a graph for the search kernels (memory model + op adjacency)."""

    n: int
    words: int
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    in_ptr: np.ndarray
    in_idx: np.ndarray
    out_ptr: np.ndarray
    out_idx: np.ndarray
    size: np.ndarray
    n_consumers: np.ndarray
    keep: np.ndarray
    param: np.ndarray
    ip_ptr: np.ndarray
    ip_idx: np.ndarray
    cons_ptr: np.ndarray  # per tensor, (word, mask) pairs covering its consumer ops
    cons_word: np.ndarray
    cons_mask: np.ndarray
    alloc: np.ndarray  # per op, bytes of its outputs
    kept_out: np.ndarray  # per op, bytes of its outputs that stay live after it (read later or kept)
    sure_free: np.ndarray  # per op, bytes of inputs only it reads (freed after it in any order)
    grp_ptr: np.ndarray  # per op, groups = its other inputs that die at it iff all other readers ran
    grp_size: np.ndarray
    grp_mptr: np.ndarray  # per group, its copied (word, mask) pairs of the other readers
    grp_word: np.ndarray
    grp_mask: np.ndarray
    grp_tensor: np.ndarray  # per group, -1 (pairs copied) or the tensor whose readers ``cons_*`` hold
    base: int

    def mem_args(self) -> tuple:
        """Arguments of ``step_kernel`` after ``(op, remaining, live)``."""
        return (
            self.in_ptr, self.in_idx, self.out_ptr, self.out_idx, self.size, self.n_consumers,
            self.keep, self.param, self.ip_ptr, self.ip_idx,
        )

    def expand_args(self) -> tuple:
        """Graph arguments of :func:`expand_kernel`."""
        return (self.alloc, self.param, self.size, self.ip_ptr, self.ip_idx, self.cons_ptr, self.cons_word, self.cons_mask)

    def live_args(self) -> tuple:
        """Graph arguments of :func:`_child_live` (and the kernels that call it)."""
        return (self.kept_out, self.sure_free, self.grp_ptr, self.grp_size, self.grp_mptr, self.grp_word,
                self.grp_mask, self.grp_tensor, self.cons_ptr, self.cons_word, self.cons_mask)

    def adj_args(self) -> tuple:
        return (self.pred_ptr, self.pred_idx, self.succ_ptr, self.succ_idx)


def kernel_graph(g: Graph, inplace: bool) -> KernelGraph:
    """The arrays the search kernels need (memory model from :func:`memory_arrays`).  The last two (graph,
    in-place) pairs' are kept: every beam width and exact round of one search reuses them."""
    return _kernel_graph_cached(g, bool(inplace))


@lru_cache(maxsize=2)
def _kernel_graph_cached(g: Graph, inplace: bool) -> KernelGraph:
    return _build_kernel_graph(g, inplace)


def _build_kernel_graph(g: Graph, inplace: bool) -> KernelGraph:
    a = memory_arrays(g, inplace)
    cons_ptr, cons_word, cons_mask = _consumer_masks(g)
    i64 = lambda x: np.ascontiguousarray(x, dtype=np.int64)  # noqa: E731
    return KernelGraph(
        n=g.n_ops,
        words=max(1, (g.n_ops + 63) // 64),
        pred_ptr=i64(g.op_preds.indptr), pred_idx=i64(g.op_preds.indices),
        succ_ptr=i64(g.op_succs.indptr), succ_idx=i64(g.op_succs.indices),
        in_ptr=i64(a.in_ptr), in_idx=i64(a.in_idx), out_ptr=i64(a.out_ptr), out_idx=i64(a.out_idx),
        size=i64(a.size), n_consumers=i64(a.n_consumers), keep=np.ascontiguousarray(a.keep, dtype=np.bool_),
        param=i64(a.param), ip_ptr=i64(a.inplace_ptr), ip_idx=i64(a.inplace_idx),
        cons_ptr=cons_ptr, cons_word=cons_word, cons_mask=cons_mask,
        alloc=i64([a.size[a.out_idx[a.out_ptr[v] : a.out_ptr[v + 1]]].sum() for v in range(g.n_ops)]),
        **_live_groups(g, a, cons_ptr, cons_word, cons_mask),
        base=int(a.base),
    )


#: A group copies its tensor's reader pairs (without the op's bit) when there are at most this many; past it, it
#: refers to the tensor's own pairs.  Copies are the faster test (the beam's hottest loop), references keep a
#: tensor read by thousands of ops from being copied for each of them.
COPIED_PAIRS_MAX = 8


def _live_groups(g: Graph, a, cons_ptr: np.ndarray, cons_word: np.ndarray,
                 cons_mask: np.ndarray) -> dict[str, np.ndarray]:
    """Per-op tables for the live bytes after an op, given the set already run.

    ``I_t`` does not depend on in-place reuse (a reused input dies at the op like
    any other), so after op ``v``: ``live + kept_out[v] - sure_free[v]`` minus every
    other input whose other readers are all in the set.  Each such input is a
    group of (word, mask) pairs over its other readers: its readers' pairs
    (:func:`_consumer_masks`) without ``v``'s bit, copied when there are at most :data:`COPIED_PAIRS_MAX`, else
    read from the tensor's own with ``v``'s bit taken as set.  Copying them all took 71 million pairs (1.1 GB,
    2 s) on a 14,237-op sbm graph whose largest tensor has 10,250 readers, and 12 GB on a 53,101-op one."""
    i64 = lambda x: np.ascontiguousarray(x, dtype=np.int64)  # noqa: E731
    kept_out, sure_free, grp_ptr, grp_size, grp_mptr, grp_word, grp_mask, grp_tensor = _live_group_tables(
        g.n_ops, i64(a.in_ptr), i64(a.in_idx), i64(a.out_ptr), i64(a.out_idx), i64(a.size), i64(a.n_consumers),
        np.ascontiguousarray(a.keep, dtype=np.bool_), cons_ptr, cons_word, cons_mask, COPIED_PAIRS_MAX)
    return {"kept_out": kept_out, "sure_free": sure_free, "grp_ptr": grp_ptr, "grp_size": grp_size,
            "grp_mptr": grp_mptr, "grp_word": grp_word, "grp_mask": grp_mask, "grp_tensor": grp_tensor}


@numba.njit(cache=True)
def _live_group_tables(n, in_ptr, in_idx, out_ptr, out_idx, size, n_consumers, keep, cons_ptr, cons_word,  # noqa: ANN001, ANN202
                       cons_mask, copied_max):
    """The arrays of :func:`_live_groups`: a counting pass, then a filling pass."""
    n_groups = n_pairs = 0
    for v in range(n):
        for i in range(in_ptr[v], in_ptr[v + 1]):
            t = in_idx[i]
            if keep[t] or size[t] == 0 or n_consumers[t] <= 1:
                continue
            n_groups += 1
            if cons_ptr[t + 1] - cons_ptr[t] <= copied_max:
                n_pairs += cons_ptr[t + 1] - cons_ptr[t]
    kept_out = np.zeros(n, np.int64)
    sure_free = np.zeros(n, np.int64)
    grp_ptr = np.zeros(n + 1, np.int64)
    grp_size = np.empty(n_groups, np.int64)
    grp_mptr = np.zeros(n_groups + 1, np.int64)
    grp_word = np.empty(n_pairs, np.int64)
    grp_mask = np.empty(n_pairs, np.uint64)
    grp_tensor = np.full(n_groups, -1, np.int64)
    gi = pi = 0
    for v in range(n):
        w_v, bit_v = v >> 6, _ONE << np.uint64(v & 63)
        for i in range(out_ptr[v], out_ptr[v + 1]):
            t = out_idx[i]
            if n_consumers[t] != 0 or keep[t]:
                kept_out[v] += size[t]
        for i in range(in_ptr[v], in_ptr[v + 1]):
            t = in_idx[i]
            if keep[t] or size[t] == 0:
                continue
            if n_consumers[t] <= 1:  # read by v alone (each reader counted once): it dies at v in any order
                sure_free[v] += size[t]
                continue
            if cons_ptr[t + 1] - cons_ptr[t] > copied_max:
                grp_tensor[gi] = t
            else:
                for j in range(cons_ptr[t], cons_ptr[t + 1]):
                    mask = cons_mask[j] & ~bit_v if cons_word[j] == w_v else cons_mask[j]
                    if mask:
                        grp_word[pi], grp_mask[pi] = cons_word[j], mask
                        pi += 1
            grp_size[gi] = size[t]
            gi += 1
            grp_mptr[gi] = pi
        grp_ptr[v + 1] = gi
    return kept_out, sure_free, grp_ptr, grp_size, grp_mptr, grp_word[:pi].copy(), grp_mask[:pi].copy(), grp_tensor


def _consumer_masks(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each tensor's consumer ops as (word index, bit mask) pairs, words ascending: "are all consumers
    scheduled" becomes a few word tests instead of one test per consumer."""
    cons = g.tensor_consumers
    return _consumer_mask_tables(g.n_ops, g.n_tensors, np.ascontiguousarray(cons.indptr, dtype=np.int64),
                                 np.ascontiguousarray(cons.indices, dtype=np.int64))


@numba.njit(cache=True)
def _consumer_mask_tables(n, n_tensors, cons_ptr, cons_idx):  # noqa: ANN001, ANN202
    acc = np.zeros(max(1, (n + 63) // 64), np.uint64)
    touched = np.empty(len(acc), np.int64)
    ptr = np.zeros(n_tensors + 1, np.int64)
    words = np.empty(len(cons_idx), np.int64)  # at most one pair per consumer
    masks = np.empty(len(cons_idx), np.uint64)
    m = 0
    for t in range(n_tensors):
        k = 0
        for i in range(cons_ptr[t], cons_ptr[t + 1]):
            c = cons_idx[i]
            w = c >> 6
            if acc[w] == 0:
                touched[k] = w
                k += 1
            acc[w] |= _ONE << np.uint64(c & 63)
        touched[:k].sort()
        for j in range(k):
            words[m], masks[m] = touched[j], acc[touched[j]]
            acc[touched[j]] = 0
            m += 1
        ptr[t + 1] = m
    return ptr, words[:m].copy(), masks[:m].copy()


# ------------------------------------------------------------------ bitset search
@numba.njit(cache=True, inline="always")
def _has(row, v):
    return (row[v >> 6] >> np.uint64(v & 63)) & _ONE


@numba.njit(cache=True, inline="always")
def _only_left(t, v, row, cons_ptr, cons_word, cons_mask):
    """True when every consumer of tensor ``t`` other than ``v`` is in ``row``."""
    vw = v >> 6
    for k in range(cons_ptr[t], cons_ptr[t + 1]):
        w = cons_word[k]
        m = cons_mask[k]
        r = row[w]
        if w == vw:
            r |= _ONE << np.uint64(v & 63)
        if (r & m) != m:
            return False
    return True


@numba.njit(cache=True, inline="always")
def _reused(row, v, ip_ptr, ip_idx, cons_ptr, cons_word, cons_mask):
    """The in-place input ``v`` would overwrite after the set ``row`` (-1: none)."""
    for k in range(ip_ptr[v], ip_ptr[v + 1]):
        t = ip_idx[k]
        if _only_left(t, v, row, cons_ptr, cons_word, cons_mask):
            return t
    return -1


@numba.njit(cache=True)
def _child_live(S, p, v, live, kept_out, sure_free, grp_ptr, grp_size, grp_mptr, grp_word, grp_mask, grp_tensor,
                cons_ptr, cons_word, cons_mask):
    """``I_t`` (live bytes) after running ``v`` after the set ``S[p]`` (same model as ``step_kernel``)."""
    after = live + kept_out[v] - sure_free[v]
    for g in range(grp_ptr[v], grp_ptr[v + 1]):
        dies = True
        t = grp_tensor[g]
        if t < 0:
            for q in range(grp_mptr[g], grp_mptr[g + 1]):
                m = grp_mask[q]
                if (S[p, grp_word[q]] & m) != m:
                    dies = False
                    break
        else:  # a tensor with many readers: its own pairs, ``v``'s bit taken as set
            vw, vbit = v >> 6, _ONE << np.uint64(v & 63)
            for k in range(cons_ptr[t], cons_ptr[t + 1]):
                w = cons_word[k]
                m = cons_mask[k]
                r = S[p, w] | vbit if w == vw else S[p, w]
                if (r & m) != m:
                    dies = False
                    break
        if dies:
            after -= grp_size[g]
    return after


@numba.njit(cache=True)
def expand_kernel(S, F, peak, live, h1, h2, floor, cutoff, max_cand, z1, z2, alloc, param, size, ip_ptr, ip_idx, cons_ptr, cons_word, cons_mask):
    """All children of all states: (parent, op, peak, hash1, hash2).

    A child's peak is ``max(parent peak, M_t, floor)``; children with peak >= ``cutoff``
    are dropped (they cannot beat the incumbent).  Live bytes are computed later, only
    for children that survive collapsing and selection.  When there would be more than
    ``max_cand`` children (``max_cand >= 0``), nothing is expanded and all arrays are
    empty while ``S`` is not: the caller's memory budget is exceeded.
    """
    n_states, words = S.shape
    total = 0
    for k in range(n_states):
        for w in range(words):
            total += popcount(F[k, w])
    if max_cand >= 0 and total > max_cand:
        total = 0
        n_states = 0
    cpar = np.empty(total, np.int32)
    cop = np.empty(total, np.int32)
    cpeak = np.empty(total, np.int64)
    ch1 = np.empty(total, np.uint64)
    ch2 = np.empty(total, np.uint64)
    c = 0
    for k in range(n_states):
        pk = peak[k]
        if floor > pk:
            pk = floor
        lv = live[k]
        for w in range(words):
            bits = F[k, w]
            while bits != np.uint64(0):
                low = bits & (~bits + _ONE)
                v = w * 64 + np.int64(popcount(low - _ONE))
                bits ^= low
                # M_t (written out here: a call to an inlined helper was 20x slower)
                p = lv + alloc[v] + param[v]
                if ip_ptr[v + 1] > ip_ptr[v]:
                    r = _reused(S[k], v, ip_ptr, ip_idx, cons_ptr, cons_word, cons_mask)
                    if r >= 0:
                        p -= size[r]
                if pk > p:
                    p = pk
                if p >= cutoff:
                    continue
                cpar[c] = k
                cop[c] = v
                cpeak[c] = p
                ch1[c] = h1[k] ^ z1[v]
                ch2[c] = h2[k] ^ z2[v]
                c += 1
    return cpar[:c], cop[:c], cpeak[:c], ch1[:c], ch2[:c]


@numba.njit(cache=True)
def collapse_kernel(cpeak, ch1, ch2):
    """Indices of one candidate per distinct set (the lowest peak; first seen on ties), ascending."""
    c = len(cpeak)
    cap = 1
    while cap < (3 * c) // 2 + 2:
        cap *= 2
    mask = np.uint64(cap - 1)
    table = np.full(cap, -1, np.int32)
    for i in range(c):
        slot = np.int64(ch1[i] & mask)
        while True:
            j = table[slot]
            if j < 0:
                table[slot] = i
                break
            if ch1[j] == ch1[i] and ch2[j] == ch2[i]:
                if cpeak[i] < cpeak[j]:
                    table[slot] = i
                break
            slot = (slot + 1) & (cap - 1)
    winner = np.zeros(c, np.bool_)
    for s in range(cap):
        if table[s] >= 0:
            winner[table[s]] = True
    return np.flatnonzero(winner)


def select_children(idx: np.ndarray, cpar: np.ndarray, cop: np.ndarray, cpeak: np.ndarray, k: int, S: np.ndarray,
                    live: np.ndarray, *live_args: np.ndarray) -> np.ndarray:
    """The ``k`` candidates of ``idx`` (ascending) with the lowest (peak, live after), ascending; ties in index order.

    Live bytes are computed only for the candidates tied at the peak threshold.  The thresholds
    are selected by numpy (introselect, linear in the worst case): numba's ``np.partition`` is a
    plain quickselect, and on the peaks of a wide beam (sbm-80, width 400,000: a million
    candidates) one call took 3.7 s against numpy's 1 ms.
    """
    if len(idx) <= k:
        return idx
    peaks = cpeak[idx]
    thr = np.partition(peaks, k - 1)[k - 1]
    less = peaks < thr
    tie = peaks == thr
    need = k - int(less.sum())
    if int(tie.sum()) == need:
        return idx[less | tie]
    tie_pos = idx[tie]
    tie_live = _tie_live(tie_pos, cpar, cop, S, live, *live_args)
    lthr = np.partition(tie_live, need - 1)[need - 1]
    take = tie_live < lthr
    take[np.flatnonzero(tie_live == lthr)[: need - int(take.sum())]] = True
    return np.sort(np.concatenate((idx[less], tie_pos[take])))


@numba.njit(cache=True)
def _tie_live(pos, cpar, cop, S, live, kept_out, sure_free, grp_ptr, grp_size, grp_mptr, grp_word, grp_mask,
              grp_tensor, cons_ptr, cons_word, cons_mask):
    """Live bytes after each candidate ``pos[i]`` (its parent's set plus its op)."""
    out = np.empty(len(pos), np.int64)
    for i in range(len(pos)):
        j = pos[i]
        p = cpar[j]
        out[i] = _child_live(S, p, np.int64(cop[j]), live[p], kept_out, sure_free, grp_ptr, grp_size, grp_mptr,
                             grp_word, grp_mask, grp_tensor, cons_ptr, cons_word, cons_mask)
    return out


@numba.njit(cache=True)
def materialize_kernel(sel, S, F, live, cpar, cop, cpeak, ch1, ch2, pred_ptr, pred_idx, succ_ptr, succ_idx,
                       kept_out, sure_free, grp_ptr, grp_size, grp_mptr, grp_word, grp_mask, grp_tensor, cons_ptr,
                       cons_word, cons_mask):
    """Build the selected children: set and frontier bitsets, peak, live, hashes, back-pointers."""
    m = len(sel)
    words = S.shape[1]
    S2 = np.empty((m, words), np.uint64)
    F2 = np.empty((m, words), np.uint64)
    peak2 = np.empty(m, np.int64)
    live2 = np.empty(m, np.int64)
    h1 = np.empty(m, np.uint64)
    h2 = np.empty(m, np.uint64)
    bp_par = np.empty(m, np.int32)
    bp_op = np.empty(m, np.int32)
    for j in range(m):
        i = sel[j]
        p = cpar[i]
        v = np.int64(cop[i])
        live2[j] = _child_live(S, p, v, live[p], kept_out, sure_free, grp_ptr, grp_size, grp_mptr, grp_word,
                               grp_mask, grp_tensor, cons_ptr, cons_word, cons_mask)
        for w in range(words):
            S2[j, w] = S[p, w]
            F2[j, w] = F[p, w]
        S2[j, v >> 6] |= _ONE << np.uint64(v & 63)
        F2[j, v >> 6] &= ~(_ONE << np.uint64(v & 63))
        for k in range(succ_ptr[v], succ_ptr[v + 1]):
            x = succ_idx[k]
            ok = True
            for q in range(pred_ptr[x], pred_ptr[x + 1]):
                if _has(S2[j], pred_idx[q]) == 0:
                    ok = False
                    break
            if ok:
                F2[j, x >> 6] |= _ONE << np.uint64(x & 63)
        peak2[j] = cpeak[i]
        h1[j] = ch1[i]
        h2[j] = ch2[i]
        bp_par[j] = p
        bp_op[j] = v
    return S2, F2, peak2, live2, h1, h2, bp_par, bp_op
