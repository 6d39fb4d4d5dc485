"""Bytes held by ONNX sequence values (lists of tensors) and optional values, from the ops that build them.

A sequence (``SplitToSequence``, ``SequenceConstruct``, ...) has no tensor shape, so shape
inference never sizes it, yet it holds memory like a tensor: its elements.  This module gives
every sequence the bytes of its elements where the op that builds it fixes them, and sizes the
tensors read back out of a sequence whose shape inference left unknown:

* ``SplitToSequence(x)``: the chunks partition ``x``: ``bytes(x)``;
* ``SequenceConstruct(t1, ..., tn)``: ``bytes(t1) + ... + bytes(tn)``; ``SequenceEmpty``: 0;
* ``SequenceInsert(s, t)``: ``bytes(s) + bytes(t)``;
* ``ConcatFromSequence(s)``: every element once: ``bytes(s)``;
* ``SequenceErase(s)`` and ``SequenceAt(s)``: at most ``bytes(s)`` (which element is not known
  until run time): an upper bound, counted as such (``bounded``);
* ``Optional(x)``: the value it wraps: ``bytes(x)``; ``Optional()`` (empty): 0;
  ``OptionalGetElement(o)``: ``bytes(o)``.

Sequences made by anything else (``SequenceMap``, a ``Loop`` or ``If`` output, a custom op) stay
unknown, and so does the importer's error for them.

Example:
    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),
    ...                        helper.make_node("SequenceAt", ["s", "i"], ["t"])], "g", [], [])
    >>> sizes, bounded = sequence_bytes(g, {"x": 64, "i": 8})
    >>> sizes, sorted(bounded)
    ({'s': 64, 't': 64}, ['t'])
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx

__all__ = ["sequence_bytes"]

#: op -> how the bytes of its first output follow from the bytes of its inputs (None: unknown input)
_EXACT = {
    "SplitToSequence": lambda b: b[0],
    "SequenceConstruct": lambda b: None if None in b else sum(b),
    "SequenceEmpty": lambda b: 0,
    "SequenceInsert": lambda b: None if None in b[:2] else b[0] + b[1],
    "ConcatFromSequence": lambda b: b[0],
    "Optional": lambda b: b[0] if b else 0,
    "OptionalGetElement": lambda b: b[0],
}
_BOUNDED = {"SequenceErase", "SequenceAt"}  # at most the sequence they read


def sequence_bytes(graph: onnx.GraphProto, known: Mapping[str, int]) -> tuple[dict[str, int], set[str]]:
    """``(sizes, bounded)``: bytes of every sequence value (and tensor read out of one) that ``graph``'s
    sequence ops fix, given ``known`` bytes of the other values; ``bounded`` names the sizes that are
    upper bounds.  Values already in ``known`` are left as they are."""
    sizes: dict[str, int] = {}
    bounded: set[str] = set()

    def size(name: str) -> int | None:
        return known.get(name, sizes.get(name)) if name else None

    changed = True
    while changed:  # nodes need not be stored in topological order
        changed = False
        for node in graph.node:
            rule = _EXACT.get(node.op_type)
            if (rule is None and node.op_type not in _BOUNDED) or not node.output or not node.output[0]:
                continue
            out = node.output[0]
            if out in known or out in sizes:
                continue
            ins = [size(x) for x in node.input]
            value = ins[0] if node.op_type in _BOUNDED and ins else rule(ins) if rule else None
            if value is None:
                continue
            sizes[out] = int(value)
            if node.op_type in _BOUNDED or any(x in bounded for x in node.input):
                bounded.add(out)
            changed = True
    return sizes, bounded
