"""REGAL's networks in torch (paper 003, eq. 1-6 and 9) and the policy's export to plain ONNX.

GNN over ops (nodes) and tensor reads (edges, parallel edges allowed)::

    h_v(0) = MLP_n(x_v)                                   (1)
    h_e    = MLP_e(x_e)                                   (2)
    m_e    = MLP_msg ([h_src, h_dst, h_e])                (3)  forward message, to dst
    m'_e   = MLP'_msg([h_src, h_dst, h_e])                (4)  backward message, to src
    h_v(t+1) = MLP_node([h_v(t), sum_{dst=v} m_e + sum_{src=v} m'_e])   (5)

for ``rounds`` rounds with the same MLPs, every MLP two layers with a ReLU between
(eq. 10).  The policy head MLP_y maps each ``h_v`` to ``heads x k`` logits (eq. 6,
conditionally independent per op); the baseline is a separate GNN with
``b(G) = MLP_b(mean_v MLP_g(h_v))`` (eq. 9).

:func:`export_policy` writes the policy as an ONNX graph of MatMul / Add / Relu /
Gather / Concat / ScatterND(add) nodes (opset 17), which ONNX Runtime runs without
torch; ``tests/test_regal.py`` checks both give the same logits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from onnx_sched.models.inference.regal import LEVELS, STANDARD_LEVELS, n_heads
from onnx_sched.models.inference.regal_features import FEATURE_EVALUATIONS

__all__ = ["BaselineNet", "Gnn", "Mlp", "PolicyNet", "export_policy"]


class Mlp(nn.Module):
    """Linear -> ReLU -> Linear (paper 003 eq. 10 with two layers)."""

    def __init__(self, n_in: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(n_in, hidden)
        self.l2 = nn.Linear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x)))


class Gnn(nn.Module):
    """Eq. 1-5: node and edge encoders, forward and backward messages, node update, ``rounds`` times."""

    def __init__(self, n_features: int, hidden: int = 32, rounds: int = 4) -> None:
        super().__init__()
        self.hidden, self.rounds = hidden, rounds
        self.node = Mlp(n_features, hidden, hidden)
        self.edge = Mlp(1, hidden, hidden)
        self.msg = Mlp(3 * hidden, hidden, hidden)
        self.msg_back = Mlp(3 * hidden, hidden, hidden)
        self.update = Mlp(2 * hidden, hidden, hidden)

    def forward(self, x: torch.Tensor, edge_x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        h = self.node(x)
        he = self.edge(edge_x)
        for _ in range(self.rounds):
            pair = torch.cat([h[src], h[dst], he], dim=1)
            agg = torch.zeros_like(h).index_add(0, dst, self.msg(pair)).index_add(0, src, self.msg_back(pair))
            h = self.update(torch.cat([h, agg], dim=1))
        return h


class PolicyNet(nn.Module):
    """GNN + MLP_y: per-op logits (n, heads, k), initialised near the standard-BRKGA action."""

    def __init__(self, n_features: int, n_devices: int = 2, hidden: int = 32, rounds: int = 4,
                 levels: int = LEVELS) -> None:
        super().__init__()
        self.n_devices, self.levels, self.heads = n_devices, levels, n_heads(n_devices)
        self.gnn = Gnn(n_features, hidden, rounds)
        self.head = Mlp(hidden, hidden, self.heads * levels)
        with torch.no_grad():
            self.head.l2.weight.mul_(0.1)
            bias = torch.zeros(self.heads, levels)
            if levels == LEVELS:
                bias[0:self.heads - 1:2, STANDARD_LEVELS["mean"]] = 2.0
                bias[1:self.heads - 1:2, STANDARD_LEVELS["variance"]] = 2.0
                bias[-1, STANDARD_LEVELS["crossover"]] = 2.0
            self.head.l2.bias.copy_(bias.reshape(-1))

    def forward(self, x: torch.Tensor, edge_x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.head(self.gnn(x, edge_x, src, dst)).reshape(-1, self.heads, self.levels)


class BaselineNet(nn.Module):
    """Eq. 9: a separate GNN, ``b(G) = MLP_b(mean_v MLP_g(h_v))``; starts at b = -1 (BRKGA's reward)."""

    def __init__(self, n_features: int, hidden: int = 32, rounds: int = 4) -> None:
        super().__init__()
        self.gnn = Gnn(n_features, hidden, rounds)
        self.g = Mlp(hidden, hidden, hidden)
        self.b = Mlp(hidden, hidden, 1)
        with torch.no_grad():
            self.b.l2.bias.fill_(-1.0)

    def forward(self, x: torch.Tensor, edge_x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.b(self.g(self.gnn(x, edge_x, src, dst)).mean(dim=0)).squeeze(-1)


class _Graph:
    """A small builder of ONNX nodes and initializers."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def op(self, kind: str, inputs: list[str], output: str | None = None, **attrs: object) -> str:
        self.count += 1
        out = output or f"{kind.lower()}_{self.count}"
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def linear(self, x: str, layer: nn.Linear, name: str) -> str:
        w = self.const(f"{name}.W", layer.weight.detach().numpy().T.astype(np.float32).copy())
        b = self.const(f"{name}.b", layer.bias.detach().numpy().astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def mlp(self, x: str, m: Mlp, name: str) -> str:
        return self.linear(self.op("Relu", [self.linear(x, m.l1, f"{name}.l1")]), m.l2, f"{name}.l2")


def export_policy(net: PolicyNet, path: str | Path, pin: bool = True,
                  feature_evaluations: int = FEATURE_EVALUATIONS) -> Path:
    """Write ``net`` as ONNX: inputs ``x`` (n, F), ``edge_x`` (E, 1), ``src``, ``dst`` (E,) int64;
    output ``logits`` (n, heads, k); metadata ``devices``, ``levels``, ``rounds``, ``hidden``, ``pin``
    (whether it was trained with the symmetry op held on device 0), ``feature_evaluations`` (its feature run)."""
    g = _Graph()
    gnn = net.gnn
    h = g.mlp("x", gnn.node, "node")
    he = g.mlp("edge_x", gnn.edge, "edge")
    axis1 = g.const("axis1", np.array([1], np.int64))
    dst_col = g.op("Unsqueeze", ["dst", axis1])
    src_col = g.op("Unsqueeze", ["src", axis1])
    for _ in range(gnn.rounds):
        pair = g.op("Concat", [g.op("Gather", [h, "src"], axis=0), g.op("Gather", [h, "dst"], axis=0), he], axis=1)
        zeros = g.op("Mul", [h, g.const(f"zero{g.count}", np.zeros(1, np.float32))])
        agg = g.op("ScatterND", [zeros, dst_col, g.mlp(pair, gnn.msg, "msg")], reduction="add")
        agg = g.op("ScatterND", [agg, src_col, g.mlp(pair, gnn.msg_back, "msg_back")], reduction="add")
        h = g.mlp(g.op("Concat", [h, agg], axis=1), gnn.update, "update")
    flat = g.mlp(h, net.head, "head")
    g.op("Reshape", [flat, g.const("logit_shape", np.array([-1, net.heads, net.levels], np.int64))], "logits")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        g.nodes, "regal_policy",
        [vi("x", TensorProto.FLOAT, ["n", gnn.node.l1.in_features]), vi("edge_x", TensorProto.FLOAT, ["e", 1]),
         vi("src", TensorProto.INT64, ["e"]), vi("dst", TensorProto.INT64, ["e"])],
        [vi("logits", TensorProto.FLOAT, ["n", net.heads, net.levels])], initializer=_dedupe(g.inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="onnx-sched regal_train")
    helper.set_model_props(model, {"devices": str(net.n_devices), "levels": str(net.levels),
                                   "rounds": str(gnn.rounds), "hidden": str(gnn.hidden), "pin": str(bool(pin)).lower(),
                                   "feature_evaluations": str(int(feature_evaluations))})
    onnx.checker.check_model(model)
    path = Path(path)
    onnx.save(model, str(path))
    return path


def _dedupe(inits: list[onnx.TensorProto]) -> list[onnx.TensorProto]:
    """The shared MLPs of every round are written once."""
    seen: dict[str, onnx.TensorProto] = {}
    for t in inits:
        seen.setdefault(t.name, t)
    return list(seen.values())
