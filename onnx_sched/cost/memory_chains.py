"""Chain contraction: a smaller graph with the same optimal peak memory.

In a chain ``c1 -> c2 -> ... -> ck`` where each ``ci`` (``i >= 2``) reads nothing but
``c(i-1)``'s single output and is its only reader, the chain's ops touch no other op's
tensors.  Relative to the bytes the rest of the graph holds, each interior op has a
fixed step cost ``s`` (its input, outputs and transient bytes, less in-place reuse)
and a fixed resting cost ``r`` afterwards (its outputs that stay live).  Two exchange
arguments make neighbouring elements run back to back in some optimal order:

* *forward*: ``B`` right after ``A`` when ``r_B <= r_A`` and ``s_B <= s_A``: the ops that
  ran between them now see ``r_B`` instead of ``r_A``, and ``B``'s step now happens on
  top of the same bytes as ``A``'s;
* *backward*: ``A`` right before ``B`` when ``r_before(A) <= r_A`` and ``s_A <= s_B``.

So merging them loses nothing.  The chain's head ``c1`` reads arbitrary tensors and
never moves; an element may join it forward when its step is at most the head's own
outputs and transient bytes (the head's step, minus what it frees), and the head has no
in-place candidate.  Merged elements become one op whose transient bytes make its step
the largest step of its members (possibly negative: a unit never holds its input and
output together).  Orders of the contracted graph expand to orders of the original with
the same peak, and the optimal peaks are equal, so exact search, the min-cut bound and
probing may all work on the smaller graph.  This is Liu's hill-valley segmentation of
chains (1987) applied inside a DAG: RandWire nodes (ReLU, separable convolution, batch
norm) shrink to one or two ops.

Example:
    >>> from onnx_sched.graph import Graph
    >>> # 0 -> 1 -> 2 -> 3 -> 4 (equal 4-byte tensors) beside 0 -> 5 -> 4: ops 2 and 3
    >>> # read nothing but their chain predecessor, and 3 may always follow 2 at once
    >>> g = Graph.from_edges(6, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 4)], output_bytes=[4] * 6)
    >>> c = contract_chains(g)
    >>> c.graph.n_ops, [m.tolist() for m in c.members]
    (5, [[0], [1], [2, 3], [4], [5]])
    >>> c.expand([0, 4, 1, 2, 3]).tolist()
    [0, 5, 1, 2, 3, 4]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from onnx_sched.cost.memory import memory_arrays
from onnx_sched.graph import Csr, Graph, TensorKind

__all__ = ["Contraction", "contract_chains"]

_NEVER = np.iinfo(np.int64).min // 4  # a head with in-place reuse accepts no forward merge


@dataclass(frozen=True, eq=False)
class Contraction:
    """``graph``: the contracted graph; ``members[i]``: the original ops of its op ``i``, in run order."""

    graph: Graph
    members: tuple[np.ndarray, ...]

    @staticmethod
    def identity(g: Graph) -> Contraction:
        """``g`` itself, every op its own member."""
        return Contraction(g, tuple(np.array([v], np.int64) for v in range(g.n_ops)))

    @property
    def reduced(self) -> bool:
        """True when some ops were merged."""
        return self.graph.n_ops < sum(len(m) for m in self.members)

    def expand(self, order: np.ndarray | list[int]) -> np.ndarray:
        """The original order of a contracted order (each merged op's members back to back)."""
        parts = [self.members[int(u)] for u in np.asarray(order, dtype=np.int64)]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    def contract(self, order: np.ndarray | list[int]) -> np.ndarray:
        """A contracted order close to an original one: merged ops where their first member runs.

        Always valid (a merged op's inputs come from ops before its first member), and the same
        order when the merged ops already ran back to back; otherwise its peak may differ."""
        first = np.full(sum(len(m) for m in self.members), -1, np.int64)
        for i, m in enumerate(self.members):
            first[m[0]] = i
        out = first[np.asarray(order, dtype=np.int64)]
        return out[out >= 0]


@dataclass
class _Unit:
    ops: list[int]
    s: int  # largest step over the bytes the rest of the graph holds
    r: int  # bytes it leaves live
    before: int  # bytes the chain held before it (its input); unused for a head
    head: bool


def contract_chains(g: Graph, inplace: bool = False) -> Contraction:
    """Merge chain elements that can run back to back in an optimal order (module docstring)."""
    return _contract_cached(g, bool(inplace))


@lru_cache(maxsize=16)
def _contract_cached(g: Graph, inplace: bool) -> Contraction:
    a = memory_arrays(g, inplace)
    n = g.n_ops
    n_in = np.diff(a.in_ptr)
    n_out = np.diff(a.out_ptr)
    op_of = np.repeat(np.arange(n), n_out)  # per output slot, its op (an op may have none, the last one too)
    alloc, rest = np.zeros(n, np.int64), np.zeros(n, np.int64)
    np.add.at(alloc, op_of, a.size[a.out_idx])
    stays = np.where((a.n_consumers > 0) | a.keep, a.size, 0)
    np.add.at(rest, op_of, stays[a.out_idx])
    has_ip = np.diff(a.inplace_ptr) > 0
    n_readers = g.tensor_consumers.lengths()

    one = np.flatnonzero(n_in == 1)  # link[v] = u: v reads only u's single output, and alone
    t_in = np.full(n, -1, np.int64)
    t_in[one] = a.in_idx[a.in_ptr[one]]
    u_of = np.where(t_in >= 0, g.tensor_producer[np.maximum(t_in, 0)], -1)
    ok = (u_of >= 0) & (n_out[np.maximum(u_of, 0)] == 1)
    ok &= ~a.keep[np.maximum(t_in, 0)] & (n_readers[np.maximum(t_in, 0)] == 1) & (a.size[np.maximum(t_in, 0)] > 0)
    link = np.where(ok, u_of, -1)
    nxt = np.full(n, -1, np.int64)
    nxt[link[link >= 0]] = np.flatnonzero(link >= 0)
    in_size = np.where(link >= 0, a.size[np.maximum(t_in, 0)], 0)
    step = in_size + alloc + a.param - (in_size if inplace else 0) * has_ip  # interior ops: fixed step
    heads = np.flatnonzero((link < 0) & (nxt >= 0))
    head_step = np.where(inplace & has_ip[heads], _NEVER, alloc[heads] + a.param[heads])
    nxt_l, step_l, rest_l, in_l = nxt.tolist(), step.tolist(), rest.tolist(), in_size.tolist()

    units: list[list[int]] = []
    params: list[int] = []
    for c1, head_s in zip(heads.tolist(), head_step.tolist(), strict=True):
        stack = [_Unit([c1], head_s, int(a.size[a.out_idx[a.out_ptr[c1]]]), 0, True)]
        v = nxt_l[c1]
        while v >= 0:
            b = _Unit([v], step_l[v], rest_l[v], in_l[v], False)
            while stack:
                top = stack[-1]
                if b.r <= top.r and b.s <= top.s:  # b right after top
                    top.s = top.s if top.head else max(top.s, b.s)
                elif not top.head and top.before <= top.r and top.s <= b.s:  # top right before b
                    top.s = b.s
                else:
                    break
                top.ops.extend(b.ops)
                top.r = b.r
                b = stack.pop()
            stack.append(b)
            v = nxt_l[v]
        for u in stack:
            if len(u.ops) > 1:
                units.append(u.ops)
                last = u.ops[-1]
                if u.head:
                    params.append(int(alloc[u.ops[0]] + a.param[u.ops[0]] - alloc[last]))
                else:
                    params.append(int(u.s - u.before - alloc[last]))
    return _build(g, units, params)


def _build(g: Graph, units: list[list[int]], params: list[int]) -> Contraction:
    """The graph with each unit's ops replaced by one op (first op's inputs, last op's outputs)."""
    n = g.n_ops
    unit_of = np.full(n, -1, np.int64)
    for i, ops in enumerate(units):
        unit_of[ops] = i
    keep_ops = [v for v in range(n) if unit_of[v] < 0 or units[unit_of[v]][0] == v]
    members = tuple(np.asarray(units[unit_of[v]] if unit_of[v] >= 0 else [v], np.int64) for v in keep_ops)
    if len(keep_ops) == n:
        return Contraction.identity(g)
    producer = g.tensor_producer.copy()
    size = g.tensor_bytes.copy()
    kind = g.tensor_kind.copy()
    inner = np.concatenate([g.op_outputs.row(v) for ops in units for v in ops[:-1]])
    producer[inner], size[inner], kind[inner] = -1, 0, TensorKind.WEIGHT
    new_id = np.full(n, -1, np.int64)
    new_id[keep_ops] = np.arange(len(keep_ops))
    last = [int(m[-1]) for m in members]
    outs = [g.op_outputs.row(v).tolist() for v in last]
    for i, row in enumerate(outs):
        producer[row] = i
    param = g.op_param_bytes[keep_ops].copy()
    types = [g.op_types[v] for v in keep_ops]
    names = [g.op_names[v] for v in keep_ops]
    for i, ops in enumerate(units):
        j = int(new_id[ops[0]])
        param[j], types[j], names[j] = params[i], "Chain", f"{g.op_names[ops[0]]}..{g.op_names[ops[-1]]}"
    contracted = Graph(
        name=g.name, op_names=tuple(names), op_types=tuple(types),
        op_inputs=Csr.from_lists([g.op_inputs.row(v).tolist() for v in keep_ops]),
        op_outputs=Csr.from_lists(outs), tensor_names=g.tensor_names, tensor_bytes=size, tensor_kind=kind,
        tensor_producer=producer, tensor_dtypes=g.tensor_dtypes, tensor_shapes=g.tensor_shapes,
        op_param_bytes=param,
    )
    return Contraction(contracted, members)
