"""Where numba caches compiled kernels: decided once, before any kernel is defined.

numba caches a kernel beside its source file (``__pycache__``), or, when that folder
is not writable (a system-wide install), in the user's cache directory
(``~/.cache/numba``).  When neither is writable -- a read-only install run by a user
without a writable home, as in many containers -- numba refuses to define a cached
kernel at all ("no locator available") and nothing would import.  So before the
first kernel module loads, :func:`ensure_cache_dir` checks both places and, only if
both fail, points ``NUMBA_CACHE_DIR`` at a per-user folder in the temp directory.
A ``NUMBA_CACHE_DIR`` the user set is always honoured.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["ensure_cache_dir"]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numba"


def ensure_cache_dir(package_dir: Path | None = None) -> str | None:
    """Set ``NUMBA_CACHE_DIR`` when numba could not cache anywhere; returns the folder it set, else ``None``."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    package_dir = package_dir or Path(__file__).resolve().parent
    if _writable(package_dir / "__pycache__") or _writable(_user_cache()):
        return None
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    folder = Path(tempfile.gettempdir()) / f"onnx-sched-numba-cache-{uid}"
    if not _writable(folder):
        return None  # nothing writable at all: numba will say so
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    if "numba" in sys.modules:  # numba read its environment already
        sys.modules["numba"].config.CACHE_DIR = str(folder)
    return str(folder)
