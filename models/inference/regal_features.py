"""REGAL's graph inputs (paper 003, section 3.3 and appendix A.1): node and edge features
of a multi-device memory problem, from numpy and one short BRKGA run.

Nodes are ops; edges are (producer op, tensor, consumer op) triples, so an op that
reads two tensors of the same producer gets two parallel edges.  Node features:

* the sum of the op's input tensor sizes, of its output sizes, and its extra
  internal memory (transient parameter bytes of the memory model);
* a node aggregation of the population found by BRKGA with uniform distributions
  in a few evaluations (paper 003: 400, :data:`PAPER_FEATURE_EVALUATIONS`; the policies trained since
  session 50 and the feature prior: one population, :data:`FEATURE_EVALUATIONS`): the expected placement per device
  (share of chromosomes putting the op there) and the expected schedule position
  (rank among the ops of the decoded schedule, 0 = first, 1 = last);
* the symmetry-breaking flag: 1 for the op with the most memory (inputs + outputs
  + transient bytes), whose placement is fixed to the first device, 0 elsewhere.

Edge feature: the tensor's size.  Every memory feature is divided by the largest
memory number of the graph, so graphs of any scale look alike.

The feature run (and REGAL's own BRKGA afterwards) keeps the symmetry op on device 0
by giving its affinity genes near-degenerate Beta distributions, and starts from the
host-only chromosome (every op on device 0 in input order; a known good solution as
paper 003 section 3.2 allows) so REGAL is never worse than it.  Its evaluations count
against REGAL's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_sched.brkga import BrkgaParams, BrkgaResult, GeneDistributions, brkga
from onnx_sched.cost import device_memory as dm
from onnx_sched.deadline import Deadline
from onnx_sched.passes.device_memory._common import keys_for

__all__ = [
    "FEATURE_EVALUATIONS",
    "PAPER_FEATURE_EVALUATIONS",
    "RegalInputs",
    "edge_list",
    "feature_run",
    "fix_symmetry",
    "n_node_features",
    "op_memory",
    "population_statistics",
    "position_column",
    "prepare",
]

#: Evaluations of the uniform BRKGA whose population gives the node aggregation in paper 003 (A.1), and in every
#: checkpoint whose metadata names no other count (``feature_evaluations``).
PAPER_FEATURE_EVALUATIONS = 400
#: The feature run of the policies trained since session 50 and of the feature prior alone: one population (the
#: host-only chromosome and 99 uniform ones), so the positions are those of random schedules rather than of three
#: generations' poor early elites, and REGAL's own BRKGA keeps 270 more evaluations.  The feature prior with it, on
#: the validation problems, seeds 0-7: +3.91 % over BRKGA 5K, ties or beats 85 %, against +3.02 %, 77 % with 400
#: (``benchmarks/regal_prior_rules.py --feature-evaluations``; docs/results.md 14.4, session 50).
FEATURE_EVALUATIONS = 100

#: Beta parameters that pin the symmetry op's affinity: ~0.98 for device 0, ~0.02 for the others.
_PIN = 50.0


@dataclass(frozen=True, eq=False)
class RegalInputs:
    """What the policy network reads for one problem, and the feature run it came from."""

    x: np.ndarray  # (n, F) float32 node features
    src: np.ndarray  # (E,) int64 producer op of each edge
    dst: np.ndarray  # (E,) int64 consumer op
    edge_x: np.ndarray  # (E, 1) float32 tensor size / scale
    symmetry_op: int
    pinned: bool  # whether the symmetry op is held on device 0 (paper: yes)
    warm: BrkgaResult  # the feature run (its elites seed REGAL's BRKGA)


def n_node_features(n_devices: int) -> int:
    """Input width of the network: 3 memory sums, D placement shares, order, symmetry flag."""
    return 3 + n_devices + 2


def position_column(n_devices: int) -> int:
    """Column of the expected schedule position in the node features."""
    return 3 + n_devices


def op_memory(problem: dm.DeviceMemoryProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op: bytes of its distinct non-weight inputs, of its outputs, its transient bytes."""
    a = problem.arrays
    n = problem.graph.n_ops
    in_ops = np.repeat(np.arange(n), np.diff(a.in_ptr))
    out_ops = np.repeat(np.arange(n), np.diff(a.out_ptr))
    in_bytes = np.bincount(in_ops, weights=a.size[a.in_idx].astype(np.float64), minlength=n)
    out_bytes = np.bincount(out_ops, weights=a.size[a.out_idx].astype(np.float64), minlength=n)
    return in_bytes, out_bytes, a.param.astype(np.float64)


def edge_list(problem: dm.DeviceMemoryProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(producer, consumer, tensor) of every op-to-op tensor read; graph inputs have no producer op."""
    ptr, idx = problem.consumers
    tensors = np.repeat(np.arange(problem.graph.n_tensors), np.diff(ptr))
    producer = np.asarray(problem.graph.tensor_producer, dtype=np.int64)[tensors]
    keep = producer >= 0
    return producer[keep], np.asarray(idx, dtype=np.int64)[keep], tensors[keep]


def fix_symmetry(problem: dm.DeviceMemoryProblem, dist: GeneDistributions, op: int) -> GeneDistributions:
    """``dist`` with ``op``'s affinity genes pinned so it is placed on device 0."""
    nd = problem.n_devices
    alpha, beta = dist.alpha.copy(), dist.beta.copy()
    genes = op * nd + np.arange(nd)
    alpha[genes], beta[genes] = 1.0, _PIN
    alpha[genes[0]], beta[genes[0]] = _PIN, 1.0
    return GeneDistributions(alpha=alpha, beta=beta, rho=dist.rho)


def feature_run(problem: dm.DeviceMemoryProblem, symmetry_op: int | None, seed: int,
                evaluations: int = FEATURE_EVALUATIONS, deadline: Deadline | None = None) -> BrkgaResult:
    """Standard BRKGA (uniform genes, rho 0.7) for ``evaluations``, ``symmetry_op`` (if any)
    pinned, the host-only chromosome in the first population."""
    n = problem.graph.n_ops
    size = dm.chromosome_size(problem)
    dist = GeneDistributions.uniform(size)
    if symmetry_op is not None:
        dist = fix_symmetry(problem, dist, symmetry_op)
    host = keys_for(problem, np.zeros(n, dtype=np.int64), np.arange(n))
    return brkga(lambda keys: dm.fitness(problem, dm.evaluate_keys(problem, keys)), size,
                 BrkgaParams(evaluations=evaluations), dist, seed=seed, initial=host, deadline=deadline)


def population_statistics(problem: dm.DeviceMemoryProblem, population: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected placement (n, D) and expected schedule position (n,) in [0, 1] over chromosomes."""
    n, nd = problem.graph.n_ops, problem.n_devices
    share = np.zeros((n, nd))
    position = np.zeros(n)
    for keys in population:
        placement = dm.split_keys(np.asarray(keys, np.float64), n, nd)[0]
        share[np.arange(n), placement] += 1.0
        position[dm.decode_op_order(problem, keys)] += np.arange(n) / max(n - 1, 1)
    return share / len(population), position / len(population)


def prepare(problem: dm.DeviceMemoryProblem, seed: int = 0, deadline: Deadline | None = None,
            pin: bool = True, evaluations: int = FEATURE_EVALUATIONS) -> RegalInputs:
    """Features of ``problem`` (runs the feature BRKGA with ``seed`` for ``evaluations``).  ``pin=False`` keeps the
    symmetry flag but does not hold that op on device 0: here the devices are not interchangeable
    (graph inputs live on the host), so the paper's symmetry breaking can exclude the optimum."""
    in_b, out_b, param = op_memory(problem)
    src, dst, tensors = edge_list(problem)
    edge_bytes = problem.arrays.size[tensors].astype(np.float64)
    scale = max(float(np.max(in_b, initial=0)), float(np.max(out_b, initial=0)), float(np.max(param, initial=0)),
                float(np.max(edge_bytes, initial=0)), 1.0)
    symmetry_op = int(np.argmax(in_b + out_b + param))
    warm = feature_run(problem, symmetry_op if pin else None, seed, evaluations, deadline)
    share, position = population_statistics(problem, warm.population)
    flag = np.zeros(problem.graph.n_ops)
    flag[symmetry_op] = 1.0
    x = np.column_stack([in_b / scale, out_b / scale, param / scale, share, position, flag]).astype(np.float32)
    return RegalInputs(x=x, src=src, dst=dst, edge_x=(edge_bytes / scale).astype(np.float32)[:, None],
                       symmetry_op=symmetry_op, pinned=pin, warm=warm)
