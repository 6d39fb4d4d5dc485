"""RandWire networks (Xie et al. 2019): randomly wired conv stages, as their ONNX export has them.

Why: the irregularly wired NAS-style networks are where op orders differ most in
peak memory (the corpus's ``randwire_*`` models), and a generator gives as many of
them as training wants, at any size, with realistic tensor bytes.

Families ``randwire-er``, ``randwire-ws``, ``randwire-ba``: :func:`randwire_er_graph`,
:func:`randwire_ws_graph`, :func:`randwire_ba_graph` ``(n, seed, params, *, name)``,
all :func:`randwire_graph` with the wiring fixed.

The network (Xie et al., section 3-4; the pattern read from the export of the
corpus's ``randwire_ws``, a train-split model):

* stem: ``Conv`` stride 2 to ``C/2`` channels; the *small* regime adds ``Relu`` +
  ``Conv`` stride 2 to ``C`` (3 random stages follow), the *regular* regime goes
  straight to 4 random stages;
* a random stage: an undirected random graph of ``N`` nodes (networkx ER ``p``,
  WS ``k, p``, BA ``m``; paper values ``p = 0.2``, ``k = 4, p = 0.75``, ``m = 5``),
  every edge pointing from the lower to the higher node index.  A node with inputs
  ``x_1..x_k`` (``k >= 2``) is ``Mul`` per input (its sigmoid weight) + ``k - 1``
  chained ``Add`` -> ``Relu`` -> depthwise ``Conv`` 3x3 -> pointwise ``Conv`` 1x1
  (-> ``BatchNormalization`` when the graph keeps BN unfolded; exports with
  inference-mode BN fold it into the Conv, as the corpus's do).  A node with one
  input has no aggregation, and nodes reading the same single tensor share one
  ``Relu`` (the export's common-subexpression elimination).  Nodes without
  predecessors read the stage input, their depthwise Conv has stride 2 (the stage
  halves the resolution and doubles the channels); nodes without successors are
  averaged into the stage output (``Add`` chain + ``Div``);
* head: ``Relu``, ``Conv`` 1x1 to 1280, ``Relu``, ``GlobalAveragePool``,
  ``Flatten``, ``Gemm`` to 1000 (the graph output).

Sizes: batch 1, float32, image ``H x H`` with ``H`` drawn from
``image_sizes``, base channels ``C ~ U{channels_low..channels_high}`` (corpus: 78
small, 109 regular), so tensor bytes follow from the shapes.  ``n`` (target ops)
fixes ``N``: the stages get ``N`` nodes each (the last ``N + d``, ``|d| <= 3``), the
draw closest to ``n`` ops among a few redraws around the smallest ``N`` reaching
``n`` (the search stops at the first draw within 1%).  The result is within 10% or 12
ops of ``n`` (whichever is larger) for ``n >= 40``; below that one stage without
stem or head is built and the count is within 12 ops.  Deterministic in ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import networkx as nx
import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.synth._builder import OpGraphBuilder

__all__ = [
    "RandWireParams",
    "randwire_ba_graph",
    "randwire_er_graph",
    "randwire_graph",
    "randwire_ws_graph",
    "stage_dag",
]

WIRINGS = ("er", "ws", "ba")
_REDRAWS = 4


@dataclass(frozen=True)
class RandWireParams:
    """Parameters of the RandWire families; defaults are Xie et al.'s random-graph settings."""

    wiring: str = "ws"
    er_p: float = 0.2
    ws_k: int = 4
    ws_p: float = 0.75
    ba_m: int = 5
    channels_low: int = 48
    channels_high: int = 160
    image_sizes: tuple[int, ...] = (192, 224, 256)
    regular_prob: float = 0.5  # regular regime (4 random stages) vs small (3)
    unfolded_bn_prob: float = 0.25  # graphs that keep BatchNormalization as an op

    def __post_init__(self) -> None:
        if self.wiring not in WIRINGS:
            raise ValueError(f"RandWireParams: wiring must be one of {WIRINGS}, got {self.wiring!r}")
        if not 0.0 <= self.er_p <= 1.0 or not 0.0 <= self.ws_p <= 1.0:
            raise ValueError(f"RandWireParams: er_p, ws_p must be probabilities, got {self.er_p}, {self.ws_p}")
        if self.ws_k < 2 or self.ba_m < 1:
            raise ValueError(f"RandWireParams: need ws_k >= 2 and ba_m >= 1, got {self.ws_k}, {self.ba_m}")
        if not 2 <= self.channels_low <= self.channels_high:
            raise ValueError(f"RandWireParams: need 2 <= channels_low <= channels_high, got "
                             f"{self.channels_low}, {self.channels_high}")
        if not self.image_sizes or min(self.image_sizes) < 64:
            raise ValueError(f"RandWireParams: image sizes must be >= 64, got {self.image_sizes}")
        for label, p in (("regular_prob", self.regular_prob), ("unfolded_bn_prob", self.unfolded_bn_prob)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"RandWireParams: {label} must be in [0, 1], got {p}")


def stage_dag(n_nodes: int, params: RandWireParams, rng: np.random.Generator) -> list[tuple[int, int]]:
    """One random stage: the wiring's undirected graph on ``n_nodes``, edges low -> high index.

    WS and BA need more nodes than their degree; smaller stages fall back to ER.
    """
    seed = int(rng.integers(0, 2**31 - 1))
    if params.wiring == "ws" and n_nodes > params.ws_k:
        und = nx.watts_strogatz_graph(n_nodes, params.ws_k, params.ws_p, seed=seed)
    elif params.wiring == "ba" and n_nodes > params.ba_m:
        und = nx.barabasi_albert_graph(n_nodes, params.ba_m, seed=seed)
    else:
        und = nx.gnp_random_graph(n_nodes, params.er_p, seed=seed)
    return sorted((min(u, v), max(u, v)) for u, v in und.edges() if u != v)


@dataclass(frozen=True)
class _Layout:
    regime: str  # "small", "regular" or "tiny" (one stage, no stem / head)
    channels: int
    image: int
    unfolded_bn: bool

    @property
    def stages(self) -> int:
        return {"small": 3, "regular": 4, "tiny": 1}[self.regime]


class _Net:
    """Emits one RandWire network into an :class:`OpGraphBuilder`."""

    def __init__(self, layout: _Layout) -> None:
        self.b = OpGraphBuilder()
        self.lay = layout
        self.result = -1  # the network's output tensor

    def conv(self, x: int, channels: int, stride: int, kernel: int, name: str, group: int = 1) -> int:
        _, c_in, h, w = self.b.shape(x)
        out = (1, channels, -(-h // stride), -(-w // stride))
        weight = (channels, c_in // group, kernel, kernel)
        y = self.b.op("Conv", [x], out, name, group=group, kernel_shape=[kernel, kernel],
                      strides=[stride, stride], weight_shape=weight)
        if self.lay.unfolded_bn and kernel == 1 and group == 1:
            y = self.b.op("BatchNormalization", [y], out, f"{name}_bn")
        return y

    def node(self, ins: list[int], stage: str, i: int, channels: int, stride: int, relu_of: dict[int, int]) -> int:
        pre = f"/{stage}/nodes.{i}"
        if len(ins) == 1:
            x = ins[0]
            if x not in relu_of:  # nodes reading the same tensor share its Relu
                relu_of[x] = self.b.op("Relu", [x], self.b.shape(x), f"{pre}/op/op.0/Relu")
            r = relu_of[x]
        else:
            muls = [self.b.op("Mul", [x], self.b.shape(x), f"{pre}/Mul_{j}") for j, x in enumerate(ins)]
            acc = muls[0]
            for j, m in enumerate(muls[1:]):
                acc = self.b.op("Add", [acc, m], self.b.shape(m), f"{pre}/Add_{j}")
            r = self.b.op("Relu", [acc], self.b.shape(acc), f"{pre}/op/op.0/Relu")
        c_in = self.b.shape(r)[1]
        dw = self.conv(r, c_in, stride, 3, f"{pre}/op/op.1/Conv", group=c_in)
        return self.conv(dw, channels, 1, 1, f"{pre}/op/op.2/Conv")

    def stage(self, x: int, edges: list[tuple[int, int]], n_nodes: int, channels: int, stage: str) -> int:
        preds: list[list[int]] = [[] for _ in range(n_nodes)]
        has_succ = [False] * n_nodes
        for u, v in edges:
            preds[v].append(u)
            has_succ[u] = True
        out: list[int] = []
        relu_of: dict[int, int] = {}
        for i in range(n_nodes):
            ins = [out[u] for u in preds[i]] or [x]
            out.append(self.node(ins, stage, i, channels, 1 if preds[i] else 2, relu_of))
        sinks = [out[i] for i in range(n_nodes) if not has_succ[i]]
        acc = sinks[0]
        for j, s in enumerate(sinks[1:]):
            acc = self.b.op("Add", [acc, s], self.b.shape(s), f"/{stage}/Add_{j}")
        if len(sinks) > 1:
            acc = self.b.op("Div", [acc], self.b.shape(acc), f"/{stage}/Div")
        return acc


def _build(layout: _Layout, n_nodes: int, params: RandWireParams, seed_seq: np.random.SeedSequence,
           last: int = 0) -> _Net:
    """The network with ``n_nodes`` per random stage, ``n_nodes + last`` in the last one."""
    net = _Net(layout)
    b, c, h = net.b, layout.channels, layout.image
    rng = np.random.default_rng(seed_seq)
    if layout.regime == "tiny":
        x = b.input("features", (1, c, h // 4, h // 4))
    else:
        x = net.conv(b.input("image", (1, 3, h, h)), c // 2, 2, 3, "/conv1/conv1.0/Conv")
        if layout.regime == "small":
            x = b.op("Relu", [x], b.shape(x), "/conv2/conv2.0/Relu")
            x = net.conv(x, c, 2, 3, "/conv2/conv2.1/Conv")
    first = 2 if layout.regime == "regular" else 3
    for s in range(layout.stages):
        k = n_nodes + (last if s == layout.stages - 1 else 0)
        x = net.stage(x, stage_dag(k, params, rng), k, c * 2**s, f"conv{first + s}")
    if layout.regime != "tiny":
        x = b.op("Relu", [x], b.shape(x), "/head/head.0/Relu")
        _, _, hh, ww = b.shape(x)
        x = b.op("Conv", [x], (1, 1280, hh, ww), "/head/head.1/Conv", kernel_shape=[1, 1],
                 weight_shape=(1280, b.shape(x)[1], 1, 1))
        x = b.op("Relu", [x], b.shape(x), "/head/head.3/Relu")
        x = b.op("GlobalAveragePool", [x], (1, 1280, 1, 1), "/head/head.4/GlobalAveragePool")
        x = b.op("Flatten", [x], (1, 1280), "/Flatten")
        x = b.op("Gemm", [x], (1, 1000), "/fc/Gemm", weight_shape=(1280, 1000))
    net.result = x
    return net


def randwire_graph(n: int, seed: int, params: RandWireParams = RandWireParams(), *, name: str | None = None) -> Graph:
    """A RandWire network of about ``n`` ops (see module docstring for the tolerance)."""
    if n < 4:
        raise ValueError(f"randwire graph needs n >= 4 ops, got {n}")
    rng = np.random.default_rng(seed)
    regime = "tiny" if n < 40 else ("regular" if rng.random() < params.regular_prob else "small")
    layout = _Layout(
        regime=regime,
        channels=int(rng.integers(params.channels_low, params.channels_high + 1)),
        image=int(params.image_sizes[int(rng.integers(len(params.image_sizes)))]),
        unfolded_bn=bool(rng.random() < params.unfolded_bn_prob),
    )
    base = int(rng.integers(0, 2**31 - 1))

    def draw(nodes: int, redraw: int, last: int = 0) -> _Net:
        return _build(layout, nodes, params, np.random.SeedSequence([base, nodes, redraw, last + 8]), last)

    # ops grow with N (ER quadratically): bisect for the smallest N reaching n, then search around it
    lo, hi = 2, 4
    while draw(hi, 0).b.n_ops < n and hi < 4096:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if draw(mid, 0).b.n_ops < n else (lo, mid)
    best: tuple[int, int, _Net] | None = None
    good = max(1, n // 100)
    candidates = ((nodes, redraw, last) for nodes in (lo, hi, lo - 1, hi + 1) for redraw in range(_REDRAWS)
                  for last in (0, -1, 1, -2, 2, -3, 3) if nodes >= 2 and nodes + last >= 2)
    for nodes, redraw, last in candidates:
        net = draw(nodes, redraw, last)
        key = (abs(net.b.n_ops - n), nodes)
        if best is None or key < best[:2]:
            best = (*key, net)
        if best[0] <= good:
            break
    assert best is not None
    nodes, net = best[1], best[2]
    meta = {
        "family": f"randwire-{params.wiring}",
        "seed": int(seed),
        "wiring": params.wiring,
        "regime": layout.regime,
        "stages": layout.stages,
        "nodes_per_stage": int(nodes),
        "channels": layout.channels,
        "image": layout.image,
        "unfolded_bn": layout.unfolded_bn,
    }
    return net.b.build(name or f"randwire-{params.wiring}-n{n}-s{seed}", outputs=[net.result], metadata=meta)


def randwire_er_graph(n: int, seed: int, params: RandWireParams = RandWireParams(wiring="er"),
                      *, name: str | None = None) -> Graph:
    """RandWire with Erdos-Renyi stages (``params.er_p``)."""
    return randwire_graph(n, seed, replace(params, wiring="er"), name=name)


def randwire_ws_graph(n: int, seed: int, params: RandWireParams = RandWireParams(wiring="ws"),
                      *, name: str | None = None) -> Graph:
    """RandWire with Watts-Strogatz stages (``params.ws_k``, ``params.ws_p``)."""
    return randwire_graph(n, seed, replace(params, wiring="ws"), name=name)


def randwire_ba_graph(n: int, seed: int, params: RandWireParams = RandWireParams(wiring="ba"),
                      *, name: str | None = None) -> Graph:
    """RandWire with Barabasi-Albert stages (``params.ba_m``)."""
    return randwire_graph(n, seed, replace(params, wiring="ba"), name=name)
