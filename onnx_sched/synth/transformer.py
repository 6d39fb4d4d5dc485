"""Transformer stacks as their ONNX export has them: attention + MLP blocks with residuals.

Why: half the corpus is transformers (BERT-, GPT-, Llama-, T5-like), whose graphs are
long chains of blocks with wide fan-out at every attention (Q, K, V) and large
score tensors; a policy trained only on layered / random DAGs never sees that shape.

Family ``transformer``: :func:`transformer_graph` ``(n, seed, params, *, name)``.

One draw picks an architecture and its sizes (batch 1, float32 activations):

* ``encoder`` (BERT-like): embedding ``Gather`` + ``Add``, post-norm blocks
  ``x = LN(x + Attn(x))``, ``x = LN(x + MLP(x))`` with ``LayerNormalization``,
  GELU (erf form: ``Div``, ``Erf``, ``Add``, ``Mul``, ``Mul``) MLP of width ``4d``;
* ``decoder`` (GPT- or Llama-like): pre-norm blocks ``x = x + Attn(N(x))``,
  ``x = x + MLP(N(x))``, final norm and an LM head ``MatMul`` to the vocabulary.
  Llama-like (``rms_prob``): RMSNorm pieces (``Pow``, ``ReduceMean``, ``Add``,
  ``Sqrt``, ``Div``, ``Mul``, ``Mul``), rotary embedding on Q and K (``Mul``,
  ``Slice``, ``Slice``, ``Neg``, ``Concat``, ``Mul``, ``Add``), SwiGLU MLP of width
  ``~2.75 d``, and grouped-query attention with probability ``gqa_prob``
  (``heads / r`` KV heads, ``r`` in 2, 4, 8; K and V widened by ``Unsqueeze``,
  ``Expand``, ``Reshape``); GPT-like: ``LayerNormalization``, GELU MLP, biases;
* ``encoder-decoder`` (T5 / BART-like): an encoder stack, then a decoder stack of
  self-attention, cross-attention (K and V from the encoder output) and MLP, on a
  decoder sequence of ``seq / 4``.

Attention is ``MatMul`` projections (+ bias ``Add``), ``Reshape`` + ``Transpose`` to
heads, ``MatMul`` (scores), ``Mul`` (scale), ``Add`` (mask input), ``Softmax``,
``MatMul``, ``Transpose`` + ``Reshape``, output projection.  Exported with every head
in one batched ``Softmax`` (as the corpus's HF exports are) or, with probability
``per_group_prob``, per KV-head group (``Slice`` Q, K, V per group, one ``Softmax``
each, ``Concat``), as exports of hand-written grouped kernels are.
``metadata["softmax_groups"]`` maps each attention block (op-name prefix) to its
number of ``Softmax`` ops.

Sizes: sequence length from ``seq_lens``, hidden size ``d`` from ``hidden_sizes``,
``d / head_dim`` heads, vocabulary from ``vocab_sizes``; bytes follow from the
shapes (masks and scores ``heads x S x S``).  ``n`` (target ops): the number of
layers is the smallest that reaches ``n`` ops, and the graph is cut to its first
``n`` ops in emission order (a topological prefix), so it has exactly ``n`` ops;
the cut drops at most one layer's tail (and the head).  Deterministic in ``seed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onnx_sched.graph import Graph
from onnx_sched.synth._builder import OpGraphBuilder

__all__ = ["ARCHITECTURES", "TransformerParams", "transformer_graph"]

ARCHITECTURES = ("encoder", "decoder", "encoder-decoder")


@dataclass(frozen=True)
class TransformerParams:
    """Ranges the transformer family draws from (corpus: seq 128, d 512-1024)."""

    seq_lens: tuple[int, ...] = (64, 128, 256, 512)
    hidden_sizes: tuple[int, ...] = (256, 384, 512, 768, 1024)
    head_dim: int = 64
    vocab_sizes: tuple[int, ...] = (32000, 50257)
    encoder_prob: float = 0.35
    decoder_prob: float = 0.4  # the rest: encoder-decoder
    rms_prob: float = 0.5  # decoders: Llama-like (RMSNorm, RoPE, SwiGLU) vs GPT-like
    gqa_prob: float = 0.5  # Llama-like decoders: grouped-query attention
    per_group_prob: float = 0.25  # attention exported per KV-head group

    def __post_init__(self) -> None:
        if not self.seq_lens or min(self.seq_lens) < 4:
            raise ValueError(f"TransformerParams: sequence lengths must be >= 4, got {self.seq_lens}")
        if self.head_dim < 2 or not self.hidden_sizes or any(d % self.head_dim for d in self.hidden_sizes):
            raise ValueError(f"TransformerParams: hidden sizes {self.hidden_sizes} must be multiples of "
                             f"head_dim {self.head_dim}")
        for label in ("encoder_prob", "decoder_prob", "rms_prob", "gqa_prob", "per_group_prob"):
            if not 0.0 <= getattr(self, label) <= 1.0:
                raise ValueError(f"TransformerParams: {label} must be in [0, 1], got {getattr(self, label)}")
        if self.encoder_prob + self.decoder_prob > 1.0:
            raise ValueError("TransformerParams: encoder_prob + decoder_prob must be <= 1")


@dataclass(frozen=True)
class _Arch:
    kind: str
    seq: int
    d: int
    heads: int
    kv_heads: int
    vocab: int
    llama: bool
    per_group: bool

    @property
    def dec_seq(self) -> int:
        return max(4, self.seq // 4) if self.kind == "encoder-decoder" else self.seq


def _draw_arch(rng: np.random.Generator, p: TransformerParams) -> _Arch:
    u = rng.random()
    kind = "encoder" if u < p.encoder_prob else ("decoder" if u < p.encoder_prob + p.decoder_prob else "encoder-decoder")
    seq = int(p.seq_lens[int(rng.integers(len(p.seq_lens)))])
    d = int(p.hidden_sizes[int(rng.integers(len(p.hidden_sizes)))])
    heads = d // p.head_dim
    llama = kind == "decoder" and rng.random() < p.rms_prob
    gqa = llama and rng.random() < p.gqa_prob
    ratios = [r for r in (2, 4, 8) if heads % r == 0 and heads // r >= 1]
    kv = heads // int(ratios[int(rng.integers(len(ratios)))]) if gqa and ratios else heads
    vocab = int(p.vocab_sizes[int(rng.integers(len(p.vocab_sizes)))])
    return _Arch(kind, seq, d, heads, kv, vocab, llama, bool(rng.random() < p.per_group_prob))


class _Emitter:
    """Emits one transformer into an :class:`OpGraphBuilder`."""

    def __init__(self, arch: _Arch, head_dim: int) -> None:
        self.b = OpGraphBuilder()
        self.a = arch
        self.hd = head_dim
        self.softmax_groups: dict[str, int] = {}

    def op(self, op_type: str, ins: list[int], shape: tuple[int, ...], name: str, **attrs: object) -> int:
        return self.b.op(op_type, ins, shape, name, **attrs)

    def linear(self, x: int, out: int, name: str, bias: bool) -> int:
        shape = (*self.b.shape(x)[:-1], out)
        y = self.op("MatMul", [x], shape, f"{name}/MatMul", weight_shape=(self.b.shape(x)[-1], out))
        return self.op("Add", [y], shape, f"{name}/Add") if bias else y

    def norm(self, x: int, name: str) -> int:
        s = self.b.shape(x)
        if not self.a.llama:
            return self.op("LayerNormalization", [x], s, f"{name}/LayerNormalization", axis=-1)
        p = self.op("Pow", [x], s, f"{name}/Pow")
        m = self.op("ReduceMean", [p], (*s[:-1], 1), f"{name}/ReduceMean")
        e = self.op("Add", [m], (*s[:-1], 1), f"{name}/Add")
        r = self.op("Sqrt", [e], (*s[:-1], 1), f"{name}/Sqrt")
        v = self.op("Div", [r], (*s[:-1], 1), f"{name}/Div")
        y = self.op("Mul", [x, v], s, f"{name}/Mul")
        return self.op("Mul", [y], s, f"{name}/Mul_1")

    def heads(self, x: int, n_heads: int, name: str, key: bool = False) -> int:
        _, s, _ = self.b.shape(x)
        r = self.op("Reshape", [x], (1, s, n_heads, self.hd), f"{name}/Reshape")
        shape = (1, n_heads, self.hd, s) if key else (1, n_heads, s, self.hd)
        return self.op("Transpose", [r], shape, f"{name}/Transpose", perm=[0, 2, 3, 1] if key else [0, 2, 1, 3])

    def rope(self, x: int, name: str) -> int:
        s = self.b.shape(x)
        half = (*s[:-1], s[-1] // 2)
        a = self.op("Mul", [x], s, f"{name}/Mul")
        lo = self.op("Slice", [x], half, f"{name}/Slice")
        hi = self.op("Slice", [x], half, f"{name}/Slice_1")
        neg = self.op("Neg", [hi], half, f"{name}/Neg")
        rot = self.op("Concat", [neg, lo], s, f"{name}/Concat", axis=-1)
        b = self.op("Mul", [rot], s, f"{name}/Mul_1")
        return self.op("Add", [a, b], s, f"{name}/Add")

    def widen(self, x: int, name: str) -> int:
        """GQA: repeat each KV head ``heads / kv_heads`` times (Unsqueeze, Expand, Reshape)."""
        _, kv, s1, s2 = self.b.shape(x)
        rep = self.a.heads // kv
        u = self.op("Unsqueeze", [x], (1, kv, 1, s1, s2), f"{name}/Unsqueeze")
        e = self.op("Expand", [u], (1, kv, rep, s1, s2), f"{name}/Expand")
        return self.op("Reshape", [e], (1, kv * rep, s1, s2), f"{name}/Reshape")

    def scores(self, q: int, k: int, v: int, mask: int, name: str, tag: str = "") -> int:
        _, h, sq, _ = self.b.shape(q)
        sk = self.b.shape(k)[-1]
        s = self.op("MatMul", [q, k], (1, h, sq, sk), f"{name}/MatMul{tag}")
        s = self.op("Mul", [s], (1, h, sq, sk), f"{name}/Mul{tag}")
        s = self.op("Add", [s, mask], (1, h, sq, sk), f"{name}/Add{tag}")
        s = self.op("Softmax", [s], (1, h, sq, sk), f"{name}/Softmax{tag}", axis=-1)
        return self.op("MatMul", [s, v], (1, h, sq, self.hd), f"{name}/MatMul_1{tag}")

    def attention(self, x: int, kv_src: int, mask: int, name: str, self_attn: bool) -> int:
        a, d = self.a, self.a.d
        kv = a.kv_heads if self_attn else a.heads
        bias = not a.llama
        q = self.heads(self.linear(x, d, f"{name}/q_proj", bias), a.heads, f"{name}/q")
        k = self.heads(self.linear(kv_src, kv * self.hd, f"{name}/k_proj", bias), kv, f"{name}/k", key=True)
        v = self.heads(self.linear(kv_src, kv * self.hd, f"{name}/v_proj", bias), kv, f"{name}/v")
        if a.llama and self_attn:
            q, k = self.rope(q, f"{name}/rope_q"), self.rope(k, f"{name}/rope_k")
        _, h, sq, _ = self.b.shape(q)
        if a.per_group:
            rep = a.heads // kv
            outs = []
            for g in range(kv):
                qg = self.op("Slice", [q], (1, rep, sq, self.hd), f"{name}/Slice_q{g}")
                kg = self.op("Slice", [k], (1, 1, *self.b.shape(k)[2:]), f"{name}/Slice_k{g}")
                vg = self.op("Slice", [v], (1, 1, *self.b.shape(v)[2:]), f"{name}/Slice_v{g}")
                outs.append(self.scores(qg, kg, vg, mask, name, f"_g{g}"))
            o = self.op("Concat", outs, (1, h, sq, self.hd), f"{name}/Concat", axis=1)
            self.softmax_groups[name] = kv
        else:
            if kv != a.heads:
                k, v = self.widen(k, f"{name}/repeat_k"), self.widen(v, f"{name}/repeat_v")
            o = self.scores(q, k, v, mask, name)
            self.softmax_groups[name] = 1
        o = self.op("Transpose", [o], (1, sq, h, self.hd), f"{name}/Transpose_o", perm=[0, 2, 1, 3])
        o = self.op("Reshape", [o], (1, sq, d), f"{name}/Reshape_o")
        return self.linear(o, d, f"{name}/o_proj", bias)

    def mlp(self, x: int, name: str) -> int:
        d = self.a.d
        if self.a.llama:
            f = int(round(2.75 * d / 64)) * 64
            g = self.linear(x, f, f"{name}/gate_proj", False)
            s = self.op("Sigmoid", [g], self.b.shape(g), f"{name}/act/Sigmoid")
            g = self.op("Mul", [g, s], self.b.shape(g), f"{name}/act/Mul")
            u = self.linear(x, f, f"{name}/up_proj", False)
            return self.linear(self.op("Mul", [g, u], self.b.shape(u), f"{name}/Mul"), d, f"{name}/down_proj", False)
        h = self.linear(x, 4 * d, f"{name}/fc1", True)
        s = self.b.shape(h)
        t = self.op("Div", [h], s, f"{name}/gelu/Div")
        t = self.op("Erf", [t], s, f"{name}/gelu/Erf")
        t = self.op("Add", [t], s, f"{name}/gelu/Add")
        t = self.op("Mul", [h, t], s, f"{name}/gelu/Mul")
        t = self.op("Mul", [t], s, f"{name}/gelu/Mul_1")
        return self.linear(t, d, f"{name}/fc2", True)

    def embed(self, ids_name: str, seq: int, name: str) -> int:
        ids = self.b.input(ids_name, (1, seq), "int64")
        x = self.op("Gather", [ids], (1, seq, self.a.d), f"{name}/Gather")
        return x if self.a.llama else self.op("Add", [x], (1, seq, self.a.d), f"{name}/Add_pos")

    def layer(self, x: int, mask: int, name: str, post_norm: bool, memory: tuple[int, int] | None) -> int:
        res = self.op
        if post_norm:
            x = self.norm(res("Add", [x, self.attention(x, x, mask, f"{name}/self_attn", True)], self.b.shape(x),
                              f"{name}/Add"), f"{name}/attn_norm")
            return self.norm(res("Add", [x, self.mlp(x, f"{name}/mlp")], self.b.shape(x), f"{name}/Add_1"),
                             f"{name}/mlp_norm")
        n1 = self.norm(x, f"{name}/input_norm")
        x = res("Add", [x, self.attention(n1, n1, mask, f"{name}/self_attn", True)], self.b.shape(x), f"{name}/Add")
        if memory is not None:
            enc, cmask = memory
            n2 = self.norm(x, f"{name}/cross_norm")
            x = res("Add", [x, self.attention(n2, enc, cmask, f"{name}/cross_attn", False)], self.b.shape(x),
                    f"{name}/Add_cross")
        n3 = self.norm(x, f"{name}/post_attention_norm")
        return res("Add", [x, self.mlp(n3, f"{name}/mlp")], self.b.shape(x), f"{name}/Add_1")


def _emit(arch: _Arch, layers: int, head_dim: int) -> tuple[_Emitter, int]:
    """The whole network with ``layers`` layers per stack; returns the emitter and its output tensor."""
    em = _Emitter(arch, head_dim)
    b, s, sd = em.b, arch.seq, arch.dec_seq
    out = -1
    if arch.kind in ("encoder", "encoder-decoder"):
        mask = b.input("attention_mask", (1, 1, s, s))
        x = em.embed("input_ids", s, "/encoder/embed")
        post = arch.kind == "encoder"
        if post:
            x = em.norm(x, "/encoder/embed_norm")
        for i in range(layers):
            x = em.layer(x, mask, f"/encoder/layers.{i}", post, None)
        out = x if post else em.norm(x, "/encoder/final_norm")
    if arch.kind in ("decoder", "encoder-decoder"):
        memory = None
        if arch.kind == "encoder-decoder":
            memory = (out, b.input("cross_attention_mask", (1, 1, sd, s)))
        mask = b.input("causal_mask", (1, 1, sd, sd))
        x = em.embed("decoder_input_ids", sd, "/decoder/embed")
        for i in range(layers):
            x = em.layer(x, mask, f"/decoder/layers.{i}", False, memory)
        out = em.norm(x, "/decoder/final_norm")
        if arch.kind == "decoder":
            out = em.linear(out, arch.vocab, "/lm_head", False)
    return em, out


def transformer_graph(n: int, seed: int, params: TransformerParams = TransformerParams(), *,
                      name: str | None = None) -> Graph:
    """A transformer of exactly ``n`` ops (a topological prefix of the smallest stack reaching ``n``)."""
    if n < 1:
        raise ValueError(f"transformer graph needs n >= 1 ops, got {n}")
    arch = _draw_arch(np.random.default_rng(seed), params)
    one = _emit(arch, 1, params.head_dim)[0].b.n_ops
    per_layer = _emit(arch, 2, params.head_dim)[0].b.n_ops - one
    layers = max(1, math.ceil((n - (one - per_layer)) / per_layer))
    em, out = _emit(arch, layers, params.head_dim)
    meta = {
        "family": "transformer",
        "seed": int(seed),
        "architecture": arch.kind,
        "llama_like": arch.llama,
        "layers": layers,
        "seq_len": arch.seq,
        "hidden": arch.d,
        "heads": arch.heads,
        "kv_heads": arch.kv_heads,
        "per_group_attention": arch.per_group,
        "full_ops": em.b.n_ops,
        "softmax_groups": dict(em.softmax_groups),
    }
    return em.b.build(name or f"transformer-n{n}-s{seed}", outputs=[out], metadata=meta, keep_ops=n)
