"""Learned peak-memory pass: features, relation masks, decoders, ONNX export, the pass without torch, training."""

from __future__ import annotations

import collections
import itertools
import json
import subprocess
import sys
import textwrap

import networkx as nx
import numpy as np
import pytest
from conftest import BLOCK_TORCH

from onnx_sched.cost.memory import peak_memory
from onnx_sched.dag import is_topological_order
from onnx_sched.graph import Graph
from onnx_sched.models.inference.decoders import (
    beam_search,
    best_of,
    decode_graph,
    greedy,
    log_prob,
    peaks,
    sample_orders,
)
from onnx_sched.models.inference.features import (
    N_RELATIONS,
    SELF,
    encoder_inputs,
    laplacian_pe,
    node_features,
    relation_matrix,
    transitive_closure,
    transitive_reduction,
)
from onnx_sched.synth.layered import layered_graph


def _random_dag(rng: np.random.Generator, n: int, p: float) -> Graph:
    perm = rng.permutation(n)
    edges = [(int(perm[i]), int(perm[j])) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return Graph.from_edges(n, edges, output_bytes=rng.integers(1, 100, n), param_bytes=rng.integers(0, 20, n))


# ------------------------------------------------------------------ features
def test_features_shape_and_normalisation() -> None:
    g = layered_graph(80, 10000)
    x = node_features(g)
    assert x.shape == (80, 8) and x.dtype == np.float32
    assert (x >= 0).all() and (x <= 1).all()
    assert np.allclose(x.max(axis=0), 1.0)  # every column is used on a layered graph
    # in/out degree columns are the degrees divided by the max degree
    indeg = g.op_preds.lengths()
    assert np.allclose(x[:, 2], indeg / indeg.max())
    inp = encoder_inputs(g)
    assert inp.x.shape == (80, 28) and inp.rel.shape == (80, 80) and inp.rel.dtype == np.int8
    pe = laplacian_pe(g)
    assert np.allclose(np.abs(pe).max(axis=0), 1.0) and np.allclose(pe.max(axis=0), 1.0)


def test_laplacian_pe_sparse_matches_dense_eigenspaces() -> None:
    g = layered_graph(600, 10001)  # > 400 ops: sparse shift-invert path
    pe = laplacian_pe(g).astype(np.float64)
    e = g.edges
    a = np.zeros((g.n_ops, g.n_ops))
    a[e[:, 0], e[:, 1]] = a[e[:, 1], e[:, 0]] = 1
    d = 1 / np.sqrt(np.maximum(a.sum(1), 1))
    lap = np.eye(g.n_ops) - d[:, None] * a * d[None, :]
    v = pe / np.linalg.norm(pe, axis=0)
    rayleigh = np.einsum("ik,ij,jk->k", v, lap, v)
    residual = np.linalg.norm(lap @ v - v * rayleigh, axis=0)
    assert residual.max() < 1e-6 and np.all(np.diff(rayleigh) >= -1e-9)


def test_laplacian_pe_falls_back_to_the_dense_solver_when_lanczos_stalls(monkeypatch) -> None:
    """ARPACK gave "error 3: no shifts could be applied" on a 154-op cut-out of a corpus model; the
    encodings must then come from the dense solver, not an exception."""
    from scipy.sparse.linalg import ArpackError

    import onnx_sched.models.inference.features as features

    g = layered_graph(200, 10002)
    sparse = laplacian_pe(g)

    def stall(lap, k):  # noqa: ANN001, ANN202
        raise ArpackError(3)

    monkeypatch.setattr(features, "_smallest_eigs", stall)
    dense = laplacian_pe(g)
    assert dense.shape == sparse.shape and np.isfinite(dense).all()
    # the same eigenvectors up to the sign/scale convention both paths apply
    assert np.allclose(np.abs(dense), np.abs(sparse), atol=1e-4)


def test_small_graphs_pad_positional_encoding() -> None:
    g = Graph.from_edges(3, [(0, 1), (1, 2)], output_bytes=[1, 2, 3])
    pe = laplacian_pe(g)
    assert pe.shape == (3, 20) and (pe[:, 2:] == 0).all()


@pytest.mark.parametrize("seed", range(12))
def test_relations_match_networkx(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = _random_dag(rng, int(rng.integers(2, 30)), float(rng.uniform(0.05, 0.4)))
    nxg = g.to_networkx()
    n = g.n_ops
    closure = np.zeros((n, n), bool)
    for u, v in nx.transitive_closure_dag(nxg).edges:
        closure[u, v] = True
    assert (transitive_closure(g) == closure).all()
    tr = set(nx.transitive_reduction(nxg).edges)
    assert set(map(tuple, transitive_reduction(g).tolist())) == tr
    rel = relation_matrix(g)
    dag = set(nxg.edges)
    for i in range(n):
        for j in range(n):
            if i == j:
                want = SELF
            elif (j, i) in tr:
                want = 0
            elif (j, i) in dag:
                want = 1
            elif closure[j, i]:
                want = 2
            elif (i, j) in tr:
                want = 3
            elif (i, j) in dag:
                want = 4
            elif closure[i, j]:
                want = 5
            else:
                want = 6
            assert rel[i, j] == want, (i, j)
    # the seven graphs partition all ordered pairs: their union is full attention
    off = rel[~np.eye(n, dtype=bool)]
    assert set(np.unique(off)) <= set(range(N_RELATIONS))


# ------------------------------------------------------------------ decoders
def test_decoders_return_topological_orders_with_their_peaks() -> None:
    g = layered_graph(150, 10002)
    dg = decode_graph(g)
    y = np.random.default_rng(0).normal(size=g.n_ops)
    o = greedy(dg, y)
    assert is_topological_order(g, o)
    orders = sample_orders(dg, y, 8, np.random.default_rng(1))
    assert all(is_topological_order(g, s) for s in orders)
    gum = sample_orders(dg, y, 4, np.random.default_rng(1), mode="gumbel")
    assert all(is_topological_order(g, s) for s in gum)
    assert peaks(dg, orders).tolist() == [peak_memory(g, s) for s in orders]
    best, best_peak = best_of(dg, orders)
    assert best_peak == min(peak_memory(g, s) for s in orders)
    bo, bp = beam_search(dg, y, 8)
    assert is_topological_order(g, bo) and bp == peak_memory(g, bo)
    # width 1 keeps the most likely child each step: greedy decoding
    b1, _ = beam_search(dg, y, 1)
    assert b1.tolist() == o.tolist()


def test_greedy_takes_highest_priority_ready_op() -> None:
    g = Graph.from_edges(4, [(0, 1), (0, 2), (1, 3), (2, 3)], output_bytes=[1, 1, 1, 1])
    dg = decode_graph(g)
    assert greedy(dg, np.array([0.0, 1.0, 2.0, 5.0])).tolist() == [0, 2, 1, 3]
    assert greedy(dg, np.array([0.0, 3.0, 2.0, 5.0])).tolist() == [0, 1, 2, 3]


def test_race_sampler_draws_eq8_distribution() -> None:
    g = Graph.from_edges(5, [(0, 2), (1, 2), (1, 3), (3, 4)], output_bytes=[1] * 5)
    dg = decode_graph(g)
    y = np.array([0.5, -1.0, 2.0, 0.3, 1.0])
    k = 40000
    counts = collections.Counter(map(tuple, sample_orders(dg, y, k, np.random.default_rng(0)).tolist()))
    total = 0.0
    for perm in itertools.permutations(range(5)):
        if is_topological_order(g, perm):
            p = np.exp(log_prob(dg, y, np.array(perm)))
            total += p
            assert abs(counts[perm] / k - p) < 4 * np.sqrt(p * (1 - p) / k) + 1e-3, perm
        else:
            assert counts[perm] == 0
    assert abs(total - 1.0) < 1e-9


def test_memory_aware_sampler_matches_its_log_prob() -> None:
    """Samples of the memory-aware policy follow exp(log p) of the trainer's formula, which sums to one."""
    torch = pytest.importorskip("torch")
    from onnx_sched.models.inference.mem_aware import mem_aware_orders
    from onnx_sched.models.training.train_peakmem import seq_log_prob

    g = Graph.from_edges(6, [(0, 2), (1, 2), (1, 3), (3, 4), (2, 5), (4, 5)], output_bytes=[3, 1, 4, 1, 5, 2])
    dg = decode_graph(g)
    y = np.array([0.5, -1.0, 2.0, 0.3, 1.0, 0.0])
    k, beta = 40000, 0.7
    counts = collections.Counter(map(tuple, mem_aware_orders(dg, y, beta, k, seed=1).tolist()))
    perms = [p for p in itertools.permutations(range(6)) if is_topological_order(g, p)]
    assert sum(counts[p] for p in perms) == k
    probs = np.exp(seq_log_prob(torch.from_numpy(y), np.array(perms), dg, beta).numpy())
    assert abs(probs.sum() - 1.0) < 1e-6
    for perm, p in zip(perms, probs):
        assert abs(counts[perm] / k - p) < 4 * np.sqrt(p * (1 - p) / k) + 1e-3, perm
    # beta = 0 is eq. 8
    np.testing.assert_allclose(
        seq_log_prob(torch.from_numpy(y), np.array(perms), dg, 0.0).numpy(), [log_prob(dg, y, np.array(p)) for p in perms], rtol=1e-9
    )
    # greedy: priorities alone pick source 0 first; a large beta picks the smaller allocation (op 1) first
    y0 = np.array([5.0, 0, 0, 0, 0, 0])
    assert mem_aware_orders(dg, y0, 0.0)[0][0] == 0 and mem_aware_orders(dg, y0, 1e6)[0][0] == 1


def test_decoders_reject_bad_priorities() -> None:
    dg = decode_graph(Graph.from_edges(2, [(0, 1)], output_bytes=[1, 1]))
    with pytest.raises(ValueError, match="priorities"):
        greedy(dg, np.array([1.0]))
    with pytest.raises(ValueError, match="NaN"):
        greedy(dg, np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="beam width"):
        beam_search(dg, np.zeros(2), 0)


# --------------------------------------------------------- torch + ONNX parts
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from onnx_sched.models.inference.features import n_features
    from onnx_sched.models.training.topoformer import EncoderConfig, Topoformer, export_onnx

    torch.manual_seed(0)
    model = Topoformer(EncoderConfig(in_dim=n_features(), d_model=32, n_layers=2, ffn_dim=64)).eval()
    path = tmp_path_factory.mktemp("model") / "enc.onnx"
    export_onnx(model, str(path))
    return model, path


def test_onnx_encoder_matches_torch(exported) -> None:
    import onnx
    import torch

    from onnx_sched.models.inference.topoformer_onnx import PriorityModel

    model, path = exported
    assert onnx.load(str(path)).ir_version <= 10
    pm = PriorityModel.load(path)
    for n, seed in ((40, 10003), (260, 10004)):  # dynamic size
        g = layered_graph(n, seed)
        inp = encoder_inputs(g)
        with torch.no_grad():
            want = model(torch.from_numpy(inp.x), torch.from_numpy(inp.rel)).numpy()
        np.testing.assert_allclose(pm.priorities(g), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("encoder", ["mlp", "dag"])
def test_ablation_encoders_export(tmp_path, encoder: str) -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.inference.features import n_features
    from onnx_sched.models.inference.topoformer_onnx import PriorityModel
    from onnx_sched.models.training.topoformer import EncoderConfig, Topoformer, export_onnx

    model = Topoformer(EncoderConfig(in_dim=n_features(), encoder=encoder, d_model=16, n_layers=1, prio_norm="standardize")).eval()
    export_onnx(model, str(tmp_path / "m.onnx"))
    g = layered_graph(50, 10005)
    inp = encoder_inputs(g)
    with torch.no_grad():
        want = model(torch.from_numpy(inp.x), torch.from_numpy(inp.rel)).numpy()
    got = PriorityModel.load(tmp_path / "m.onnx").priorities(g)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert abs(got.std() - 5.0) < 1e-2  # eq. 17 standardisation with alpha = 5


def test_pass_runs_without_torch(exported) -> None:
    _, path = exported
    code = BLOCK_TORCH + textwrap.dedent(
        f"""
        from onnx_sched.dag import is_topological_order
        from onnx_sched.passes import PassContext, get_pass
        from onnx_sched.synth.layered import layered_graph
        g = layered_graph(120, 10006)
        run = get_pass("learned", "peak-mem")
        out = {{}}
        for name, opts in (("greedy", {{}}), ("sample", {{"samples": 4}}), ("beam", {{"beam": 4}})):
            s = run(g, PassContext(options={{"model": {str(path)!r}, **opts}}))
            assert is_topological_order(g, s.order), name
            assert s.info["peak_bytes"] <= s.info["policy_peak_bytes"], name  # the repair never loses
            out[name] = s.info["policy_peak_bytes"]
        assert "torch" not in sys.modules
        print(json.dumps(out))
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["sample"] <= out["greedy"]  # the sampler keeps the greedy order as a candidate (before the repair)


def test_pass_reports_missing_checkpoint(tmp_path) -> None:
    from onnx_sched.errors import OnnxSchedError
    from onnx_sched.passes import PassContext, get_pass

    with pytest.raises(OnnxSchedError, match="checkpoint .* not found"):
        get_pass("learned", "peak-mem")(layered_graph(20, 10007), PassContext(options={"model": str(tmp_path / "none.onnx")}))


def test_pass_rejects_samples_and_beam(exported) -> None:
    from onnx_sched.passes import PassContext, get_pass

    _, path = exported
    with pytest.raises(ValueError, match="either samples or beam"):
        get_pass("learned", "peak-mem")(layered_graph(20, 10007), PassContext(options={"model": str(path), "samples": 2, "beam": 2}))


# ------------------------------------------------------------------ training
def test_log_prob_matches_reference_and_training_step_updates(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.topoformer import Topoformer
    from onnx_sched.models.training.train_peakmem import TrainConfig, prepare, seq_log_prob, train_step

    prep = prepare(layered_graph(40, 123))
    y = torch.randn(40, dtype=torch.float64)
    orders = sample_orders(prep.dg, y.numpy(), 3, np.random.default_rng(0))
    lp = seq_log_prob(y, orders, prep.dg)
    want = [log_prob(prep.dg, y.numpy(), o) for o in orders]
    np.testing.assert_allclose(lp.numpy(), want, rtol=1e-9)

    for variant in ("paper001", "paper000"):
        cfg = TrainConfig.for_variant(variant, d_model=16, n_layers=1, samples=4, out_dir=str(tmp_path))
        torch.manual_seed(0)
        model = Topoformer(cfg.encoder_config())
        base = Topoformer(cfg.encoder_config()).eval() if cfg.baseline == "rollout" else None
        before = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        stats = train_step(cfg, model, base, opt, [prepare(layered_graph(30, 1)), prepare(layered_graph(40, 2))], np.random.default_rng(0))
        assert np.isfinite(stats["loss"])
        assert any((a != b).any() for a, b in zip(before, model.parameters()))


def test_train_checkpoints_resume_and_export(tmp_path) -> None:
    pytest.importorskip("torch")
    from onnx_sched.models.inference.topoformer_onnx import PriorityModel
    from onnx_sched.models.training.peakmem_export import export_checkpoint
    from onnx_sched.models.training.train_peakmem import TrainConfig, train

    cfg = TrainConfig.for_variant(
        "paper000", out_dir=str(tmp_path / "run"), d_model=16, n_layers=1, epochs=1, steps_per_epoch=2,
        batch_graphs=1, samples=4, min_ops=20, max_ops=30, val_graphs=2, val_ops=30, reference_beam=4,
    )
    train(cfg, echo=lambda s: None)
    from dataclasses import replace

    st = train(replace(cfg, epochs=2), resume=True, echo=lambda s: None)
    assert st["epoch"] == 2 and st["step"] == 4
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2] and all(np.isfinite(r["val_greedy_gap_pct"]) for r in log)
    onnx_path, pt_path = export_checkpoint(tmp_path / "run" / "checkpoint.pt", tmp_path / "out" / "m")
    assert pt_path.is_file()
    y = PriorityModel.load(onnx_path).priorities(layered_graph(25, 10008))
    assert y.shape == (25,)


def test_init_from_starts_a_new_run_from_exported_weights(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from dataclasses import replace

    from onnx_sched.models.training.peakmem_export import export_checkpoint, load_model
    from onnx_sched.models.training.train_peakmem import TrainConfig, train

    cfg = TrainConfig.for_variant(
        "paper001", out_dir=str(tmp_path / "a"), d_model=16, n_layers=1, epochs=1, steps_per_epoch=1,
        batch_graphs=1, samples=4, min_ops=20, max_ops=30, val_graphs=1, val_ops=30, reference_beam=4,
    )
    train(cfg, echo=lambda s: None)
    _, pt = export_checkpoint(tmp_path / "a" / "checkpoint.pt", tmp_path / "a" / "export")
    start = load_model(pt).state_dict()
    # lr 0: one update must leave the loaded weights as they are
    st = train(replace(cfg, out_dir=str(tmp_path / "b"), init_from=str(pt), lr=0.0), echo=lambda s: None)
    assert st["epoch"] == 1 and st["step"] == 1  # a fresh run: counters and optimizer start over
    assert all(torch.equal(st["model"][k], v) for k, v in start.items())
    # the starting weights are validated first (epoch 0) and are the best so far
    log = [json.loads(line) for line in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1] and st["best_gap"] == log[0]["val_greedy_gap_pct"]
    assert all(torch.equal(st["best"][k], v) for k, v in start.items())
    with pytest.raises(ValueError, match="encoder config differs"):
        train(replace(cfg, out_dir=str(tmp_path / "c"), init_from=str(pt), d_model=32), echo=lambda s: None)


def test_expert_orders_are_cached_approximate_dp_orders(tmp_path) -> None:
    from onnx_sched.models.training.expert_orders import ExpertSpec, build_experts, load_expert
    from onnx_sched.passes import PassContext, get_pass

    specs = [ExpertSpec(30, 5, 16), ExpertSpec(40, 6, 16)]
    paths = build_experts(specs, tmp_path, workers=2)
    assert [p.name for p in paths] == ["layered_n30_seed5_beam16.npy", "layered_n40_seed6_beam16.npy"]
    for spec in specs:
        g = layered_graph(spec.n_ops, spec.seed)
        order = load_expert(spec, tmp_path)
        assert is_topological_order(g, order.tolist())
        want = get_pass("beam", "peak-mem")(g, PassContext(options={"beam_width": 16})).info["peak_bytes"]
        assert peak_memory(g, order.tolist()) == want
    # a cached file is read back, not recomputed
    np.save(specs[0].path(tmp_path), np.arange(30, dtype=np.int32))
    assert load_expert(specs[0], tmp_path).tolist() == list(range(30))


def test_training_mixture_takes_the_families_in_turn(tmp_path) -> None:
    """Issue 17's mixture: demonstrations and validation graphs cycle through the named families, each
    demonstration is the beam order of exactly that family's graph, and the cache names the family."""
    pytest.importorskip("torch")
    from onnx_sched.models.training.expert_orders import load_expert
    from onnx_sched.models.training.train_peakmem import TrainConfig, imitation_specs, validation_set
    from onnx_sched.synth import generate

    cfg = TrainConfig(families=("er", "layered", "ws"), val_families=("ba", "layered"), expert_graphs=5, expert_width=8,
                      min_ops=20, max_ops=30, val_graphs=4, val_ops=25)
    specs = imitation_specs(cfg)
    assert [s.family for s in specs] == ["er", "layered", "ws", "er", "layered"]
    assert len({s.seed for s in specs}) == 5 and all(20 <= s.n_ops <= 30 for s in specs)
    spec = specs[2]
    order = load_expert(spec, tmp_path)
    assert (tmp_path / f"ws_n{spec.n_ops}_seed{spec.seed}_beam8.npy").is_file()
    g = generate("ws", spec.n_ops, spec.seed)
    assert is_topological_order(g, order.tolist())
    val = validation_set(cfg)
    want = [generate(f, 25, 9000 + i) for i, f in enumerate(["ba", "layered", "ba", "layered"])]
    assert [p.graph.n_ops for p in val] == [w.n_ops for w in want]
    assert all(np.array_equal(p.graph.tensor_bytes, w.tensor_bytes) for p, w in zip(val, want, strict=True))


def test_imitation_raises_the_likelihood_of_the_demonstration(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from onnx_sched.models.training.expert_orders import ExpertSpec, load_expert
    from onnx_sched.models.training.topoformer import Topoformer
    from onnx_sched.models.training.train_peakmem import TrainConfig, imitation_step, prepare, seq_log_prob, train

    cfg = TrainConfig(d_model=16, n_layers=1, objective="imitation", expert_dir=str(tmp_path / "experts"))
    spec = ExpertSpec(40, 3, 16)
    prep, order = prepare(layered_graph(40, 3)), load_expert(spec, cfg.expert_dir)
    torch.manual_seed(0)
    model = Topoformer(cfg.encoder_config())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    lik = lambda: float(seq_log_prob(model(prep.x, prep.rel), order[None], prep.dg)[0])  # noqa: E731
    before = lik()
    for _ in range(30):
        stats = imitation_step(cfg, model, opt, [(prep, order)])
    assert lik() > before + 5.0
    assert 0.0 < stats["best_over_mean"] <= 1.0

    run = TrainConfig(
        out_dir=str(tmp_path / "run"), d_model=16, n_layers=1, epochs=1, steps_per_epoch=2, batch_graphs=2,
        min_ops=20, max_ops=30, val_graphs=1, val_ops=30, reference_beam=4, objective="imitation",
        expert_width=8, expert_graphs=3, expert_dir=str(tmp_path / "experts"), val_samples=4, val_temperature=0.5,
    )
    st = train(run, echo=lambda s: None)
    assert st["step"] == 2 and len(list((tmp_path / "experts").glob("*beam8.npy"))) == 3
    assert st["log"][-1]["val_metric"] == "sample-4 (T=0.5)" and np.isfinite(st["log"][-1]["val_greedy_gap_pct"])
    with pytest.raises(ValueError, match="unknown objective"):
        train(TrainConfig(out_dir=str(tmp_path / "bad"), objective="dagger"), echo=lambda s: None)


def test_auto_portfolio_includes_the_learned_policy_and_survives_without_it() -> None:
    from onnx_sched.passes import PassContext, get_pass

    g = layered_graph(120, 10003)
    s = get_pass("auto", "peak-mem")(g, PassContext(time_limit=3))
    assert s.info["learned"] == "ok" and "learned" in s.info["candidates"]
    assert s.info["candidates"][s.info["chosen"]] <= s.info["candidates"]["learned"]
    missing = get_pass("auto", "peak-mem")(g, PassContext(time_limit=3, options={"model": "/nonexistent/m.onnx"}))
    assert missing.info["learned"].startswith("unavailable") and "learned" not in missing.info["candidates"]
    off = get_pass("auto", "peak-mem")(g, PassContext(time_limit=3, options={"learned": 0}))
    assert off.info["learned"] == "disabled"


def test_sampling_temperature_comes_from_the_checkpoint_and_can_be_overridden(tmp_path) -> None:
    import shutil

    import onnx

    from onnx_sched.models.inference.topoformer_onnx import (
        DEFAULT_CHECKPOINT,
        TEMPERATURE_KEY,
        PriorityModel,
        set_sample_temperature,
    )
    from onnx_sched.passes import PassContext, get_pass

    path = tmp_path / "m.onnx"
    shutil.copy(DEFAULT_CHECKPOINT, path)
    set_sample_temperature(path, 2.5, "test")
    assert PriorityModel.load(path).sample_temperature == 2.5
    assert {p.key: p.value for p in onnx.load(str(path)).metadata_props}[TEMPERATURE_KEY] == "2.5"
    g = layered_graph(60, 10007)
    run = get_pass("learned", "peak-mem")
    s = run(g, PassContext(options={"samples": 4, "model": str(path)}))
    assert s.info["decoder"] == "sample-4 (T=2.5)"
    s1 = run(g, PassContext(options={"samples": 4, "model": str(path), "temperature": 1.0}))
    assert s1.info["decoder"] == "sample-4"
    with pytest.raises(ValueError, match="temperature"):
        run(g, PassContext(options={"samples": 4, "model": str(path), "temperature": 0}))


def test_memory_aware_decoding_in_beam_search_and_the_pass(tmp_path) -> None:
    import shutil

    from onnx_sched.models.inference.mem_aware import mem_aware_orders
    from onnx_sched.models.inference.topoformer_onnx import DEFAULT_CHECKPOINT, PriorityModel, set_sample_temperature
    from onnx_sched.passes import PassContext, get_pass

    g = layered_graph(80, 10011)
    dg = decode_graph(g)
    y = np.random.default_rng(3).normal(size=g.n_ops)
    for beta in (0.5, 5.0):
        # width 1: every step keeps the single highest-logit child, i.e. the policy's greedy order
        order, peak = beam_search(dg, y, 1, mem_beta=beta)
        assert order.tolist() == mem_aware_orders(dg, y, beta)[0].tolist()
        assert peak == peak_memory(g, order.tolist())
    path = tmp_path / "m.onnx"
    shutil.copy(DEFAULT_CHECKPOINT, path)
    set_sample_temperature(path, 4.0, "test", mem_beta=2.0)
    assert PriorityModel.load(path).mem_beta == 2.0
    run = get_pass("learned", "peak-mem")
    logits = PriorityModel.load(path).priorities(g) / 4.0
    s = run(g, PassContext(options={"model": str(path), "repair": 0}))  # the decoder's own order
    assert s.info["decoder"] == "greedy (T=4, mem_beta=2)"
    assert list(s.order) == mem_aware_orders(dg, logits, 2.0)[0].tolist()
    s16 = run(g, PassContext(options={"model": str(path), "samples": 16, "repair": 0}))
    assert is_topological_order(g, list(s16.order)) and s16.info["peak_bytes"] <= s.info["peak_bytes"]
    sb = run(g, PassContext(options={"model": str(path), "beam": 4, "repair": 0}))
    assert sb.info["peak_bytes"] == beam_search(dg, logits, 4, mem_beta=2.0)[1]
    plain = run(g, PassContext(options={"model": str(path), "mem_beta": 0, "repair": 0}))
    assert plain.info["decoder"] == "greedy (T=4)" and list(plain.order) == greedy(dg, logits).tolist()
    set_sample_temperature(path, 4.0, "test", mem_beta=0.0)
    assert PriorityModel.load(path).mem_beta == 0.0


def test_weight_average_is_validated_kept_and_resumed(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from dataclasses import replace

    from onnx_sched.models.training.peakmem_export import export_checkpoint, load_model
    from onnx_sched.models.training.train_peakmem import TrainConfig, train

    cfg = TrainConfig.for_variant(
        "paper001", out_dir=str(tmp_path / "run"), d_model=16, n_layers=1, epochs=1, steps_per_epoch=3,
        batch_graphs=1, samples=4, min_ops=20, max_ops=30, val_graphs=1, val_ops=30, reference_beam=4,
        ema_decay=0.5, lr=1e-2,
    )
    st = train(cfg, echo=lambda s: None)
    avg = {k.removeprefix("module."): v for k, v in st["ema"].items() if k.startswith("module.")}
    assert int(st["ema"]["n_averaged"]) == 3  # one average per update
    # the kept (best) weights are the average, which lags behind the trained weights
    assert all(torch.equal(st["best"][k], v) for k, v in avg.items())
    assert any(not torch.equal(st["model"][k], v) for k, v in avg.items())
    _, pt = export_checkpoint(tmp_path / "run" / "checkpoint.pt", tmp_path / "last", use_best=False)
    assert all(torch.equal(load_model(pt).state_dict()[k], v) for k, v in avg.items())
    st2 = train(replace(cfg, epochs=2), resume=True, echo=lambda s: None)
    assert int(st2["ema"]["n_averaged"]) == 6  # the average continues across a resume


def test_learned_encoders_refuse_a_graph_whose_attention_would_not_fit_in_memory(monkeypatch) -> None:
    """With too little memory available the learned passes raise one TooLargeError (one line from the CLI)
    instead of being killed, and auto goes on without the learned candidate."""
    from onnx_sched.cost import makespan as ms
    from onnx_sched.errors import TooLargeError
    from onnx_sched.machines import identical_devices
    from onnx_sched.models.inference import features
    from onnx_sched.passes import PassContext, get_pass

    g = layered_graph(60, 1)
    monkeypatch.setattr(features, "available_memory", lambda: 60 * 60 * features.ENCODER_BYTES_PER_PAIR - 1)
    with pytest.raises(TooLargeError, match="60 ops need about"):
        get_pass("learned", "peak-mem")(g, PassContext())
    problem = ms.makespan_problem(g, identical_devices(2), np.ones(g.n_ops))
    for method in ("learned", "gflownet"):
        with pytest.raises(TooLargeError):
            get_pass(method, "makespan")(g, PassContext(problem=problem))
    s = get_pass("auto", "peak-mem")(g, PassContext(time_limit=2.0))
    assert s.info["learned"].startswith("unavailable: learned: 60 ops") and is_topological_order(g, s.order)
    monkeypatch.setattr(features, "available_memory", lambda: None)  # unknown: no guard
    assert len(get_pass("learned", "peak-mem")(g, PassContext()).order) == g.n_ops
