"""HSDAG learned placer (paper 004), inference: ONNX Runtime + numpy, no torch.

Pipeline (paper sections 2.2-2.5):

1. co-location coarsening (appendix G) and node features
   (:mod:`onnx_sched.models.inference.hsdag_features`);
2. encoder ``hsdag_placer.onnx``: two MLP layers (``layer_trans``), two GCN layers
   ``relu(D^-1/2 (A+I) D^-1/2 H W)`` on the undirected coarse graph
   (``layer_gnn``), and the edge scorer ``S_uv = sigmoid(MLP(z_u * z_v))`` (eq. 7),
   also applied to self-loops ``S_vv``;
3. graph parsing (eq. 9-10): every node keeps its highest-scoring incident edge,
   self-loop included (GPN's ``link_ignore_self_loop = False`` setting; with the
   paper's ``True`` every node must merge with a neighbour and groups grow to a
   few dozen per graph, too coarse for mixed placements); the connected
   components of the kept edges are the groups (node assignment matrix ``X``); a
   group's embedding is the score-weighted mean of its members';
4. placer head ``hsdag_placer_head.onnx``: an MLP scoring each (co-location
   set, device) pair from the set's embedding updated with its group's
   (``Z_v + Z_v'``, the state update of section 2.5) and the pair's device
   features; softmax over devices is the policy; ops take their set's device.
   (Deciding per GPN group, as the paper does, was measured too coarse: GPN
   leaves tens of groups per graph, and mixed optima need finer cuts — see the
   model card.)

:meth:`HsdagPlacer.place` returns the greedy placement or the best of it and
``samples`` draws from the policy, scored by the latency model; with ``episodes``
it then runs REINFORCE on the problem itself over the output logits only
(:mod:`onnx_sched.models.inference.policy_search`).  The ``hsdag`` pass no longer uses
this class: it runs paper 004's per-group rounds with weight updates in numpy
(:mod:`onnx_sched.models.inference.hsdag_search`) on the same checkpoint; this class
stays as the ONNX Runtime mirror the training script's export is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.cost import latency as lat
from onnx_sched.models import CHECKPOINTS
from onnx_sched.models.inference.hsdag_features import (
    Coarse,
    colocate,
    device_features,
    group_times,
    node_features,
)

__all__ = ["ENCODER_PATH", "HEAD_PATH", "HsdagPlacer", "Prepared", "group_nodes", "normalized_adjacency", "prepare"]

ENCODER_PATH = CHECKPOINTS / "hsdag_placer.onnx"
HEAD_PATH = CHECKPOINTS / "hsdag_placer_head.onnx"


@dataclass(frozen=True, eq=False)
class Prepared:
    """Everything the networks need for one placement problem."""

    coarse: Coarse
    x: np.ndarray  # (n, F) float32
    adj: np.ndarray  # (n, n) float32, normalized
    src: np.ndarray  # (E2,) int64, both directions
    dst: np.ndarray
    group_time: np.ndarray  # (n, k) seconds per coarse node
    node_out_bytes: np.ndarray  # (n,) bytes leaving each coarse node


def normalized_adjacency(n: int, edges: np.ndarray) -> np.ndarray:
    """``D^-1/2 (A + I) D^-1/2`` of the undirected graph, dense float32."""
    a = np.eye(n, dtype=np.float32)
    if len(edges):
        a[edges[:, 0], edges[:, 1]] = 1.0
        a[edges[:, 1], edges[:, 0]] = 1.0
    d = 1.0 / np.sqrt(a.sum(axis=1))
    return (a * d[:, None] * d[None, :]).astype(np.float32)


def prepare(problem: lat.PlacementProblem, coarse: Coarse | None = None) -> Prepared:
    g = problem.graph
    c = coarse or colocate(g)
    x = node_features(g, c, problem.op_time, problem.host)
    e = c.edges
    src = np.concatenate([e[:, 0], e[:, 1]]).astype(np.int64) if len(e) else np.zeros(0, np.int64)
    dst = np.concatenate([e[:, 1], e[:, 0]]).astype(np.int64) if len(e) else np.zeros(0, np.int64)
    out_bytes = np.zeros(c.n)
    ge = g.edges
    if len(ge):
        cross = c.member[ge[:, 0]] != c.member[ge[:, 1]]
        u = np.unique(ge[cross, 0])
        np.add.at(out_bytes, c.member[u], g.op_output_bytes[u].astype(np.float64))
    return Prepared(c, x, normalized_adjacency(c.n, e), src, dst, group_times(c, problem.op_time), out_bytes)


def group_nodes(n: int, src: np.ndarray, dst: np.ndarray, score: np.ndarray,
                self_score: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 9-10: each node keeps its best-scoring incident edge; groups are the
    connected components of kept edges.  With ``self_score`` (GPN's
    ``link_ignore_self_loop = False``) the self-loop competes too, and a node whose
    self-loop wins keeps no edge of its own.  Returns ``(group id per node, kept
    score per node)`` (score 1 for isolated nodes)."""
    parent = np.arange(n)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    best = np.full(n, -1.0)
    partner = np.full(n, -1, np.int64)
    for s, d, v in zip(src.tolist(), dst.tolist(), score.tolist()):
        if v > best[s]:
            best[s], partner[s] = v, d
    if self_score is not None:
        wins = self_score >= best
        partner[wins] = -1
        best = np.maximum(best, self_score)
    for v in range(n):
        if partner[v] >= 0:
            a, b = find(v), find(int(partner[v]))
            if a != b:
                parent[a] = b
    roots = np.array([find(v) for v in range(n)])
    _, gid = np.unique(roots, return_inverse=True)
    kept = np.where(best >= 0, best, 1.0)
    return gid.astype(np.int64), kept


def pool(z: np.ndarray, gid: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Score-weighted mean embedding per group."""
    G = int(gid.max()) + 1 if len(gid) else 0
    num = np.zeros((G, z.shape[1]))
    den = np.zeros(G)
    np.add.at(num, gid, z * weight[:, None])
    np.add.at(den, gid, weight)
    return (num / np.maximum(den, 1e-12)[:, None]).astype(np.float32)


def head_inputs(prep: Prepared, emb: np.ndarray, problem: lat.PlacementProblem) -> np.ndarray:
    """``(n * k, H + N_DEVICE_FEATURES)`` rows: each coarse node's embedding next to
    each device's features for that node."""
    k = problem.n_devices
    df = device_features(prep.group_time, prep.node_out_bytes, problem.latency, problem.inv_bandwidth, problem.host)
    rep = np.repeat(emb[:, None, :], k, axis=1)
    return np.concatenate([rep, df], axis=2).reshape(len(emb) * k, -1).astype(np.float32)


class HsdagPlacer:
    """The trained policy, run with ONNX Runtime."""

    def __init__(self, encoder: str | Path = ENCODER_PATH, head: str | Path = HEAD_PATH) -> None:
        import onnxruntime as ort

        for p in (encoder, head):
            if not Path(p).is_file():
                raise FileNotFoundError(f"HSDAG checkpoint {p} missing: train it with python -m onnx_sched.models.training.hsdag_train")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = 1
        self.encoder = ort.InferenceSession(str(encoder), so, providers=["CPUExecutionProvider"])
        self.head = ort.InferenceSession(str(head), so, providers=["CPUExecutionProvider"])

    def logits(self, problem: lat.PlacementProblem, prep: Prepared | None = None) -> tuple[np.ndarray, np.ndarray, Prepared]:
        """``(logits (G, k), group id per coarse node, prepared inputs)``; devices an
        op of the group cannot run on get ``-inf``."""
        prep = prep or prepare(problem)
        z, score, self_score = self.encoder.run(None, {"x": prep.x, "adj": prep.adj, "src": prep.src, "dst": prep.dst})
        gid, kept = group_nodes(prep.coarse.n, prep.src, prep.dst, score, self_score)
        emb = z + pool(z, gid, kept)[gid]  # section 2.5 state update: Z_v + Z_v'
        rows = head_inputs(prep, emb, problem)
        (out,) = self.head.run(None, {"pair": rows})
        logits = out.reshape(-1, problem.n_devices).astype(np.float64)
        logits[~np.isfinite(prep.group_time)] = -np.inf
        return logits, gid, prep

    def place(self, problem: lat.PlacementProblem, samples: int = 16, seed: int = 0, episodes: int = 0,
              temperature: float = 3.0, time_limit: float | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Greedy placement, or the best of greedy and ``samples`` policy draws under the
        problem's latency model; with ``episodes > 0`` the output logits are then refined on this
        problem by REINFORCE (standing in for paper 004's per-graph episodes, which also update the
        network's weights; reward ``1 / latency``;
        :func:`~onnx_sched.models.inference.policy_search.reinforce_search`), ``samples`` draws per
        episode, starting from the network's logits divided by ``temperature`` (the trained
        policy is near-deterministic, 0.96-0.99 mean top probability on the corpus, so
        at temperature 1 the search barely explores; the greedy start is unchanged) and
        stopping after ``time_limit`` seconds.  Returns ``(placement per op, info)``."""
        from onnx_sched.models.inference.policy_search import reinforce_search

        if temperature <= 0:
            raise ValueError(f"hsdag: temperature must be > 0, got {temperature}")
        logits, gid, prep = self.logits(problem)
        op_group = prep.coarse.member

        def latency(choices: np.ndarray) -> np.ndarray:
            op_p = choices[:, op_group]
            if problem.mode == "sequential":
                return lat.sequential_latency_batch(problem, op_p)
            return np.array([lat.concurrent_latency(problem, p) for p in op_p])

        rng = np.random.default_rng(seed)
        best, value, trace = reinforce_search(logits / temperature if episodes > 0 else logits, latency,
                                              episodes=max(1, episodes) if samples > 0 else 0,
                                              batch=max(0, samples), rng=rng, time_limit=time_limit)
        first = trace.best_per_episode[0] if trace.best_per_episode else value
        info = {"groups": int(gid.max()) + 1 if len(gid) else 0, "coarse_nodes": int(prep.coarse.n),
                "candidates": trace.evaluations, "greedy_latency": trace.start_cost,
                "first_batch_latency": first, "episodes_run": len(trace.best_per_episode) if episodes > 0 else 0}
        return best[op_group], info
