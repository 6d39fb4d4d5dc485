"""Topoformer: topologically masked attention over a DAG (paper 000, 4.1 and C.2) -- torch.

Only training code and the ONNX export import this module; inference runs the
exported graph through ONNX Runtime (:mod:`onnx_sched.models.inference.topoformer_onnx`).

The encoder maps node features ``x`` (n, k) and the relation codes ``rel`` (n, n)
of :func:`onnx_sched.models.inference.features.relation_matrix` to one priority per node:

* ``h0 = W x + b``;
* ``n_layers`` pre-norm blocks ``h = h + MHA(LN(h); masks)``,
  ``h = h + MLP(LN(h))`` (eq. 4-5, layer norm on sub-layer inputs as in the
  paper's reference [31]); the attention heads are split into groups, each
  masked to one relation set (the seven Topoformer graphs by default); a node
  always attends to itself too, so no softmax row is empty;
* ``y = MLP(LN(h))`` (eq. 7), optionally standardised ``alpha (y - mean) / std``
  (C.2, eq. 17; paper 001 replaces this by a logit-norm penalty in training).

``EncoderConfig.groups`` chooses the encoder of the ablation (paper 000, 5.3):
``"topoformer"`` (seven graphs), ``"dag"`` (the same masked scaled dot-product
attention restricted to DAG edges, one head group over predecessors and one over
successors -- not GAT's additive attention) and ``"mlp"`` (no attention).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from onnx_sched.models.inference.features import DEFAULT_FEATURES, PE_DIM, SELF

__all__ = ["ENCODERS", "EncoderConfig", "Topoformer", "export_onnx"]

# relation codes per attention group, see features.RELATIONS
ENCODERS: dict[str, tuple[tuple[int, ...], ...]] = {
    "topoformer": ((0,), (1,), (2,), (3,), (4,), (5,), (6,)),
    "dag": ((0, 1), (3, 4)),
    "mlp": (),
}


@dataclass(frozen=True)
class EncoderConfig:
    """Architecture hyper-parameters (paper C.2 uses d=256, 4 layers, 10 heads per graph, head dim 64)."""

    in_dim: int
    encoder: str = "topoformer"
    d_model: int = 64
    n_layers: int = 3
    heads_per_group: int = 2
    head_dim: int = 16
    ffn_dim: int = 128
    prio_norm: str = "none"  # "none" (paper 001) or "standardize" (paper 000, eq. 17)
    alpha: float = 5.0
    features: tuple[str, ...] = field(default=DEFAULT_FEATURES)
    pe_dim: int = PE_DIM

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {self.encoder!r}; expected one of {sorted(ENCODERS)}")
        if self.prio_norm not in ("none", "standardize"):
            raise ValueError(f"prio_norm must be 'none' or 'standardize', got {self.prio_norm!r}")

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        return ENCODERS[self.encoder]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> EncoderConfig:
        d = json.loads(text)
        d["features"] = tuple(d["features"])
        return EncoderConfig(**d)


class _Block(nn.Module):
    def __init__(self, cfg: EncoderConfig, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, cfg.head_dim
        if n_heads:
            self.ln_att = nn.LayerNorm(cfg.d_model)
            self.qkv = nn.Linear(cfg.d_model, 3 * n_heads * cfg.head_dim)
            self.out = nn.Linear(n_heads * cfg.head_dim, cfg.d_model)
        self.ln_mlp = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.ffn_dim), nn.GELU(), nn.Linear(cfg.ffn_dim, cfg.d_model))

    def attend(self, h: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """``h + MHA(LN(h))`` with the masked heads (eq. 4); ``h`` itself when there are no heads."""
        if not self.n_heads:
            return h
        n = h.shape[0]
        q, k, v = self.qkv(self.ln_att(h)).reshape(n, 3, self.n_heads, self.head_dim).permute(1, 2, 0, 3).unbind(0)
        scores = torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(self.head_dim)) + bias
        att = torch.softmax(scores, dim=-1)
        msg = torch.matmul(att, v).permute(1, 0, 2).reshape(n, self.n_heads * self.head_dim)
        return h + self.out(msg)

    def forward(self, h: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        h = self.attend(h, bias)
        return h + self.mlp(self.ln_mlp(h))


class Topoformer(nn.Module):
    """Node features + relation codes -> one priority per node (see module docstring)."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_heads = len(cfg.groups) * cfg.heads_per_group
        self.embed = nn.Linear(cfg.in_dim, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg, self.n_heads) for _ in range(cfg.n_layers))
        self.ln_out = nn.LayerNorm(cfg.d_model)
        self.head = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nn.ReLU(), nn.Linear(cfg.d_model, 1))

    def attention_bias(self, rel: torch.Tensor) -> torch.Tensor | None:
        """``(heads, n, n)`` additive mask: 0 where a head's group allows attention, -1e9 elsewhere."""
        if not self.n_heads:
            return None
        r = rel.to(torch.float32)
        self_mask = r == float(SELF)
        masks = []
        for codes in self.cfg.groups:
            allowed = self_mask
            for c in codes:
                allowed = allowed | (r == float(c))
            masks.append(allowed)
        allowed = torch.stack(masks)  # (G, n, n)
        g, n = allowed.shape[0], allowed.shape[1]
        allowed = allowed.unsqueeze(1).expand(g, self.cfg.heads_per_group, n, n).reshape(self.n_heads, n, n)
        zero = torch.zeros((), dtype=torch.float32)
        neg = torch.full((), -1e9, dtype=torch.float32)
        return torch.where(allowed, zero, neg)

    def forward(self, x: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        """``x``: (n, in_dim) float32, ``rel``: (n, n) int8 relation codes -> (n,) priorities."""
        bias = self.attention_bias(rel)
        h = self.embed(x)
        for block in self.blocks:
            h = block(h, bias)
        y = self.head(self.ln_out(h)).squeeze(-1)
        if self.cfg.prio_norm == "standardize":
            y = self.cfg.alpha * (y - y.mean()) / (y.std(unbiased=False) + 1e-6)
        return y


def export_onnx(model: Topoformer, path: str, meta: dict[str, str] | None = None, opset: int = 17) -> None:
    """Write ``model`` as ONNX (inputs ``x`` (n, k) float32, ``rel`` (n, n) int8; output ``priority`` (n,)),
    dynamic in ``n``, IR version <= 10, with the config in ``metadata_props``."""
    import io

    import onnx

    model = model.eval()
    n = 12
    x = torch.zeros(n, model.cfg.in_dim)
    rel = torch.full((n, n), 6, dtype=torch.int8)
    rel.fill_diagonal_(SELF)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model,
            (x, rel),
            buf,
            input_names=["x", "rel"],
            output_names=["priority"],
            dynamic_axes={"x": {0: "n"}, "rel": {0: "n", 1: "n"}, "priority": {0: "n"}},
            opset_version=opset,
            dynamo=False,
        )
    proto = onnx.load_from_string(buf.getvalue())
    proto.ir_version = min(proto.ir_version, 10)
    props = {"onnx_sched.encoder_config": model.cfg.to_json(), **(meta or {})}
    del proto.metadata_props[:]
    for key, value in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, str(value)
    onnx.checker.check_model(proto)
    tmp = f"{path}.tmp"
    onnx.save(proto, tmp)
    import os

    os.replace(tmp, path)
