"""The numba kernels of :mod:`onnx_sched.cost.device_memory` (paper 003, section 3.1).

What a step does to memory is written once (``_run_op``, ``_run_transfer``) and
used by two kernels:

* ``order_kernel`` turns a placement and priorities into steps: a topological
  sort of ops + the transfers the placement implies, highest priority first
  (the chromosome decoding of paper 003, section 3.2.1), scoring it as it goes;
* ``walk_kernel`` runs any given step sequence, checks it (every input present
  on the op's device when it runs) and returns per-device peaks and the live
  bytes of each device after every step.

``evaluate_population`` decodes and scores a whole population of random-key
chromosomes with ``order_kernel``, whose scratch arrays (:class:`Work`) are
allocated once per population and reset per chromosome.

Speed (issue 14, docs/results.md 14.3), every change giving the same steps and peaks:
the decoder and the population loop are compiled without reference counting
(``_nrt=False``: they allocate nothing), because numba counted references (atomic
operations) around every inlined step and heap operation, about half the time; each
chromosome's consumers are grouped by device once (flat loops over the consumer
entries), so releasing a tensor's readers touches only the readers on its device; the
priorities are copied in order before the heap reads them at random; a step's frees
are counted without a branch (whether a tensor leaves is a coin flip).  The ready set is a
binary heap while it is small (most networks hold a few ready items) and a bucket queue once
it reaches ``QUEUE_FROM`` items (wide graphs: ws-500 holds about 51, where the heap was over
half the time): buckets over the chromosome's key range, found by two bit scans; both pop the
smallest (key, item), so the steps are the same.  The hot loops index through ``_ix`` (the same
bits as unsigned), since numba adds a negative-index wraparound to every signed index, which was
about 15-20 % of the time; every index there is non-negative by construction (-1 marks are tested
first).  The decoder does not track which tensors are present: only the walk checks inputs.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

from onnx_sched import dag_kernels


class Work(NamedTuple):
    """The decoder's arrays for one problem (:func:`work_arrays`): scratch, reset per
    chromosome, then per-problem constants."""

    remaining: np.ndarray  # (tensor, device): readers on the device, + outgoing transfers at home
    waits: np.ndarray  # per op: inputs not yet on its device
    home: np.ndarray  # per read tensor: the device it is produced on
    present: np.ndarray  # (tensor, device): there (written and read by the walk's steps)
    live: np.ndarray  # bytes per device
    step_peak: np.ndarray  # bytes per device, the most during the step being walked
    hf: np.ndarray  # the ready heap: keys
    hv: np.ndarray  # the ready heap: op j, or transfer n + t * n_dev + d
    q_mode: np.ndarray  # 1 once this chromosome's ready set outgrew the heap (QUEUE_FROM): the bucket queue holds it
    n_xkey: np.ndarray  # the transfer keys this chromosome wrote (``xkey``'s first entries; the rest is stale)
    q_key: np.ndarray  # the bucket queue, per item (op j, or transfer n + t * n_dev + d): its key while queued
    q_next: np.ndarray  # the bucket queue, per item: the next item in its bucket (-1: the last)
    q_head: np.ndarray  # the bucket queue, per bucket: its first item (-1: empty)
    q_bits: np.ndarray  # the bucket queue: bit b of word w set when bucket 64 w + b holds an item
    q_sum: np.ndarray  # the bucket queue: bit w set when word w of q_bits is not 0
    q_range: np.ndarray  # the bucket queue: the smallest key and buckets per unit of key (this chromosome's)
    hi: np.ndarray  # (tensor, device): where the tensor's readers on the device end in ``readers``
    readers: np.ndarray  # per tensor and device, its readers there (room for all its consumers on each device)
    okey: np.ndarray  # per op: its ready key, -priority
    xkey: np.ndarray  # (transfer slot, device): the ready key of the transfer there
    placement: np.ndarray  # per op: its device (the population's decoder)
    reads: np.ndarray  # the tensors some op reads
    inputs: np.ndarray  # the graph inputs
    n_in: np.ndarray  # per op: its inputs (what it waits for off the host)
    n_graph_in: np.ndarray  # per op: its inputs that are graph inputs (on the host from the start)
    cons_t: np.ndarray  # per consumer entry (``cons_idx``), its tensor
    lo: np.ndarray  # (tensor, device): where the tensor's readers on the device start in ``readers``


SCRATCH = Work._fields.index("reads")  # the fields before it are written before they are read: no zeroing


def work_arrays(n_dev: int, in_ptr: np.ndarray, in_idx: np.ndarray, is_input: np.ndarray,
                cons_ptr: np.ndarray) -> Work:
    """The arrays for a graph (op inputs ``in_ptr``/``in_idx``, consumers ``cons_ptr``) on ``n_dev`` devices."""
    n, n_t = len(in_ptr) - 1, len(is_input)
    ops = np.repeat(np.arange(n, dtype=np.int64), np.diff(in_ptr))
    pairs = n_t * n_dev
    return Work(remaining=np.zeros(pairs, np.int64), waits=np.zeros(n, np.int64), home=np.zeros(n_t, np.int64),
                present=np.zeros(pairs, np.bool_), live=np.zeros(n_dev, np.int64),
                step_peak=np.zeros(n_dev, np.int64),
                hf=np.empty(n + pairs, np.float64), hv=np.empty(n + pairs, np.int64),
                q_mode=np.empty(1, np.int64), n_xkey=np.empty(1, np.int64), q_key=np.empty(n + pairs, np.float64),
                q_next=np.empty(n + pairs, np.int64), q_head=np.empty(QUEUE_BUCKETS, np.int64),
                q_bits=np.empty(QUEUE_BUCKETS // 64, np.int64),
                q_sum=np.empty(1, np.int64), q_range=np.empty(2, np.float64),
                hi=np.zeros(pairs, np.int64), readers=np.zeros(len(in_idx) * n_dev, np.int64),
                okey=np.zeros(n, np.float64), xkey=np.zeros(pairs, np.float64), placement=np.zeros(n, np.int64),
                reads=np.flatnonzero(np.diff(cons_ptr) > 0).astype(np.int64),
                inputs=np.flatnonzero(is_input).astype(np.int64), n_in=np.diff(in_ptr).astype(np.int64),
                n_graph_in=np.bincount(ops, weights=is_input[in_idx], minlength=n).astype(np.int64),
                cons_t=np.repeat(np.arange(n_t, dtype=np.int64), np.diff(cons_ptr)),
                lo=(n_dev * cons_ptr[:-1, None] + np.diff(cons_ptr)[:, None] * np.arange(n_dev)).reshape(-1))


def fresh(work: Work) -> Work:
    """A copy of ``work`` with its own scratch arrays (the constants shared)."""
    return Work(*(np.empty_like(a) for a in work[:SCRATCH]), *work[SCRATCH:])


# dag_kernels' binary heap (ties pop the smaller item first), compiled again to be inlined: its
# calls from kernels compiled without reference counting would otherwise count references
heap_push = numba.njit(inline="always")(dag_kernels.heap_push.py_func)
heap_pop = numba.njit(inline="always")(dag_kernels.heap_pop.py_func)

#: Buckets of the ready queue (a multiple of 64, at most 64 * 64).
QUEUE_BUCKETS = 1024
#: Ready items at which the binary heap hands over to the bucket queue (wide graphs: ws-500 holds about 51).
QUEUE_FROM = 24


@intrinsic
def _trailing_zeros(typingctx, x):  # noqa: ANN001, ANN202, ARG001
    """The trailing zero bits of a nonzero int64 (LLVM's cttz, one instruction)."""
    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202, ARG001
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.int64(types.int64), codegen


@intrinsic
def _ix(typingctx, i):  # noqa: ANN001, ANN202, ARG001
    """A never-negative int64 index as unsigned, the same bits: numba then indexes without the negative-index
    wraparound it adds to every signed index (a shift, an and and a longer chain before each load)."""
    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202, ARG001
        return args[0]

    return types.uintp(types.intp), codegen


@numba.njit(cache=True, inline="always")
def _queue_reset(q_head, q_bits, q_sum):  # noqa: ANN001, ANN202
    for b in range(len(q_head)):
        q_head[b] = -1
    for w in range(len(q_bits)):
        q_bits[w] = 0
    q_sum[0] = 0


@numba.njit(cache=True, inline="always")
def _queue_push(q_key, q_next, q_head, q_bits, q_sum, q_range, nh, key, v):  # noqa: ANN001, ANN202
    """Queue item ``v`` with ``key``; returns the new size.  A bucket queue over the chromosome's key range:
    a smaller key never lies in a later bucket, so the lowest non-empty bucket (two bit scans) holds the
    smallest key."""
    x = (key - q_range[0]) * q_range[1]
    b = 0
    if x > 0:  # NaN stays in bucket 0
        b = len(q_head) - 1 if x >= len(q_head) - 1 else int(x)
    q_key[_ix(v)] = key
    q_next[_ix(v)] = q_head[_ix(b)]
    q_head[_ix(b)] = v
    q_bits[_ix(b >> 6)] |= np.int64(1) << (b & 63)
    q_sum[0] |= np.int64(1) << (b >> 6)
    return nh + 1


@numba.njit(cache=True, inline="always")
def _queue_pop(q_key, q_next, q_head, q_bits, q_sum, nh):  # noqa: ANN001, ANN202
    """Take the item with the smallest (key, item), as a binary heap's pop would; returns (item, new size)."""
    w = _trailing_zeros(q_sum[0])
    b = (w << 6) + _trailing_zeros(q_bits[_ix(w)])
    best = q_head[_ix(b)]
    before = -1  # the item ahead of best in the bucket's list
    prev = best
    v = q_next[_ix(best)]
    while v >= 0:
        if q_key[_ix(v)] < q_key[_ix(best)] or (q_key[_ix(v)] == q_key[_ix(best)] and v < best):
            best = v
            before = prev
        prev = v
        v = q_next[_ix(v)]
    if before < 0:
        q_head[_ix(b)] = q_next[_ix(best)]
    else:
        q_next[_ix(before)] = q_next[_ix(best)]
    if q_head[_ix(b)] < 0:
        q_bits[_ix(w)] &= ~(np.int64(1) << (b & 63))
        if q_bits[_ix(w)] == 0:
            q_sum[0] &= ~(np.int64(1) << w)
    return best, nh - 1


@numba.njit(cache=True)
def homes(placement, producer):  # noqa: ANN001, ANN201
    """The device each tensor is produced on (graph inputs: the host)."""
    home = np.zeros(len(producer), np.int64)
    for t in range(len(producer)):
        if producer[t] >= 0:
            home[t] = placement[producer[t]]
    return home


@numba.njit(cache=True, inline="always")
def _run_op(j, d, live, peak, remaining, present, home, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,  # noqa: ANN001, ANN202
            track):
    """Op ``j`` runs on device ``d``: its outputs (and transient bytes) arrive, then every
    tensor whose last reader on ``d`` this was leaves (kept: inputs and outputs at home).
    ``track``: mark the outputs present on ``d`` (the walk checks inputs; the decoder does not need it)."""
    n_dev = len(live)
    now = live[_ix(d)] + param[_ix(j)]  # live bytes on d, kept in a register
    for k in range(out_ptr[_ix(j)], out_ptr[_ix(j + 1)]):
        t = out_idx[_ix(k)]
        now += size[_ix(t)]
        if track:
            present[_ix(t * n_dev + d)] = True
    if now > peak[_ix(d)]:
        peak[_ix(d)] = now
    now -= param[_ix(j)]
    for k in range(in_ptr[_ix(j)], in_ptr[_ix(j + 1)]):  # branch-free: whether a tensor leaves is a coin flip
        t = in_idx[_ix(k)]
        left = remaining[_ix(t * n_dev + d)] - 1
        remaining[_ix(t * n_dev + d)] = left
        now -= size[_ix(t)] * ((left == 0) & ((not keep[_ix(t)]) | (d != home[_ix(t)])))
    for k in range(out_ptr[_ix(j)], out_ptr[_ix(j + 1)]):
        t = out_idx[_ix(k)]
        now -= size[_ix(t)] * ((remaining[_ix(t * n_dev + d)] == 0) & (not keep[_ix(t)]))
    live[_ix(d)] = now


@numba.njit(cache=True, inline="always")
def _run_transfer(t, h, d, live, peak, remaining, present, size, keep, track):  # noqa: ANN001, ANN202
    """Tensor ``t`` is copied from its home ``h`` to ``d``: it arrives on ``d``, and leaves ``h``
    if this was its last reader there (branch-free).  ``track``: mark it present on ``d``."""
    n_dev = len(live)
    if track:
        present[_ix(t * n_dev + d)] = True
    now = live[_ix(d)] + size[_ix(t)]
    live[_ix(d)] = now
    peak[_ix(d)] = max(peak[_ix(d)], now)
    left = remaining[_ix(t * n_dev + h)] - 1
    remaining[_ix(t * n_dev + h)] = left
    live[_ix(h)] -= size[_ix(t)] * ((left == 0) & (not keep[_ix(t)]))


@numba.njit(cache=True, inline="always")
def _start(inputs, base, peak, live, present, track):  # noqa: ANN001, ANN202
    """Live bytes before the first step, and with ``track`` presence: graph inputs on the host."""
    n_dev = len(live)
    if track:
        for i in range(len(present)):
            present[i] = False
        for t in inputs:
            present[t * n_dev] = True
    for d in range(n_dev):
        live[d] = 0
    live[0] = base
    for d in range(n_dev):
        peak[d] = live[d]


@numba.njit(cache=True, inline="always")
def _queue_start(work, nh):  # noqa: ANN001, ANN202
    """The ready set reached QUEUE_FROM items: bucket the chromosome's key range and move the heap's items
    into the bucket queue, which holds the ready set from here to the end of the chromosome."""
    low, high = np.inf, -np.inf
    for k in work.okey:
        low = min(low, k)
        high = max(high, k)
    for i in range(work.n_xkey[0]):
        low = min(low, work.xkey[i])
        high = max(high, work.xkey[i])
    work.q_range[0] = low
    work.q_range[1] = (len(work.q_head) - 1) / (high - low) if high > low else 0.0
    _queue_reset(work.q_head, work.q_bits, work.q_sum)
    for i in range(nh):
        _queue_push(work.q_key, work.q_next, work.q_head, work.q_bits, work.q_sum, work.q_range, 0, work.hf[i],
                    work.hv[i])
    work.q_mode[0] = 1


@numba.njit(cache=True, inline="always")
def _ready_push(work, nh, key, v):  # noqa: ANN001, ANN202
    """Item ``v`` is ready: into the binary heap while the ready set is small (most networks), into the
    bucket queue once it is wide; returns the new size."""
    if work.q_mode[0] == 0:
        if nh < QUEUE_FROM:
            return heap_push(work.hf, work.hv, nh, key, v)
        _queue_start(work, nh)
    return _queue_push(work.q_key, work.q_next, work.q_head, work.q_bits, work.q_sum, work.q_range, nh, key, v)


@numba.njit(cache=True, inline="always")
def _ready_pop(work, nh):  # noqa: ANN001, ANN202
    """The ready item with the smallest (key, item) and the new size (both structures pop the same)."""
    if work.q_mode[0] == 0:
        return heap_pop(work.hf, work.hv, nh)
    return _queue_pop(work.q_key, work.q_next, work.q_head, work.q_bits, work.q_sum, nh)


@numba.njit(cache=True, inline="always")
def _release_readers(td, lo, hi, readers, waits, okey, work, nh):  # noqa: ANN001, ANN202
    """Tensor ``t`` is now on device ``d`` (``td = t * n_dev + d``): readers there wait for one
    input less; queue the ready ones."""
    for c in range(lo[_ix(td)], hi[_ix(td)]):
        j = readers[_ix(c)]
        left = waits[_ix(j)] - 1
        waits[_ix(j)] = left
        if left == 0:
            nh = _ready_push(work, nh, okey[_ix(j)], j)
    return nh


@numba.njit(cache=True, inline="always")
def _prepare(placement, op_prio, xfer_prio, n_dev, producer, cons_idx, work):  # noqa: ANN001, ANN202
    """Per chromosome: the waits, reader counts (+ outgoing transfers at home), homes, readers
    grouped by device and ready keys.  Flat loops, no branch on the placement."""
    remaining, waits, home, lo, hi, readers, okey, xkey = (work.remaining, work.waits, work.home, work.lo, work.hi,
                                                           work.readers, work.okey, work.xkey)
    n_in, n_graph_in, cons_t = work.n_in, work.n_graph_in, work.cons_t
    for j in range(len(placement)):
        waits[j] = n_in[j] - n_graph_in[j] * (placement[j] == 0)  # a graph input is on the host from the start
        okey[j] = -op_prio[j]
    for i in range(len(xfer_prio)):
        xkey[i] = -xfer_prio[i]
    work.q_mode[0] = 0
    work.n_xkey[0] = len(xfer_prio)
    for i in range(len(hi)):
        hi[i] = lo[i]
    for c in range(len(cons_idx)):
        j = cons_idx[c]
        td = cons_t[c] * n_dev + placement[_ix(j)]
        readers[_ix(hi[_ix(td)])] = j
        hi[_ix(td)] += 1
    for i in range(len(hi)):
        remaining[i] = hi[i] - lo[i]
    for t in work.reads:
        h = placement[_ix(producer[_ix(t)])] if producer[_ix(t)] >= 0 else 0
        home[_ix(t)] = h
        away = 0  # devices other than h reading t: one transfer each
        for d in range(n_dev):
            away += remaining[_ix(t * n_dev + d)] > 0
        remaining[_ix(t * n_dev + h)] += away - (remaining[_ix(t * n_dev + h)] > 0)


@numba.njit(cache=True, _nrt=False)
def order_kernel(placement, op_prio, xfer_prio, slot, n_dev, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,  # noqa: ANN001, ANN201
                 producer, cons_ptr, cons_idx, base, work, kind, item, dev, src, peak):
    """Topological order of ops + the transfers ``placement`` implies, highest priority first
    (transfer (t, d): key ``xfer_prio[slot[t] * n_dev + d]``), walked as it is built: fills the
    step arrays (when they have room) and ``peak`` per device (plus, in an extra last slot if
    ``peak`` has one, the bytes transferred); returns the step count."""
    _prepare(placement, op_prio, xfer_prio, n_dev, producer, cons_idx, work)
    remaining, waits, home, present, live = work.remaining, work.waits, work.home, work.present, work.live
    lo, hi, readers, okey, xkey = work.lo, work.hi, work.readers, work.okey, work.xkey
    n = len(placement)
    _start(work.inputs, base, peak, live, present, False)
    if len(peak) > n_dev:
        peak[n_dev] = 0
    record = len(kind) > 0
    nh = 0
    for j in range(n):
        if waits[j] == 0:
            nh = _ready_push(work, nh, okey[j], j)
    for t in work.inputs:
        for d in range(1, n_dev):
            if remaining[t * n_dev + d] > 0:
                nh = _ready_push(work, nh, xkey[slot[t] * n_dev + d], n + t * n_dev + d)
    steps = 0
    while nh > 0:
        v, nh = _ready_pop(work, nh)
        if v < n:
            d = placement[_ix(v)]
            _run_op(v, d, live, peak, remaining, present, home, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,
                    False)
            if record:
                kind[steps], item[steps], dev[steps], src[steps] = 0, v, d, -1
            for k in range(out_ptr[_ix(v)], out_ptr[_ix(v + 1)]):
                t = out_idx[_ix(k)]
                nh = _release_readers(t * n_dev + d, lo, hi, readers, waits, okey, work, nh)
                for e in range(n_dev):
                    if e != d and remaining[_ix(t * n_dev + e)] > 0:  # read on e: nothing there can have run yet
                        nh = _ready_push(work, nh, xkey[_ix(slot[_ix(t)] * n_dev + e)], n + t * n_dev + e)
        else:
            t = (v - n) // n_dev
            d = (v - n) % n_dev
            h = home[_ix(t)]
            _run_transfer(t, h, d, live, peak, remaining, present, size, keep, False)
            if len(peak) > n_dev:  # a slot past the devices counts the bytes moved
                peak[n_dev] += size[t]
            if record:
                kind[steps], item[steps], dev[steps], src[steps] = 1, t, d, h
            nh = _release_readers(t * n_dev + d, lo, hi, readers, waits, okey, work, nh)
        steps += 1
    return steps


@numba.njit(cache=True)
def walk_kernel(kind, item, dev, src, steps, placement, n_dev, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,  # noqa: ANN001, ANN201
                producer, cons_ptr, cons_idx, base, work, peak, live_trace, during_trace):
    """Run the given steps; fill ``peak`` (per device), ``live_trace`` (live bytes per device after each step) and
    ``during_trace`` (the most bytes on each device while the step runs: an op's inputs, outputs and transient
    bytes at once; the peak is the largest).  Returns -1 if valid, else the index of the first invalid step."""
    remaining, present, live = work.remaining, work.present, work.live
    remaining[:] = 0
    for s in range(steps):
        if kind[s] == 0:
            j = item[s]
            for k in range(in_ptr[j], in_ptr[j + 1]):
                remaining[in_idx[k] * n_dev + dev[s]] += 1
        else:
            remaining[item[s] * n_dev + src[s]] += 1
    _start(work.inputs, base, peak, live, present, True)
    home = homes(placement, producer)
    step_peak = work.step_peak
    for s in range(steps):
        d = dev[s]
        for e in range(n_dev):
            step_peak[e] = live[e]  # the step raises it where it allocates
        if kind[s] == 0:
            j = item[s]
            if placement[j] != d:
                return s
            for k in range(in_ptr[j], in_ptr[j + 1]):
                if not present[in_idx[k] * n_dev + d]:
                    return s
            _run_op(j, d, live, step_peak, remaining, present, home, in_ptr, in_idx, out_ptr, out_idx, size, keep,
                    param, True)
        else:
            t = item[s]
            h = src[s]
            if h != home[t] or h == d or not present[t * n_dev + h] or present[t * n_dev + d]:
                return s
            _run_transfer(t, h, d, live, step_peak, remaining, present, size, keep, True)
        for e in range(n_dev):
            live_trace[s, e] = live[e]
            during_trace[s, e] = step_peak[e]
            if step_peak[e] > peak[e]:
                peak[e] = step_peak[e]
    return -1


@numba.njit(cache=True, inline="always")
def _place(keys, n, n_dev, placement):  # noqa: ANN001, ANN202
    """Each op's device: the first largest of its affinities."""
    for j in range(n):
        best = 0
        top = keys[_ix(j * n_dev)]
        for d in range(1, n_dev):
            x = keys[_ix(j * n_dev + d)]
            if x > top:
                best = d
                top = x
        placement[j] = best


@numba.njit(cache=True)
def split_keys(keys, n, n_dev):  # noqa: ANN001, ANN201
    """A chromosome's placement, op priorities and transfer priorities."""
    placement = np.empty(n, np.int64)
    _place(keys, n, n_dev, placement)
    return placement, keys[n * n_dev: n * n_dev + n], keys[n * n_dev + n:]


@numba.njit(cache=True, _nrt=False)
def evaluate_population(keys, n_dev, slot, in_ptr, in_idx, out_ptr, out_idx, size, keep, param,  # noqa: ANN001, ANN201
                        producer, cons_ptr, cons_idx, base, work, none, out_peaks):
    """Peaks (and bytes moved) of each row of ``keys`` into ``out_peaks`` (``none``: an empty
    array, no steps recorded)."""
    n = len(in_ptr) - 1
    placement = work.placement
    for r in range(keys.shape[0]):
        row = keys[r]
        _place(row, n, n_dev, placement)
        order_kernel(placement, row[n * n_dev: n * n_dev + n], row[n * n_dev + n:], slot, n_dev, in_ptr, in_idx,
                     out_ptr, out_idx, size, keep, param, producer, cons_ptr, cons_idx, base, work,
                     none, none, none, none, out_peaks[r])
