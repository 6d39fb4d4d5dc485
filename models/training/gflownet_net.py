"""The temperature-conditioned Topoformer policy of paper 002 (3.3, appendix D) -- torch.

* ``e_sigma = ReLU(lin_b(ReLU(lin_a(log sigma))))`` (eq. 29; the log of the
  temperature is the input, as section 3.3 says);
* the encoder: ``h0 = lin(x)`` over the op's graph features, then ``L`` pre-norm
  Topoformer blocks (eq. 26-27) with the seven masked attention groups of paper
  000; each block's MLP has its first linear layer modulated by the temperature,
  ``scale(e_sigma) * lin_1(h) + shift(e_sigma)`` (eq. 30), with ReLU;
* the forward policy head scores every (op, lane) action of ``B`` partial
  schedules from the op's embedding, the op's state features, the (op, lane)
  pair features and ``e_sigma`` (a two-layer MLP), so one network serves any
  number of lanes.

One deviation from the paper, for CPU budgets: paper 002 feeds the state
features into the Topoformer and runs it at every step (``n`` encoder passes per
trajectory).  Here the encoder runs once per graph and temperature and the
state enters through the head, which scores only ready ops: what it sees of the
state is, per action, the earliest start the op would get on the lane and when
each lane frees (the pair features) -- the start times and placements of the
placed ops reach it only through those two numbers.
Measured on this machine (2 cores, loaded): a 50-op graph, 100 trajectories,
d=32, 2 layers: 18 s per update with the per-step encoder, under 1 s with this
split -- the difference between a trainable and an untrainable model here.

The backward policy is uniform over parents (no head).  For the trajectory
balance ablation (paper 002, Figure 4) an optional ``log Z`` head (an MLP on the
shared encoder's mean embedding and ``e_sigma``, not a second Topoformer)
regresses the log-partition function.
:func:`export_onnx` writes two ONNX files for ONNX Runtime: the encoder (``x``
(n, 3), ``rel`` (n, n), ``log_sigma`` (1, 1) -> ``h`` (n, d), ``e`` (1, d)) and the
head (``h``, ``e``, ``node`` (B, n, 4), ``pair`` (B, n, L, 4) -> ``logits`` (B, n, L)).
"""

from __future__ import annotations

import io
import os

import torch
from torch import nn

from onnx_sched.models.inference.features import SELF
from onnx_sched.models.inference.gflownet import head_path
from onnx_sched.models.inference.gflownet_env import N_NODE, N_PAIR, N_STATIC
from onnx_sched.models.training.topoformer import EncoderConfig, Topoformer
from onnx_sched.models.training.topoformer import _Block as TopoformerBlock

__all__ = ["GFlowNetEncoder", "GFlowNetHead", "GFlowNetPolicy", "export_onnx", "policy_config"]


def policy_config(d_model: int = 64, n_layers: int = 3, heads_per_group: int = 1, head_dim: int = 16,
                  ffn_dim: int = 128) -> EncoderConfig:
    return EncoderConfig(in_dim=N_STATIC, d_model=d_model, n_layers=n_layers, heads_per_group=heads_per_group,
                         head_dim=head_dim, ffn_dim=ffn_dim)


class _Block(TopoformerBlock):
    """A Topoformer block (paper 000's masked attention) whose MLP is modulated by the temperature (eq. 30)."""

    def __init__(self, cfg: EncoderConfig, n_heads: int) -> None:
        super().__init__(cfg, n_heads)
        del self.mlp
        self.lin1 = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.lin2 = nn.Linear(cfg.ffn_dim, cfg.d_model)
        self.scale = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.shift = nn.Linear(cfg.d_model, cfg.ffn_dim)

    def forward(self, h: torch.Tensor, bias: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        h = self.attend(h, bias)
        z = self.lin1(self.ln_mlp(h)) * self.scale(e) + self.shift(e)
        return h + self.lin2(torch.relu(z))


class GFlowNetEncoder(nn.Module):
    """Graph features + temperature -> op embeddings ``h`` (n, d) and ``e_sigma`` (1, d)."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_heads = len(cfg.groups) * cfg.heads_per_group
        d = cfg.d_model
        self.temp = nn.Sequential(nn.Linear(1, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())
        self.embed = nn.Linear(cfg.in_dim, d)
        self.blocks = nn.ModuleList(_Block(cfg, self.n_heads) for _ in range(cfg.n_layers))
        self.ln_out = nn.LayerNorm(d)

    def attention_bias(self, rel: torch.Tensor) -> torch.Tensor:
        """The Topoformer's ``(heads, n, n)`` mask (shared with paper 000's encoder)."""
        return Topoformer.attention_bias(self, rel)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor, rel: torch.Tensor, log_sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = self.temp(log_sigma)
        h = self.embed(x)
        bias = self.attention_bias(rel)
        for block in self.blocks:
            h = block(h, bias, e)
        return self.ln_out(h), e


class GFlowNetHead(nn.Module):
    """``(h, e, node, pair)`` of ``K`` (state, op) rows -> logits ``(K, L)`` of their (op, lane) actions."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.node_proj = nn.Linear(d, d)
        self.state_proj = nn.Linear(N_NODE, d, bias=False)
        self.pair_proj = nn.Linear(N_PAIR, d, bias=False)
        self.temp_proj = nn.Linear(d, d, bias=False)
        self.hidden = nn.Linear(d, d)
        self.out = nn.Linear(d, 1)

    def score(self, h: torch.Tensor, e: torch.Tensor, node: torch.Tensor, pair: torch.Tensor) -> torch.Tensor:
        """Logits ``(..., L)`` for op embeddings ``h`` (..., d), states ``node`` (..., 4), pairs (..., L, 4)
        (leading dimensions broadcast: all ops of ``B`` states, or only the ready ones)."""
        per_op = self.node_proj(h) + self.state_proj(node) + self.temp_proj(e).reshape(-1)
        z = torch.relu(per_op[..., None, :] + self.pair_proj(pair))
        return self.out(torch.relu(self.hidden(z))).squeeze(-1)

    def forward(self, h: torch.Tensor, e: torch.Tensor, node: torch.Tensor, pair: torch.Tensor) -> torch.Tensor:
        return self.score(h, e, node, pair)


class GFlowNetPolicy(nn.Module):
    """Forward policy ``P_F(op, lane | state, sigma)`` (see module docstring)."""

    def __init__(self, cfg: EncoderConfig, log_z_head: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = GFlowNetEncoder(cfg)
        self.head = GFlowNetHead(cfg.d_model)
        d = cfg.d_model
        self.log_z = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU(), nn.Linear(d, 1)) if log_z_head else None

    def forward(self, x: torch.Tensor, rel: torch.Tensor, node: torch.Tensor, pair: torch.Tensor,
                log_sigma: torch.Tensor) -> torch.Tensor:
        h, e = self.encoder(x, rel, log_sigma)
        return self.head(h[None], e, node, pair)

    def log_partition(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """``log Z(G, sigma)`` of the trajectory-balance ablation (a scalar) from the encoder's output."""
        if self.log_z is None:
            raise ValueError("this policy has no log Z head (trajectory balance ablation)")
        return self.log_z(torch.cat([h.mean(dim=0, keepdim=True), e], dim=-1)).reshape(())


def _onnx_bytes(module: nn.Module, args: tuple, names: list[str], outputs: list[str], axes: dict) -> bytes:
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, buf, input_names=names, output_names=outputs, dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    return buf.getvalue()


def _write(data: bytes, path: str, meta: dict[str, str]) -> None:
    import onnx

    proto = onnx.load_from_string(data)
    proto.ir_version = min(proto.ir_version, 10)
    del proto.metadata_props[:]
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, str(value)
    onnx.checker.check_model(proto)
    tmp = f"{path}.tmp"
    onnx.save(proto, tmp)
    os.replace(tmp, path)


def export_onnx(model: GFlowNetPolicy, path: str | os.PathLike[str], meta: dict[str, str] | None = None) -> None:
    """Write the encoder to ``path`` and the head to :func:`head_path` (dynamic sizes, IR version 10)."""
    model = model.eval()
    n, b, lanes = 6, 2, 3
    rel = torch.full((n, n), 6, dtype=torch.int8)
    rel.fill_diagonal_(SELF)
    x, ls = torch.zeros(n, model.cfg.in_dim), torch.zeros(1, 1)
    props = {"onnx_sched.encoder_config": model.cfg.to_json(), **(meta or {})}
    _write(_onnx_bytes(model.encoder, (x, rel, ls), ["x", "rel", "log_sigma"], ["h", "e"],
                       {"x": {0: "n"}, "rel": {0: "n", 1: "n"}, "h": {0: "n"}}), os.fspath(path), props)
    with torch.no_grad():
        h, e = model.encoder(x, rel, ls)
    k = b * n
    node, pair = torch.zeros(k, N_NODE), torch.zeros(k, lanes, N_PAIR)
    _write(_onnx_bytes(model.head, (h.repeat(b, 1), e, node, pair), ["h", "e", "node", "pair"], ["logits"],
                       {"h": {0: "k"}, "node": {0: "k"}, "pair": {0: "k", 1: "lanes"},
                        "logits": {0: "k", 1: "lanes"}}), head_path(path), props)
