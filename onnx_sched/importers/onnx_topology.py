"""Why ``onnx.checker`` calls a graph unsorted, in words a user can act on.

The checker's message names one input and stops at the node ("input 'b' of node:"), and the
same message covers three different problems: a node reads a tensor that nothing defines, the
graph has a cycle, or the nodes are merely out of order (which other tools can fix by sorting).
:func:`topology_problem` tells them apart and names the nodes.
"""

from __future__ import annotations

import onnx

__all__ = ["topology_problem"]


def topology_problem(graph: onnx.GraphProto) -> str | None:
    """What is wrong with a graph the checker calls unsorted: a read of a tensor nothing defines, a
    cycle (named), or nodes merely out of order; ``None`` when the top level looks fine."""
    import networkx as nx

    nodes = graph.node
    label = [f"{n.name!r} ({n.op_type})" if n.name else f"{n.op_type} writing {n.output[0]!r}" for n in nodes]
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    known = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {t.name for t in graph.sparse_initializer}
    for i, node in enumerate(nodes):
        for name in node.input:
            if name and name not in known and name not in producer:
                return f"node {label[i]} reads {name!r}, which nothing defines"
    dag = nx.DiGraph((producer[x], j) for j, n in enumerate(nodes) for x in n.input if x in producer)
    try:
        cycle = [u for u, _ in nx.find_cycle(dag)]
    except nx.NetworkXNoCycle:
        cycle = []
    if cycle:
        shown = " -> ".join(label[u] for u in cycle[:6]) + (" -> ..." if len(cycle) > 6 else "")
        return f"graph has a cycle: {shown} -> {label[cycle[0]]}"
    seen = set(known)  # no cycle: some node reads a tensor before the node that writes it
    for i, node in enumerate(nodes):
        for name in node.input:
            if name and name not in seen:
                return (f"nodes are not in topological order (node {label[i]} reads {name!r} before node "
                        f"{label[producer[name]]} writes it); ONNX requires sorted nodes")
        seen.update(o for o in node.output if o)
    return None
