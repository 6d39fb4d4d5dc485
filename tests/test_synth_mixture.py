"""Issue 17's training mixture: randwire-er/ws/ba, transformer, corpus-subgraph, and the held-out split."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_sched.dag import is_topological_order, kahn_order
from onnx_sched.graph import Graph, TensorKind
from onnx_sched.synth import FAMILIES, generate
from onnx_sched.synth.corpus_split import HELD_OUT_PEAKMEM, corpus_dir, held_out_models, train_models
from onnx_sched.synth.corpus_subgraph import corpus_subgraph_graph
from onnx_sched.synth.onnx_writer import graph_to_onnx
from onnx_sched.synth.randwire import RandWireParams, randwire_graph
from onnx_sched.synth.transformer import TransformerParams, transformer_graph

CORPUS = corpus_dir()
HAS_CORPUS = (CORPUS / "randwire_ws.onnx").is_file()
needs_corpus = pytest.mark.skipif(not HAS_CORPUS, reason="corpus not present")

SHAPED = ["randwire-er", "randwire-ws", "randwire-ba", "transformer"]
NEW = SHAPED + (["corpus-subgraph"] if HAS_CORPUS else [])
MiB = 2**20


def _fingerprint(g: Graph) -> tuple:
    return (g.op_types, g.edges.tolist(), g.tensor_bytes.tolist(), g.tensor_kind.tolist())


def _tolerance(family: str, n: int) -> int:
    return max(int(0.1 * n), 12) if family.startswith("randwire") else 0


@pytest.mark.parametrize("family", NEW)
def test_registered_and_deterministic(family: str) -> None:
    assert family in FAMILIES
    a, b = generate(family, 150, 7), generate(family, 150, 7)
    assert _fingerprint(a) == _fingerprint(b)
    others = {tuple(map(str, _fingerprint(generate(family, 150, s)))) for s in (8, 9, 10)}
    assert tuple(map(str, _fingerprint(a))) not in others


@pytest.mark.parametrize("family", NEW)
@pytest.mark.parametrize("n", [30, 120, 400])
def test_op_count_acyclic_and_bytes(family: str, n: int) -> None:
    g = generate(family, n, n + 1)
    assert abs(g.n_ops - n) <= _tolerance(family, n), (g.n_ops, n)
    assert is_topological_order(g, kahn_order(g))
    b = g.tensor_bytes
    assert (b > 0).all() and (b % 4 == 0).all()
    assert b.max() <= 256 * MiB  # batch 1: no activation of a real network this size is larger
    if family in SHAPED:  # from shapes: realistic activations, not the mixture's abstract units
        assert 1024 <= np.median(b[g.tensor_kind != TensorKind.INPUT]) <= 64 * MiB
    for op in range(g.n_ops):
        assert len(g.op_outputs.row(op)) == 1


@pytest.mark.parametrize("family", NEW)
def test_written_onnx_passes_checker(family: str) -> None:
    g = generate(family, 60, 3)
    model = graph_to_onnx(g)
    onnx.checker.check_model(model, full_check=True)
    assert sum(1 for node in model.graph.node if node.op_type == "Einsum") >= g.n_ops
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: np.zeros(i.shape, np.float32) for i in session.get_inputs()}
    outputs = dict(zip((o.name for o in session.get_outputs()), session.run(None, feeds)))
    for t in np.flatnonzero(g.tensor_kind == TensorKind.OUTPUT):  # graph outputs with the graph's sizes
        assert outputs[g.tensor_names[t]].nbytes == g.tensor_bytes[t]


@pytest.mark.parametrize("wiring", ["er", "ws", "ba"])
@pytest.mark.parametrize("bn", [0.0, 1.0])
def test_randwire_node_pattern(wiring: str, bn: float) -> None:
    g = randwire_graph(300, 4, RandWireParams(wiring=wiring, unfolded_bn_prob=bn))
    assert g.metadata["unfolded_bn"] == (bn == 1.0)
    nodes: dict[str, list[int]] = defaultdict(list)
    for op, name in enumerate(g.op_names):
        if "/nodes." in name:
            nodes[name.split("/op/")[0] if "/op/" in name else name.rsplit("/", 1)[0]].append(op)
    assert len(nodes) >= 3 * g.metadata["nodes_per_stage"] - 3
    producer = g.tensor_producer
    for prefix, ops in nodes.items():
        types = Counter(g.op_types[op] for op in ops)
        k = types["Mul"]
        assert types["Add"] == max(k - 1, 0), prefix  # weighted sum: one Mul per input, k - 1 Adds
        assert types["Conv"] == 2 and types["Relu"] <= 1, prefix
        assert types["BatchNormalization"] == (1 if bn else 0), prefix
        if k:
            assert types["Relu"] == 1  # an aggregating node has its own Relu
        dw, pw = (op for op in ops if g.op_types[op] == "Conv")
        assert g.op_attrs[dw]["group"] > 1 and g.op_attrs[dw]["kernel_shape"] == [3, 3]
        assert g.op_attrs[pw]["kernel_shape"] == [1, 1]
        (dw_in,) = g.op_inputs.row(dw)
        assert g.op_types[producer[dw_in]] == "Relu"  # Relu -> depthwise Conv -> pointwise Conv
        (pw_in,) = g.op_inputs.row(pw)
        assert producer[pw_in] == dw


@needs_corpus
def test_randwire_matches_real_export() -> None:
    from onnx_sched.importers.onnx import import_onnx

    real = import_onnx(CORPUS / "randwire_ws.onnx").graph
    params = RandWireParams(wiring="ws", regular_prob=0.0, channels_low=78, channels_high=78, image_sizes=(224,),
                            unfolded_bn_prob=0.0)
    syn = randwire_graph(real.n_ops, 0, params)
    assert abs(syn.n_ops - real.n_ops) <= 12
    rt, st = Counter(real.op_types), Counter(syn.op_types)
    for t in ("Conv", "Mul", "Add", "Relu"):
        assert abs(st[t] - rt[t]) <= 0.1 * rt[t] + 3, (t, st[t], rt[t])
    assert sorted(set(real.op_output_bytes.tolist())) == sorted(set(syn.op_output_bytes.tolist()))
    assert abs(syn.op_preds.lengths().mean() - real.op_preds.lengths().mean()) < 0.05


def test_transformer_softmax_per_head_group() -> None:
    for seed in range(6):
        g = transformer_graph(900, seed, TransformerParams(per_group_prob=1.0, gqa_prob=1.0, rms_prob=1.0,
                                                           decoder_prob=0.65))
        groups = g.metadata["softmax_groups"]
        assert groups
        names = set(g.op_names)
        for block, count in groups.items():
            if f"{block}/o_proj/MatMul" not in names:  # cut by the n-op prefix
                continue
            softmax = [n for n in g.op_names if n.startswith(block + "/Softmax")]
            assert len(softmax) == count
            kv = g.metadata["kv_heads"] if "/self_attn" in block else g.metadata["heads"]
            assert count == kv
        if g.metadata["architecture"] == "decoder":
            assert g.metadata["kv_heads"] < g.metadata["heads"]  # GQA


def test_transformer_batched_attention_and_kinds() -> None:
    kinds = set()
    for seed in range(12):
        g = transformer_graph(500, seed, TransformerParams(per_group_prob=0.0))
        kinds.add(g.metadata["architecture"])
        assert set(g.metadata["softmax_groups"].values()) == {1}
        full = [b for b in g.metadata["softmax_groups"] if f"{b}/o_proj/MatMul" in g.op_names]
        assert Counter(g.op_types)["Softmax"] >= len(full)
        if g.metadata["architecture"] == "encoder-decoder":
            assert any("/cross_attn/" in n for n in g.op_names)
    assert kinds == {"encoder", "decoder", "encoder-decoder"}


@needs_corpus
def test_held_out_split_written_down() -> None:
    names = {p.stem for p in sorted(CORPUS.glob("*.onnx"))}
    assert set(HELD_OUT_PEAKMEM) <= names and 8 <= len(HELD_OUT_PEAKMEM) <= 10
    train = {p.stem for p in train_models()}
    assert train.isdisjoint(HELD_OUT_PEAKMEM) and train | {p.stem for p in held_out_models()} == names
    doc = (Path(__file__).resolve().parents[1] / "docs" / "issue17_split.md").read_text()
    assert all(f"`{m}`" in doc for m in HELD_OUT_PEAKMEM)


@needs_corpus
def test_corpus_subgraphs_never_from_held_out(tmp_path: Path) -> None:
    held, kept = HELD_OUT_PEAKMEM[0], "light_squeezenet"
    for stem in (held, kept, HELD_OUT_PEAKMEM[1]):
        (tmp_path / f"{stem}.onnx").symlink_to(CORPUS / f"{stem}.onnx")
    seen = {corpus_subgraph_graph(20, s, corpus=tmp_path).metadata["model"] for s in range(25)}
    assert seen == {kept}
    with pytest.raises(ValueError, match="no train-split model"):
        corpus_subgraph_graph(500, 0, corpus=tmp_path)  # only held-out models are that big
    models = {generate("corpus-subgraph", 60, s).metadata["model"] for s in range(40)}
    assert len(models) > 5 and models.isdisjoint(HELD_OUT_PEAKMEM)


@needs_corpus
def test_corpus_subgraph_regions_keep_model_sizes() -> None:
    from onnx_sched.synth.corpus_subgraph import CorpusSubgraphParams, _load

    for region, w in (("prefix", (1, 0, 0)), ("window", (0, 1, 0)), ("bfs", (0, 0, 1))):
        g = corpus_subgraph_graph(80, 2, CorpusSubgraphParams(*w))
        assert g.metadata["region"] == region and g.n_ops == 80
        model = _load(str(CORPUS / f"{g.metadata['model']}.onnx"))
        by_name = dict(zip(model.op_names, model.op_output_bytes.tolist()))
        assert all(-(-by_name[n] // 4) * 4 == b for n, b in zip(g.op_names, g.op_output_bytes.tolist()))
        if region == "prefix":  # downward closed: only the model's own graph inputs come from outside
            inputs = {g.tensor_names[t] for t in np.flatnonzero(g.tensor_kind == TensorKind.INPUT)}
            assert inputs <= {model.tensor_names[t] for t in np.flatnonzero(model.tensor_kind == TensorKind.INPUT)}
    noisy = corpus_subgraph_graph(80, 2, CorpusSubgraphParams(0, 0, 1, noise=0.3))
    plain = corpus_subgraph_graph(80, 2, CorpusSubgraphParams(0, 0, 1))
    assert noisy.op_names == plain.op_names and noisy.tensor_bytes.tolist() != plain.tensor_bytes.tolist()


@pytest.mark.parametrize("family", SHAPED)
def test_gen_cli_writes_family(tmp_path: Path, family: str) -> None:
    from onnx_sched.cli.gen import write_dataset

    override = {"transformer": {"per_group_prob": 1.0}}.get(family, {"channels_low": 64, "channels_high": 64})
    manifest = write_dataset(family, 80, 2, 10_000, tmp_path, "onnx", override)
    assert [f["n_ops"] for f in manifest["files"]] and manifest["params"] | override == manifest["params"]
    for f in manifest["files"]:
        assert abs(f["n_ops"] - 80) <= _tolerance(family, 80)
        onnx.checker.check_model(onnx.load(tmp_path / f["file"]), full_check=True)
