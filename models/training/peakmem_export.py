"""Export a peak-memory training checkpoint as the shipped pair: ``.onnx`` for ONNX Runtime
inference (the light install) and ``.pt`` (state dict + configs) for further training.
torch only, with the ``[train]`` extra."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from onnx_sched.models.inference.topoformer_onnx import MEM_BETA_KEY, TEMPERATURE_KEY
from onnx_sched.models.training.checkpoint_io import load_checkpoint
from onnx_sched.models.training.topoformer import EncoderConfig, Topoformer, export_onnx

__all__ = ["export_checkpoint", "load_model"]


def export_checkpoint(ckpt_path: str | os.PathLike[str], stem: str | os.PathLike[str], use_best: bool = True) -> tuple[Path, Path]:
    """Write ``stem.onnx`` (ONNX Runtime inference) and ``stem.pt`` (state dict + configs) from a training
    checkpoint, using the best-validation weights unless ``use_best=False`` (then the latest weights, or their
    moving average when the run kept one)."""
    st = load_checkpoint(ckpt_path)
    enc = EncoderConfig.from_json(st["encoder_config"])
    model = Topoformer(enc)
    if use_best and st.get("best") is not None:
        weights = st["best"]
    elif st.get("ema") is not None:
        weights = {k.removeprefix("module."): v for k, v in st["ema"].items() if k.startswith("module.")}
    else:
        weights = st["model"]
    model.load_state_dict(weights)
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "onnx_sched.objective": "peak-mem",
        "onnx_sched.train_config": json.dumps(st["config"]),
        "onnx_sched.epochs": str(st["epoch"]),
        "onnx_sched.best_val_gap_pct": f"{st['best_gap']:.3f}",
        "onnx_sched.train_wall_s": f"{st['wall_s']:.0f}",
    }
    if st["config"].get("temperature", 1.0) != 1.0:
        meta[TEMPERATURE_KEY] = f"{st['config']['temperature']:g}"
        meta[TEMPERATURE_KEY + ".how"] = "the temperature the policy was trained at"
    if st["config"].get("mem_beta", 0.0) > 0:
        meta[MEM_BETA_KEY] = f"{st['config']['mem_beta']:g}"
    onnx_path, pt_path = stem.with_suffix(".onnx"), stem.with_suffix(".pt")
    export_onnx(model, str(onnx_path), meta)
    torch.save({"encoder_config": st["encoder_config"], "train_config": st["config"], "state_dict": model.state_dict(),
                "epoch": st["epoch"], "best_val_gap_pct": st["best_gap"], "wall_s": st["wall_s"]}, pt_path)
    return onnx_path, pt_path


def load_model(pt_path: str | os.PathLike[str]) -> Topoformer:
    """A Topoformer from a ``.pt`` written by :func:`export_checkpoint`."""
    st = load_checkpoint(pt_path)
    model = Topoformer(EncoderConfig.from_json(st["encoder_config"]))
    model.load_state_dict(st["state_dict"])
    return model.eval()
