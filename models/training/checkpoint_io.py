"""Reading a trainer's torch checkpoint (``.pt``) with one-line errors.

``--init-from`` and ``--resume`` take paths from the user: a file that is not a torch checkpoint, or one
another trainer wrote, fails here with a ``ValueError`` naming the file and what is missing, never with
an unpickling traceback or a ``KeyError`` deep inside a trainer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["load_checkpoint"]


def load_checkpoint(path: str | os.PathLike[str], keys: Sequence[str] = ()) -> dict[str, Any]:
    """The dict saved at ``path`` (trusted files: full unpickling, as the trainers wrote them), which must
    hold every entry of ``keys``."""
    import torch

    try:
        state = torch.load(path, weights_only=False, map_location="cpu")
    except FileNotFoundError:
        raise
    except Exception as exc:  # UnpicklingError, RuntimeError (zip), EOFError ...: not a torch checkpoint
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: not a torch checkpoint ({text})") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a checkpoint of this trainer (holds a {type(state).__name__}, not a dict)")
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{path}: not a checkpoint of this trainer (no {', '.join(missing)}; another trainer "
                         "wrote it?)")
    return state
