"""The HSDAG network in numpy: forward *and* backward of one grouping round (paper 004, sections 2.4-2.5).

Why numpy: paper 004 updates the network's weights with the per-graph REINFORCE episodes
at optimize time, and the light install has no torch.  The network is small (two MLP
layers, two GCN layers, an edge scorer and an MLP placer head, about 30k weights), so its
exact gradient is written out here and checked against finite differences
(``tests/test_hsdag.py``).  The weights are read from the shipped ONNX checkpoints
(``hsdag_placer.onnx``, ``hsdag_placer_head.onnx``, the same graphs
:class:`~onnx_sched.models.inference.hsdag.HsdagPlacer` runs), so both paths share one
checkpoint.

One round on a graph ``G_r`` (nodes: co-location sets at round 0, then the groups of the
previous round):

1. embedding ``Z``: round 0 maps the node features through the two MLP layers
   (``layer_trans``); later rounds start from the state (the previous round's updated
   embeddings pooled onto ``G_r``); then two GCN layers ``relu(D^-1/2 (A+I) D^-1/2 H W)``;
2. edge scores ``S_uv = sigmoid(MLP(z_u * z_v))`` (eq. 7), self-loops scored too;
3. graph parsing (eq. 9-10): each node keeps its best-scoring incident edge (or its
   self-loop), a fraction ``dropout`` of the edges dropped at random first (table 4's
   ``dropout_network``: edges dropped in the grouping module); the connected components
   of the kept edges are the groups, i.e. the assignment matrix ``X``;
4. pooled graph ``A' = X^T A X`` (eq. 11) and pooled embeddings ``Z'`` (kept-score
   weighted mean of the members); state update ``Z_v + Z_v'`` (section 2.5);
5. placement per group of ``G'``: the placer head scores each (group, device) pair from
   the group's pooled updated embedding and the pair's device features
   (:func:`~onnx_sched.models.inference.hsdag_features.device_features`); a softmax over
   devices is the policy.  The ops of a group take its device (mapped back through ``X``).

The grouping is a discrete choice; the gradient reaches the edge scorer through the kept
scores that weight the pooling (as in GPN).  A stored grouping can be replayed
(``force``) so the K epochs of an update re-score the same actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from onnx_sched.cost import latency as lat
from onnx_sched.int_sets import unique_pairs
from onnx_sched.models import CHECKPOINTS
from onnx_sched.models.inference.hsdag_features import device_features

__all__ = ["PARAM_NAMES", "Adam", "RoundCache", "RoundGraph", "backward", "forward", "load_params", "log_prob_grad",
           "pooled_graph", "round_graph"]

PARAM_NAMES = ("t1.W", "t1.b", "t2.W", "t2.b", "g1.W", "g2.W", "s1.W", "s1.b", "s2.W", "s2.b",
               "h1.W", "h1.b", "h2.W", "h2.b")
Params = dict[str, np.ndarray]


def load_params(encoder: str | Path = CHECKPOINTS / "hsdag_placer.onnx",
                head: str | Path = CHECKPOINTS / "hsdag_placer_head.onnx") -> Params:
    """The network's weights (float64 copies) from the two ONNX checkpoints."""
    from onnx import numpy_helper

    from onnx_sched.importers.onnx import load_model

    out: Params = {}
    for path in (encoder, head):
        if not Path(path).is_file():
            raise FileNotFoundError(f"HSDAG checkpoint {path} missing: train it with onnx-sched train hsdag")
        for init in load_model(path).graph.initializer:
            if init.name in PARAM_NAMES:
                out[init.name] = numpy_helper.to_array(init).astype(np.float64)
    missing = [n for n in PARAM_NAMES if n not in out]
    if missing:
        raise ValueError(f"HSDAG checkpoint lacks weights {missing}")
    return out


@dataclass(frozen=True, eq=False)
class RoundGraph:
    """A graph one round runs on: ``member[op]`` = its node; ``edges`` (E, 2) directed edges between
    distinct nodes; ``adj`` the normalized undirected adjacency; ``src``/``dst`` both edge
    directions; ``group_time`` (n, k) summed op seconds; ``boundary_bytes`` (n,) bytes leaving."""

    member: np.ndarray
    edges: np.ndarray
    adj: np.ndarray | csr_matrix  # normalised adjacency with self-loops (GCN), sparse on large graphs
    src: np.ndarray
    dst: np.ndarray
    group_time: np.ndarray
    boundary_bytes: np.ndarray

    @property
    def n(self) -> int:
        return self.adj.shape[0]


#: Largest graph whose GCN adjacency is a dense array (32 MB); larger ones get a sparse matrix (a dense one at 8,000
#: nodes takes 560 MB), smaller ones stay dense because building scipy matrices costs more than it saves there
#: (resnet50's 100 episodes: 3.5 s dense, 5.1 s sparse).
DENSE_ADJACENCY_MAX = 2048


def _normalized_adjacency(n: int, edges: np.ndarray) -> np.ndarray | csr_matrix:
    """``D^-1/2 (A + I) D^-1/2`` of the undirected graph: dense up to :data:`DENSE_ADJACENCY_MAX` nodes, else
    sparse (the same values)."""
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    if n <= DENSE_ADJACENCY_MAX:
        a = np.eye(n)
        a[e[:, 0], e[:, 1]] = 1.0
        a[e[:, 1], e[:, 0]] = 1.0
        d = 1.0 / np.sqrt(a.sum(axis=1))
        return a * d[:, None] * d[None, :]
    loop = np.arange(n, dtype=np.int64)
    rows, cols = np.concatenate([loop, e[:, 0], e[:, 1]]), np.concatenate([loop, e[:, 1], e[:, 0]])
    a = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    a.data[:] = 1.0  # duplicates summed: back to 0/1
    d = 1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel())
    return csr_matrix(a.multiply(d[:, None]).multiply(d[None, :]))


def round_graph(problem: lat.PlacementProblem, member: np.ndarray, n: int, edges: np.ndarray) -> RoundGraph:
    """The :class:`RoundGraph` of ops grouped by ``member`` into ``n`` nodes joined by ``edges``."""
    g = problem.graph
    k = problem.n_devices
    time = np.zeros((n, k))
    np.add.at(time, member, problem.op_time)
    out_bytes = np.zeros(n)
    ge = g.edges
    if len(ge):
        cross = member[ge[:, 0]] != member[ge[:, 1]]
        u = np.unique(ge[cross, 0])
        np.add.at(out_bytes, member[u], g.op_output_bytes[u].astype(np.float64))
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    src = np.concatenate([e[:, 0], e[:, 1]]) if len(e) else np.zeros(0, np.int64)
    dst = np.concatenate([e[:, 1], e[:, 0]]) if len(e) else np.zeros(0, np.int64)
    return RoundGraph(np.asarray(member, np.int64), e, _normalized_adjacency(n, e), src, dst, time, out_bytes)


def pooled_graph(problem: lat.PlacementProblem, rg: RoundGraph, gid: np.ndarray) -> RoundGraph:
    """Eq. 11: the graph of the groups, adjacency ``A' = X^T A X`` (off-diagonal, binarised), ops
    mapped through ``X``."""
    n, G = rg.n, int(gid.max()) + 1
    x = csr_matrix((np.ones(n), (np.arange(n), gid)), shape=(n, G))
    a = csr_matrix((np.ones(len(rg.edges)), (rg.edges[:, 0], rg.edges[:, 1])), shape=(n, n)) if len(rg.edges) \
        else csr_matrix((n, n))
    ap = (x.T @ a @ x).tocoo()
    keep = ap.row != ap.col
    edges = unique_pairs(np.stack([ap.row[keep], ap.col[keep]], 1)) if keep.any() \
        else np.zeros((0, 2), np.int64)
    return round_graph(problem, gid[rg.member], G, edges)


@dataclass(frozen=True, eq=False)
class RoundCache:
    """What one forward pass produced and what its backward needs."""

    logits: np.ndarray  # (G, k), -inf where a group cannot run on a device
    gid: np.ndarray  # (n,) group of each node
    partner: np.ndarray  # (n,) kept edge index into src/dst, -1 = self-loop
    next_graph: RoundGraph  # the pooled graph G'
    next_state: np.ndarray  # (G, H) pooled updated embeddings: the state of the next round
    acts: dict[str, np.ndarray]


def _relu(a: np.ndarray) -> np.ndarray:
    return np.maximum(a, 0.0)


def _score(p: Params, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = e @ p["s1.W"] + p["s1.b"]
    o = _relu(q) @ p["s2.W"] + p["s2.b"]
    return 0.5 * (1.0 + np.tanh(0.5 * o[:, 0])), q, o  # sigmoid, no overflow


def _choose(n: int, src: np.ndarray, score: np.ndarray, self_score: np.ndarray, drop: float,
            rng: np.random.Generator | None) -> np.ndarray:
    """Eq. 9: each node's best incident edge (index) or -1 when its self-loop scores higher;
    edges dropped with probability ``drop`` first."""
    partner = np.full(n, -1, np.int64)
    best = self_score.copy()
    live = np.ones(len(src), bool)
    if drop > 0 and rng is not None and len(src):
        live = rng.random(len(src)) >= drop
    idx = np.flatnonzero(live)
    if len(idx):
        order = idx[np.lexsort((-score[idx], src[idx]))]
        first = np.concatenate([[True], src[order][1:] != src[order][:-1]])
        top = order[first]
        wins = score[top] > best[src[top]]
        partner[src[top[wins]]] = top[wins]
        best[src[top[wins]]] = score[top[wins]]
    return partner


def _groups(n: int, dst: np.ndarray, partner: np.ndarray) -> np.ndarray:
    """Eq. 10: connected components of the kept edges (the assignment matrix ``X`` as a label per node)."""
    keep = partner >= 0
    rows, cols = np.flatnonzero(keep), dst[partner[keep]]
    m = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, labels = connected_components(m, directed=False)
    _, gid = np.unique(labels, return_inverse=True)  # numbered by first member
    return gid.astype(np.int64)


def _pool(v: np.ndarray, gid: np.ndarray, w: np.ndarray, G: int) -> tuple[np.ndarray, np.ndarray]:
    num = np.zeros((G, v.shape[1]))
    np.add.at(num, gid, v * w[:, None])
    den = np.zeros(G)
    np.add.at(den, gid, w)
    den = np.maximum(den, 1e-12)
    return num / den[:, None], den


def forward(p: Params, problem: lat.PlacementProblem, rg: RoundGraph, inputs: np.ndarray, first: bool, *,
            drop: float = 0.0, rng: np.random.Generator | None = None,
            force: tuple[np.ndarray, np.ndarray] | None = None,
            mask: np.ndarray | None = None) -> RoundCache:
    """One round (module docstring) on ``rg``.  ``inputs``: node features (``first``) or the state.
    ``force = (gid, partner)`` replays a stored grouping.  ``mask`` (columns of ``inputs`` to zero)
    is the feature ablation."""
    a: dict[str, np.ndarray] = {}
    x = inputs if mask is None else inputs * mask
    if first:
        a["x"] = x
        a["a1"] = x @ p["t1.W"] + p["t1.b"]
        a["h1"] = _relu(a["a1"])
        a["a2"] = a["h1"] @ p["t2.W"] + p["t2.b"]
        h = _relu(a["a2"])
    else:
        h = x
    a["h"] = h
    a["p1"] = rg.adj @ (h @ p["g1.W"])
    a["h3"] = _relu(a["p1"])
    a["p2"] = rg.adj @ (a["h3"] @ p["g2.W"])
    z = _relu(a["p2"])
    a["z"] = z
    a["e"] = z[rg.src] * z[rg.dst]
    a["s"], a["q"], _ = _score(p, a["e"])
    a["ss"], a["qs"], _ = _score(p, z * z)
    if force is None:
        partner = _choose(rg.n, rg.src, a["s"], a["ss"], drop, rng)
        gid = _groups(rg.n, rg.dst, partner)
    else:
        gid, partner = force
    G = int(gid.max()) + 1
    w = np.where(partner >= 0, a["s"][np.maximum(partner, 0)] if len(a["s"]) else 0.0, a["ss"])
    zp, den = _pool(z, gid, w, G)
    emb = z + zp[gid]  # section 2.5 state update: Z_v + Z_v'
    big_e, _ = _pool(emb, gid, w, G)  # the pooled graph's node embeddings
    a.update(w=w, zp=zp, den=den, emb=emb, E=big_e)
    nxt = pooled_graph(problem, rg, gid)
    k = problem.n_devices
    df = device_features(nxt.group_time, nxt.boundary_bytes, problem.latency, problem.inv_bandwidth, problem.host)
    pair = np.concatenate([np.repeat(big_e[:, None, :], k, axis=1), df], axis=2).reshape(G * k, -1)
    a["pair"] = pair
    a["ha"] = pair @ p["h1.W"] + p["h1.b"]
    logits = (_relu(a["ha"]) @ p["h2.W"] + p["h2.b"]).reshape(G, k)
    logits[~np.isfinite(nxt.group_time)] = -np.inf
    return RoundCache(logits, gid, partner, nxt, big_e, a)


def _score_backward(p: Params, g: Params, e: np.ndarray, q: np.ndarray, s: np.ndarray, ds: np.ndarray) -> np.ndarray:
    do = (ds * s * (1.0 - s))[:, None]
    r = _relu(q)
    g["s2.W"] += r.T @ do
    g["s2.b"] += do.sum(axis=0)
    dq = (do @ p["s2.W"].T) * (q > 0)
    g["s1.W"] += e.T @ dq
    g["s1.b"] += dq.sum(axis=0)
    return dq @ p["s1.W"].T


def backward(p: Params, rg: RoundGraph, c: RoundCache, dlogits: np.ndarray, first: bool) -> Params:
    """Gradient of ``sum(dlogits * logits)`` with respect to every weight (entries of
    ``dlogits`` at forbidden devices must be 0)."""
    a = c.acts
    g = {n: np.zeros_like(v) for n, v in p.items()}
    gid, partner = c.gid, c.partner
    G, k = c.logits.shape
    dl = np.where(np.isfinite(c.logits), dlogits, 0.0).reshape(G * k, 1)
    ra = _relu(a["ha"])
    g["h2.W"] += ra.T @ dl
    g["h2.b"] += dl.sum(axis=0)
    dha = (dl @ p["h2.W"].T) * (a["ha"] > 0)
    g["h1.W"] += a["pair"].T @ dha
    g["h1.b"] += dha.sum(axis=0)
    H = a["z"].shape[1]
    d_e = (dha @ p["h1.W"].T)[:, :H].reshape(G, k, H).sum(axis=1)
    w, den = a["w"], a["den"][gid]
    d_emb = (w / den)[:, None] * d_e[gid]
    dw = ((a["emb"] - a["E"][gid]) * d_e[gid]).sum(axis=1) / den
    dz = d_emb.copy()
    dzp = np.zeros((G, H))
    np.add.at(dzp, gid, d_emb)
    dz += (w / den)[:, None] * dzp[gid]
    dw += ((a["z"] - a["zp"][gid]) * dzp[gid]).sum(axis=1) / den
    edge = partner >= 0
    ds = np.zeros(len(a["s"]))
    np.add.at(ds, partner[edge], dw[edge])
    dss = np.where(edge, 0.0, dw)
    z = a["z"]
    if len(ds):
        de = _score_backward(p, g, a["e"], a["q"], a["s"], ds)
        np.add.at(dz, rg.src, de * z[rg.dst])
        np.add.at(dz, rg.dst, de * z[rg.src])
    dz += 2.0 * z * _score_backward(p, g, z * z, a["qs"], a["ss"], dss)
    dp2 = dz * (a["p2"] > 0)
    du2 = rg.adj.T @ dp2
    g["g2.W"] += a["h3"].T @ du2
    dp1 = (du2 @ p["g2.W"].T) * (a["p1"] > 0)
    du1 = rg.adj.T @ dp1
    g["g1.W"] += a["h"].T @ du1
    if first:
        dh = du1 @ p["g1.W"].T
        da2 = dh * (a["a2"] > 0)
        g["t2.W"] += a["h1"].T @ da2
        g["t2.b"] += da2.sum(axis=0)
        da1 = (da2 @ p["t2.W"].T) * (a["a1"] > 0)
        g["t1.W"] += a["x"].T @ da1
        g["t1.b"] += da1.sum(axis=0)
    return g


def log_prob_grad(logits: np.ndarray, actions: np.ndarray) -> tuple[float, np.ndarray]:
    """``log pi(actions)`` summed over groups and its gradient with respect to the logits
    (``onehot - softmax``; 0 at forbidden devices)."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    prob = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(actions))
    logp = float(np.log(np.maximum(prob[rows, actions], 1e-300)).sum())
    grad = -prob
    grad[rows, actions] += 1.0
    return logp, np.where(np.isfinite(logits), grad, 0.0)


class Adam:
    """Adam (Kingma & Ba) over a dict of arrays, ascending or descending as the caller's sign says."""

    def __init__(self, params: Params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        if lr <= 0:
            raise ValueError(f"learning rate must be > 0, got {lr}")
        self.lr, self.b1, self.b2, self.eps, self.t = lr, betas[0], betas[1], eps, 0
        self.m = {n: np.zeros_like(v) for n, v in params.items()}
        self.v = {n: np.zeros_like(v) for n, v in params.items()}

    def step(self, params: Params, grads: Params) -> None:
        """One descent step on ``params`` (in place) along ``grads`` (gradient of a loss)."""
        self.t += 1
        for n, gr in grads.items():
            self.m[n] = self.b1 * self.m[n] + (1 - self.b1) * gr
            self.v[n] = self.b2 * self.v[n] + (1 - self.b2) * gr * gr
            mh = self.m[n] / (1 - self.b1 ** self.t)
            vh = self.v[n] / (1 - self.b2 ** self.t)
            params[n] -= self.lr * mh / (np.sqrt(vh) + self.eps)
