"""REGAL's training, validation and test problems (paper 003, section 4.1 and appendix A.1).

Problems on ``n_devices`` devices (2 by default; :func:`training_devices`) from two sources, disjoint by
topology across the splits:

* synthetic graphs of the five families of :mod:`onnx_sched.synth` (``er``, ``ws``,
  ``ba``, ``sbm``, ``layered``); training and validation draw seeds below
  :data:`~onnx_sched.synth.TEST_SEED_BASE` (validation from 5,000 up), test graphs from it;
* corpus models (``/work/shared/corpus/onnx``, or ``$ONNX_SCHED_CORPUS``) split by name
  (:data:`TRAIN_CORPUS`, :data:`VALIDATION_CORPUS`, :data:`TEST_CORPUS`), each training or
  validation model copied with multiplicative tensor-size noise U(0.5, 1.5), one draw
  per tensor per copy (A.1); test models are used as they are.

An :class:`Instance` carries the problem, REGAL's features (with their feature run)
and standard BRKGA's objective at the same budget (``o_s`` of the reward
``-o_a / o_s``) for each seed of a small pool, computed once per problem, so a
training step can run its actions and ``o_s`` with the same seed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_sched.brkga import BrkgaParams
from onnx_sched.cost import device_memory as dm
from onnx_sched.graph import Graph
from onnx_sched.models.inference.regal_features import FEATURE_EVALUATIONS, RegalInputs, prepare
from onnx_sched.passes.device_memory.brkga import solve
from onnx_sched.synth import TEST_SEED_BASE, generate

__all__ = [
    "CORPUS",
    "DEVICES",
    "EXTRA_DEVICES",
    "FAMILIES",
    "TEST_CORPUS",
    "TRAIN_CORPUS",
    "VALIDATION_CORPUS",
    "Instance",
    "corpus_graph",
    "make_instance",
    "noisy_copy",
    "synthetic_graphs",
    "training_devices",
]

CORPUS = Path(os.environ.get("ONNX_SCHED_CORPUS", "/work/shared/corpus/onnx"))
DEVICES = ("CPU", "GPU")  # the two devices of the shipped checkpoint
#: Names of the third and later devices of a training problem (only labels: the first device is the host).
EXTRA_DEVICES = ("NPU", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6")
FAMILIES = ("er", "ws", "ba", "sbm", "layered")
TRAIN_CORPUS = ("light_inception_v1", "light_shufflenet", "light_squeezenet", "mobilenet_v2", "unet",
                "distilbert_base", "mistral_swa_4l", "light_bvlc_alexnet")
VALIDATION_CORPUS = ("convnext_tiny", "light_zfnet512")
TEST_CORPUS = ("resnet50", "light_resnet50", "efficientnet_b0", "whisper_tiny_encoder", "light_vgg19", "vit_base",
               "bert_base", "gpt2_small", "segformer_b0", "yolos_tiny")
VALIDATION_SEED_BASE = 5_000


@dataclass(frozen=True, eq=False)
class Instance:
    """One training / evaluation problem with its features and standard BRKGA's objective."""

    name: str
    problem: dm.DeviceMemoryProblem
    inputs: RegalInputs
    standards: tuple[float, ...]  # o_s: standard BRKGA at ``evaluations``, seeds 0, 1, ...

    @property
    def standard(self) -> float:
        """o_s with seed 0."""
        return self.standards[0]


def training_devices(n_devices: int) -> tuple[str, ...]:
    """The devices of an ``n_devices``-device training problem: :data:`DEVICES`, then :data:`EXTRA_DEVICES`.

    >>> training_devices(3)
    ('CPU', 'GPU', 'NPU')
    """
    if not 2 <= n_devices <= len(DEVICES) + len(EXTRA_DEVICES):
        raise ValueError(f"REGAL trains on 2 to {len(DEVICES) + len(EXTRA_DEVICES)} devices, got {n_devices}")
    return (DEVICES + EXTRA_DEVICES)[:n_devices]


def noisy_copy(graph: Graph, rng: np.random.Generator, name: str) -> Graph:
    """``graph`` with every tensor size multiplied by its own U(0.5, 1.5) draw (A.1)."""
    scale = rng.uniform(0.5, 1.5, size=graph.n_tensors)
    sizes = np.maximum(np.rint(graph.tensor_bytes * scale), 0).astype(np.int64)
    return dataclasses.replace(graph, name=name, tensor_bytes=sizes)


def corpus_graph(model: str) -> Graph:
    from onnx_sched.importers.onnx import import_onnx

    return import_onnx(CORPUS / f"{model}.onnx").graph


def synthetic_graphs(count: int, seed_base: int, min_ops: int, max_ops: int, seed: int) -> list[Graph]:
    """``count`` graphs cycling through :data:`FAMILIES`, sizes uniform in [min_ops, max_ops]."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        family = FAMILIES[i % len(FAMILIES)]
        g = generate(family, int(rng.integers(min_ops, max_ops + 1)), seed_base + i)
        out.append(dataclasses.replace(g, name=f"{family}-{g.n_ops}-s{seed_base + i}"))
    return out


def corpus_variants(models: Iterable[str], copies: int, seed: int) -> list[Graph]:
    """``copies`` noisy copies of each corpus model (0 copies: the models as they are)."""
    rng = np.random.default_rng(seed)
    out = []
    for m in models:
        g = corpus_graph(m)
        out += [noisy_copy(g, rng, f"{m}~{c}") for c in range(copies)] if copies else [g]
    return out


def make_instance(graph: Graph, evaluations: int = 5000, feature_seed: int = 0, pin: bool = True,
                  seeds: int = 1, n_devices: int = 2, feature_evaluations: int = FEATURE_EVALUATIONS) -> Instance:
    """The problem of ``graph`` on :func:`training_devices` (``n_devices``), its features (a feature run of
    ``feature_evaluations``), and ``o_s`` for seeds ``0 .. seeds - 1``."""
    problem = dm.DeviceMemoryProblem.build(graph, training_devices(n_devices))
    standards = tuple(solve(problem, BrkgaParams(evaluations=evaluations), seed=s).best_fitness for s in range(seeds))
    inputs = prepare(problem, feature_seed, pin=pin, evaluations=feature_evaluations)
    return Instance(name=graph.name, problem=problem, inputs=inputs, standards=standards)


def split_graphs(split: str, synthetic: int, copies: int, min_ops: int, max_ops: int, seed: int) -> list[Graph]:
    """The graphs of ``split`` ("train", "validation" or "test")."""
    if split == "train":
        return synthetic_graphs(synthetic, 0, min_ops, max_ops, seed) + corpus_variants(TRAIN_CORPUS, copies, seed)
    if split == "validation":
        return (synthetic_graphs(synthetic, VALIDATION_SEED_BASE, min_ops, max_ops, seed + 1)
                + corpus_variants(VALIDATION_CORPUS, copies, seed + 1))
    if split == "test":
        return synthetic_graphs(synthetic, TEST_SEED_BASE, min_ops, max_ops, seed + 2) + corpus_variants(TEST_CORPUS, 0, 0)
    raise ValueError(f"split must be train, validation or test, got {split!r}")


def make_instances(graphs: list[Graph], evaluations: int, echo: Callable[[str], None] = print,
                   pin: bool = True, seeds: int = 1, n_devices: int = 2,
                   feature_evaluations: int = FEATURE_EVALUATIONS) -> list[Instance]:
    out = []
    for i, g in enumerate(graphs):
        out.append(make_instance(g, evaluations, pin=pin, seeds=seeds, n_devices=n_devices,
                                 feature_evaluations=feature_evaluations))
        if (i + 1) % 25 == 0:
            echo(f"  {i + 1}/{len(graphs)} instances")
    return out
