"""The held-out corpus split of issue 17 (peak-memory policy): models training never sees.

Fixed before any issue-17 training and written down in ``docs/issue17_split.md``
(with the reason for each choice).  :data:`HELD_OUT_PEAKMEM` covers the corpus's
kinds: CNNs, transformers (encoder, decoder with GQA, encoder-decoder, vision) and
irregularly wired NAS / RandWire networks; where the corpus has a near-twin of a
held-out model (same architecture, another config) the twin is held out too or named
in the doc.  Everything else in the corpus folder is the train split
(:func:`train_models`), which :mod:`onnx_sched.synth.corpus_subgraph` draws from.

This split is separate from the GFlowNet's (``benchmarks/gflownet_tables.py``,
``corpus_split``: every third small model) and from REGAL's
(``models/training/regal_data.py``); they answer other papers' protocols.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CORPUS", "HELD_OUT_PEAKMEM", "corpus_dir", "held_out_models", "train_models"]

#: The corpus folder (``$ONNX_SCHED_CORPUS`` overrides it, as for REGAL's data).
CORPUS = Path("/work/shared/corpus/onnx")

#: Corpus models (file stems) the issue-17 peak-memory policy never trains on.
HELD_OUT_PEAKMEM: tuple[str, ...] = (
    # CNNs
    "efficientnet_b0",
    "light_densenet121",
    "light_inception_v2",
    # transformers
    "vit_base",
    "t5_small",
    "llama_gqa_8l",
    "mistral_swa_4l",
    # NAS / RandWire
    "randwire_er",
    "nasnet_a_mobile",
)


def corpus_dir(corpus: str | os.PathLike[str] | None = None) -> Path:
    """``corpus``, else ``$ONNX_SCHED_CORPUS``, else :data:`CORPUS`."""
    return Path(corpus) if corpus is not None else Path(os.environ.get("ONNX_SCHED_CORPUS", CORPUS))


def _models(corpus: str | os.PathLike[str] | None) -> list[Path]:
    folder = corpus_dir(corpus)
    paths = sorted(folder.glob("*.onnx"))
    if not paths:
        raise FileNotFoundError(f"no ONNX models in corpus folder {folder}")
    return paths


def train_models(corpus: str | os.PathLike[str] | None = None) -> list[Path]:
    """The train split: every ``*.onnx`` of the corpus folder not in :data:`HELD_OUT_PEAKMEM`, sorted."""
    return [p for p in _models(corpus) if p.stem not in HELD_OUT_PEAKMEM]


def held_out_models(corpus: str | os.PathLike[str] | None = None) -> list[Path]:
    """The held-out models present in the corpus folder, sorted."""
    return [p for p in _models(corpus) if p.stem in HELD_OUT_PEAKMEM]
