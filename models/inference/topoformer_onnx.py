"""Run an exported Topoformer with ONNX Runtime: graph -> node priorities, no torch.

The ONNX file carries its :class:`EncoderConfig` as JSON in ``metadata_props``
(``onnx_sched.encoder_config``), so the wrapper builds exactly the features the
model was trained on.  Sessions are cached per path.

Example (needs a checkpoint)::

    model = PriorityModel.load(DEFAULT_CHECKPOINT)
    y = model.priorities(graph)          # (n_ops,) float32
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from onnx_sched.deadline import Deadline
from onnx_sched.errors import OnnxSchedError
from onnx_sched.graph import Graph
from onnx_sched.models import CHECKPOINTS
from onnx_sched.models.inference.features import check_encoder_memory, encoder_inputs
from onnx_sched.models.inference.mask_rewrite import arithmetic_where
from onnx_sched.models.inference.timed_run import run_by

__all__ = ["DEFAULT_CHECKPOINT", "MEM_BETA_KEY", "TEMPERATURE_KEY", "CheckpointMissingError", "PriorityModel", "set_sample_temperature"]

DEFAULT_CHECKPOINT = CHECKPOINTS / "topoformer_peakmem.onnx"
TEMPERATURE_KEY = "onnx_sched.sample_temperature"
MEM_BETA_KEY = "onnx_sched.mem_beta"  # > 0: the checkpoint was trained for the memory-aware decoder (models/inference/mem_aware.py)


class CheckpointMissingError(OnnxSchedError, FileNotFoundError):
    """No trained encoder at the expected path (the CLI prints it as one line)."""


@dataclass(frozen=True, eq=False)
class PriorityModel:
    """An ONNX Runtime session of a Topoformer export plus the config it was trained with."""

    path: str
    session: Any
    config: dict[str, Any]
    metadata: dict[str, str]

    @staticmethod
    def load(path: str | os.PathLike[str] = DEFAULT_CHECKPOINT) -> PriorityModel:
        """Open (and cache) the model at ``path``; :class:`CheckpointMissingError` if it is absent."""
        p = Path(path).resolve()
        if not p.is_file():
            raise CheckpointMissingError(
                f"learned model checkpoint {str(p)!r} not found; train one with 'onnx-sched train "
                "peak-mem --export models/topoformer_peakmem' (needs the [train] extra) or use another --method"
            )
        return _load(str(p), p.stat().st_mtime_ns)

    @property
    def sample_temperature(self) -> float:
        """Sampling temperature tuned for this checkpoint (metadata ``onnx_sched.sample_temperature``), else 1."""
        return float(self.metadata.get(TEMPERATURE_KEY, 1.0))

    @property
    def mem_beta(self) -> float:
        """Weight of the live-memory term of the memory-aware decoder (metadata ``onnx_sched.mem_beta``), else 0."""
        return float(self.metadata.get(MEM_BETA_KEY, 0.0))

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.session.get_inputs())

    def priorities(self, g: Graph, timings: dict[str, float] | None = None,
                   deadline: Deadline | None = None) -> np.ndarray:
        """``(n_ops,)`` float64 priorities for ``g`` (higher = run earlier among ready ops); the encoder is stopped
        at ``deadline`` (:class:`~onnx_sched.errors.TimeLimitError`)."""
        t0 = time.perf_counter()
        check_encoder_memory(g.n_ops, "learned")
        needs_rel = "rel" in self.input_names
        inp = encoder_inputs(g, tuple(self.config["features"]), int(self.config["pe_dim"]), relations=needs_rel)
        t1 = time.perf_counter()
        feeds = {"x": inp.x}
        if needs_rel:
            feeds["rel"] = inp.rel
        (y,) = run_by(self.session, ["priority"], feeds, deadline, "learned", g.n_ops)
        t2 = time.perf_counter()
        if timings is not None:
            timings["features_s"] = t1 - t0
            timings["encoder_s"] = t2 - t1
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if len(y) != g.n_ops or not np.isfinite(y).all():
            raise ValueError(f"model {self.path!r} returned {len(y)} priorities (finite: {np.isfinite(y).all()}) for {g.n_ops} ops")
        return y


@lru_cache(maxsize=8)
def _load(path: str, _mtime: int) -> PriorityModel:
    import onnxruntime as ort

    from onnx_sched.importers.onnx import load_model

    proto = load_model(path)  # one line for a file that is not ONNX
    meta = {p.key: p.value for p in proto.metadata_props}
    if "onnx_sched.encoder_config" not in meta:
        raise ValueError(f"{path!r} is not an onnx-sched encoder export (no onnx_sched.encoder_config metadata)")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # no busy-waiting worker threads: the pass often runs beside other work (and CI shares cores)
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    fast = arithmetic_where(proto).SerializeToString()  # the same outputs, the attention mask built faster
    session = ort.InferenceSession(fast, opts, providers=["CPUExecutionProvider"])
    return PriorityModel(path=path, session=session, config=json.loads(meta["onnx_sched.encoder_config"]), metadata=meta)


def set_sample_temperature(path: str | os.PathLike[str], temperature: float, note: str = "", mem_beta: float | None = None) -> None:
    """Store a tuned sampling temperature (and how it was chosen) in a checkpoint's metadata, atomically;
    with ``mem_beta`` also the memory-aware decoder's beta (0 removes it: plain eq. 8)."""
    import tempfile

    import onnx

    if temperature <= 0:
        raise ValueError(f"sampling temperature must be > 0, got {temperature}")
    p = Path(path)
    model = onnx.load(str(p))
    props = {m.key: m.value for m in model.metadata_props}
    props[TEMPERATURE_KEY] = f"{temperature:g}"
    props[TEMPERATURE_KEY + ".how"] = note
    if mem_beta is not None:
        if not mem_beta >= 0:
            raise ValueError(f"mem_beta must be >= 0, got {mem_beta}")
        props.pop(MEM_BETA_KEY, None)
        if mem_beta > 0:
            props[MEM_BETA_KEY] = f"{mem_beta:g}"
    del model.metadata_props[:]
    for k, v in props.items():
        model.metadata_props.add(key=k, value=v)
    fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".onnx")
    os.close(fd)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
