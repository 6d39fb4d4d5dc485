"""Train the HSDAG placer (paper 004) with REINFORCE on simulated device profiles (torch).

The torch module mirrors the ONNX inference graphs of :mod:`onnx_sched.models.inference.hsdag`
exactly (checked by ``tests/test_placement.py``).  Training data: corpus graphs,
each with a device set drawn at random around the documented presets
(:data:`onnx_sched.profiling.SIMULATED_PRESETS`: speed-ups, launch overheads and
link bandwidths scaled by a random factor in [0.5, 2]), CPU plus one or two GPUs.
An optional warm start (``--imitation-minutes``) first fits the policy to the
exact two-device optimum (s-t min-cut, cross-entropy per co-location set); this
is not in the paper, which trains from scratch on measured latency.
Reward: ``1 / latency`` of the sequential model, normalised by the CPU-only
latency of the same problem (``r = L_cpu / L``) so graphs of any size weigh the
same; advantage = reward minus the batch mean (the paper's discounted sum over a
buffer of ``update_timestep`` placements is replaced by this batch baseline).

    python -m onnx_sched.models.training.hsdag_train --minutes 10 --out models/

writes ``hsdag_placer.onnx`` (encoder), ``hsdag_placer_head.onnx`` (placer head),
``hsdag_placer.pt`` (torch state) and ``hsdag_train_log.json``.

``torchrun --nproc_per_node N -m onnx_sched.models.training.hsdag_train ...`` trains on N
processes (:mod:`onnx_sched.models.training.distributed`): each rank draws problems from its
share of the models (seed ``[seed, rank]``), every update averages the N ranks' gradients,
the ranks stop together, and rank 0 prints, saves and exports (its log covers its own problems).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from onnx_sched.cost import latency as lat
from onnx_sched.models import CHECKPOINTS
from onnx_sched.models.inference.hsdag import group_nodes, head_inputs, prepare
from onnx_sched.models.inference.hsdag_features import N_DEVICE_FEATURES, N_NODE_FEATURES, colocate
from onnx_sched.models.training import distributed
from onnx_sched.passes.placement._optimal import mincut_placement
from onnx_sched.profiling import SIMULATED_PRESETS, ProfileSet, TransferModel, derive_profile, load_profiles

__all__ = ["HsdagNet", "export_onnx", "random_device_set", "train"]

HIDDEN = 64
ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "onnx"
PROFILES = ROOT / "examples" / "profiles_cpu_igpu_dgpu.json"
TRAIN_MODELS = ("resnet50", "randwire_ws", "light_inception_v2", "bert_base", "mobilenet_v2", "nasnet_a_mobile",
                "light_vgg19", "distilbert_base", "convnext_tiny", "light_densenet121", "unet", "gpt2_small",
                "swinv2_tiny", "t5_small", "segformer_b0", "llama_gqa_8l")
# held out for evaluation: every other corpus model (swin_tiny, vit_base, yolos_tiny, efficientnet_b0, ...)


class HsdagNet(nn.Module):
    """Encoder (2 MLP + 2 GCN layers), edge scorer and placer head; dropout off."""

    def __init__(self, n_in: int = N_NODE_FEATURES, hidden: int = HIDDEN, n_dev: int = N_DEVICE_FEATURES) -> None:
        super().__init__()
        self.t1 = nn.Linear(n_in, hidden)
        self.t2 = nn.Linear(hidden, hidden)
        self.g1 = nn.Linear(hidden, hidden, bias=False)
        self.g2 = nn.Linear(hidden, hidden, bias=False)
        self.s1 = nn.Linear(hidden, hidden)
        self.s2 = nn.Linear(hidden, 1)
        self.h1 = nn.Linear(hidden + n_dev, hidden)
        self.h2 = nn.Linear(hidden, 1)

    def encode(self, x: torch.Tensor, adj: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = torch.relu(self.t1(x))
        h = torch.relu(self.t2(h))
        h = torch.relu(adj @ self.g1(h))
        z = torch.relu(adj @ self.g2(h))
        score = self.score(z[src] * z[dst])
        return z, score, self.score(z * z)

    def score(self, e: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.s2(torch.relu(self.s1(e)))).squeeze(-1)

    def head(self, pair: torch.Tensor) -> torch.Tensor:
        return self.h2(torch.relu(self.h1(pair))).squeeze(-1)


def _w(name: str, t: torch.Tensor) -> onnx.TensorProto:
    return numpy_helper.from_array(t.detach().cpu().numpy().astype(np.float32), name)


def export_onnx(net: HsdagNet, out_dir: str | Path) -> tuple[Path, Path]:
    """Write the encoder and head as plain ONNX graphs (MatMul/Add/Relu/Gather/Sigmoid), IR 8."""
    out = Path(out_dir)
    F = helper.make_tensor_value_info
    lin = lambda x, m, name, bias=True: (  # noqa: E731
        [helper.make_node("MatMul", [x, f"{name}.W"], [f"{name}.mm"]),
         helper.make_node("Add", [f"{name}.mm", f"{name}.b"], [f"{name}.out"])] if bias else
        [helper.make_node("MatMul", [x, f"{name}.W"], [f"{name}.out"])],
        [_w(f"{name}.W", m.weight.T)] + ([_w(f"{name}.b", m.bias)] if bias else []),
    )
    nodes, inits = [], []
    for x, m, name, bias in (("x", net.t1, "t1", True),):
        n_, i_ = lin(x, m, name, bias)
        nodes += n_
        inits += i_
    nodes.append(helper.make_node("Relu", ["t1.out"], ["h1"]))
    n_, i_ = lin("h1", net.t2, "t2")
    nodes += n_ + [helper.make_node("Relu", ["t2.out"], ["h2"])]
    inits += i_
    n_, i_ = lin("h2", net.g1, "g1", False)
    nodes += n_ + [helper.make_node("MatMul", ["adj", "g1.out"], ["g1.agg"]), helper.make_node("Relu", ["g1.agg"], ["h3"])]
    inits += i_
    n_, i_ = lin("h3", net.g2, "g2", False)
    nodes += n_ + [helper.make_node("MatMul", ["adj", "g2.out"], ["g2.agg"]), helper.make_node("Relu", ["g2.agg"], ["z"])]
    inits += i_
    nodes += [helper.make_node("Gather", ["z", "src"], ["zs"], axis=0), helper.make_node("Gather", ["z", "dst"], ["zd"], axis=0),
              helper.make_node("Mul", ["zs", "zd"], ["e"]), helper.make_node("Mul", ["z", "z"], ["ez"])]
    for tag, inp, outname in (("", "e", "score"), ("self.", "ez", "self_score")):
        nodes += [helper.make_node("MatMul", [inp, "s1.W"], [f"{tag}s1.mm"]),
                  helper.make_node("Add", [f"{tag}s1.mm", "s1.b"], [f"{tag}s1.out"]),
                  helper.make_node("Relu", [f"{tag}s1.out"], [f"{tag}e1"]),
                  helper.make_node("MatMul", [f"{tag}e1", "s2.W"], [f"{tag}s2.mm"]),
                  helper.make_node("Add", [f"{tag}s2.mm", "s2.b"], [f"{tag}s2.out"]),
                  helper.make_node("Sigmoid", [f"{tag}s2.out"], [f"{tag}s2.sig"]),
                  helper.make_node("Squeeze", [f"{tag}s2.sig", "axis_last"], [outname])]
    inits += [_w("s1.W", net.s1.weight.T), _w("s1.b", net.s1.bias), _w("s2.W", net.s2.weight.T), _w("s2.b", net.s2.bias),
              numpy_helper.from_array(np.array([-1], np.int64), "axis_last")]
    enc = helper.make_graph(
        nodes, "hsdag_encoder",
        [F("x", TensorProto.FLOAT, ["n", N_NODE_FEATURES]), F("adj", TensorProto.FLOAT, ["n", "n"]),
         F("src", TensorProto.INT64, ["e"]), F("dst", TensorProto.INT64, ["e"])],
        [F("z", TensorProto.FLOAT, ["n", HIDDEN]), F("score", TensorProto.FLOAT, ["e"]),
         F("self_score", TensorProto.FLOAT, ["n"])], initializer=inits)
    nodes, inits = [], []
    n_, i_ = lin("pair", net.h1, "h1")
    nodes += n_ + [helper.make_node("Relu", ["h1.out"], ["r1"])]
    inits += i_
    n_, i_ = lin("r1", net.h2, "h2")
    nodes += n_ + [helper.make_node("Squeeze", ["h2.out", "axis_last"], ["logit"])]
    inits += i_ + [numpy_helper.from_array(np.array([-1], np.int64), "axis_last")]
    head = helper.make_graph(nodes, "hsdag_head", [F("pair", TensorProto.FLOAT, ["m", HIDDEN + N_DEVICE_FEATURES])],
                             [F("logit", TensorProto.FLOAT, ["m"])], initializer=inits)
    paths = (out / "hsdag_placer.onnx", out / "hsdag_placer_head.onnx")
    for graph, path in zip((enc, head), paths):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                                  producer_name="onnx-sched hsdag_train")
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
    return paths


def random_device_set(base: ProfileSet, rng: np.random.Generator) -> ProfileSet:
    """CPU plus one or two simulated GPUs with presets scaled by factors in [0.5, 2]."""
    cpu = base.subset([base.host]).devices[0]
    kinds = [["igpu", "dgpu"], ["dgpu"], ["igpu"]][int(rng.integers(3))]
    devices = [cpu]
    transfers: dict[tuple[str, str], TransferModel] = {}
    for kind in kinds:
        pre = SIMULATED_PRESETS[kind]
        f = lambda: float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))  # noqa: E731
        speed = {c: s * f() for c, s in pre["class_speedup"].items()}
        dev = derive_profile(cpu, pre["name"], kind, speed, pre["extra_overhead_s"] * f())
        devices.append(dev)
        tm = pre["transfer"]
        tm = TransferModel(tm.latency_s * f(), tm.bandwidth_Bps * f())
        transfers[(cpu.name, dev.name)] = transfers[(dev.name, cpu.name)] = tm
    if len(devices) == 3:
        a, b = devices[1].name, devices[2].name
        ta, tb = transfers[(cpu.name, a)], transfers[(cpu.name, b)]
        via = TransferModel(ta.latency_s + tb.latency_s, 1.0 / (1.0 / ta.bandwidth_Bps + 1.0 / tb.bandwidth_Bps))
        transfers[(a, b)] = transfers[(b, a)] = via
    return ProfileSet(tuple(devices), transfers, base.default_transfer, cpu.name)


def _forward(net: HsdagNet, problem: lat.PlacementProblem, prep: Any) -> tuple[torch.Tensor, np.ndarray]:
    x = torch.from_numpy(prep.x)
    adj = torch.from_numpy(prep.adj)
    z, score, self_score = net.encode(x, adj, torch.from_numpy(prep.src), torch.from_numpy(prep.dst))
    gid, _ = group_nodes(prep.coarse.n, prep.src, prep.dst, score.detach().numpy(), self_score.detach().numpy())
    # kept score per node, differentiable: max over incident edges and the self-loop
    n = prep.coarse.n
    kept = self_score
    if len(prep.src):
        kept = self_score.scatter_reduce(0, torch.from_numpy(prep.src), score, reduce="amax")
    G = int(gid.max()) + 1
    g_t = torch.from_numpy(gid)
    num = torch.zeros(G, z.shape[1]).index_add(0, g_t, z * kept[:, None])
    den = torch.zeros(G).index_add(0, g_t, kept)
    pooled = num / den.clamp_min(1e-12)[:, None]
    emb = z + pooled[g_t]
    dev = head_inputs(prep, emb.detach().numpy(), problem)[:, HIDDEN:]
    k = problem.n_devices
    pair = torch.cat([emb.repeat_interleave(k, dim=0), torch.from_numpy(dev)], dim=1)
    logits = net.head(pair).reshape(n, k)
    return logits, gid


def train(minutes: float, out_dir: Path, seed: int = 0, batch: int = 16, lr: float = 1e-3,
          models: tuple[str, ...] = TRAIN_MODELS, imitation_minutes: float = 0.0) -> dict[str, Any]:
    """Optional imitation warm start (``imitation_minutes``), then REINFORCE for
    ``minutes``; returns the training log."""
    from onnx_sched.importers.onnx import import_onnx

    world = distributed.setup()
    echo = distributed.main_echo(print)
    torch.manual_seed(seed)
    rng = distributed.rank_rng(seed)
    base = load_profiles(PROFILES)
    graphs = [import_onnx(CORPUS / f"{m}.onnx").graph for m in distributed.shard(models) or models]
    coarse = {g.name: colocate(g) for g in graphs}
    net = HsdagNet()
    distributed.broadcast_modules(net)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    imitation_opt = torch.optim.Adam(net.parameters(), lr=3 * lr)
    log: list[dict[str, Any]] = []
    imitation_steps = 0
    pool: dict[tuple[int, int], tuple[Any, Any, torch.Tensor]] = {}
    sets_per_graph = 6
    deadline = time.time() + imitation_minutes * 60
    while not distributed.any_rank(time.time() >= deadline):
        # warm start: imitate the exact two-device optimum (s-t min-cut) per co-location set,
        # on a fixed pool of device sets per graph (labels and features cached)
        gi, si = int(rng.integers(len(graphs))), int(rng.integers(sets_per_graph))
        if (gi, si) not in pool:
            g = graphs[gi]
            ps = random_device_set(base, np.random.default_rng(1000 * gi + si))
            names = list(ps.names)
            problem = lat.placement_problem(g, ps, devices=[names[0], names[1 + si % (len(names) - 1)]])
            prep = prepare(problem, coarse[g.name])
            target_ops, _ = mincut_placement(problem)
            votes = np.zeros((prep.coarse.n, 2))
            np.add.at(votes, (prep.coarse.member, target_ops), 1.0)
            pool[(gi, si)] = (problem, prep, torch.from_numpy(votes.argmax(axis=1)))
        problem, prep, labels = pool[(gi, si)]
        logits, _ = _forward(net, problem, prep)
        loss = nn.functional.cross_entropy(logits, labels)
        imitation_opt.zero_grad()
        loss.backward()
        distributed.average_gradients(net.parameters())
        imitation_opt.step()
        if imitation_steps % 50 == 0:
            echo(f"imitation {imitation_steps} {problem.graph.name:<22} loss {float(loss.detach()):.4f}", flush=True)
        imitation_steps += 1
    deadline = time.time() + minutes * 60
    step = 0
    while not distributed.any_rank(time.time() >= deadline):
        g = graphs[int(rng.integers(len(graphs)))]
        ps = random_device_set(base, rng)
        problem = lat.placement_problem(g, ps)
        prep = prepare(problem, coarse[g.name])
        logits, gid = _forward(net, problem, prep)
        dist = torch.distributions.Categorical(logits=logits)
        draws = dist.sample((batch,))  # (B, G)
        logp = dist.log_prob(draws).sum(dim=1)
        op_group = prep.coarse.member
        placements = draws.numpy()[:, op_group]
        lats = lat.sequential_latency_batch(problem, placements)
        cpu = lat.sequential_latency(problem, np.full(g.n_ops, problem.host))
        reward = cpu / lats
        adv = torch.from_numpy((reward - reward.mean()) / (reward.std() + 1e-8)).float()
        loss = -(adv * logp).mean() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        distributed.average_gradients(net.parameters())
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        greedy = np.argmax(logits.detach().numpy(), axis=1)[op_group]
        log.append({"step": step, "graph": g.name, "devices": list(problem.device_names), "groups": int(gid.max()) + 1,
                    "mean_speedup": float(reward.mean()), "greedy_speedup": float(cpu / lat.sequential_latency(problem, greedy))})
        if step % 20 == 0:
            recent = log[-20:]
            echo(f"step {step} {g.name:<22} groups {log[-1]['groups']:4d} mean speedup "
                 f"{np.mean([r['mean_speedup'] for r in recent]):.3f} greedy {np.mean([r['greedy_speedup'] for r in recent]):.3f}",
                 flush=True)
        step += 1
    summary = {"steps": step, "minutes": minutes, "imitation_steps": imitation_steps,
               "imitation_minutes": imitation_minutes, "seed": seed, "batch": batch, "lr": lr, "models": list(models),
               "hidden": HIDDEN, "log": log[::20], "ranks": world.size}  # every 20th step keeps the file small
    if distributed.is_main():
        out_dir.mkdir(parents=True, exist_ok=True)
        torch.save(net.state_dict(), out_dir / "hsdag_placer.pt")
        export_onnx(net, out_dir)
        (out_dir / "hsdag_train_log.json").write_text(json.dumps(summary))
    return {**summary, "state": net.state_dict()}


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    ap = argparse.ArgumentParser(prog=prog, description="Train the HSDAG placer (paper 004) with REINFORCE")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=CHECKPOINTS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--imitation-minutes", type=float, default=0.0,
                    help="warm start: imitate the exact 2-device min-cut placement first")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    s = train(args.minutes, args.out, args.seed, args.batch, args.lr, imitation_minutes=args.imitation_minutes)
    distributed.main_echo(print)(f"trained {s['steps']} steps -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ += ["main"]
