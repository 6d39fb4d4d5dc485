"""Where a command may write: never over a file it reads, never two outputs to one path.

Every command that writes files (the model, ``--report``, ``--plot``, profiles, placements)
checks its output paths here before it writes anything.  The files a model is read from are
the model itself, an IR's ``.bin`` and an ONNX model's external data files; an output path
that names one of them (through a symlink or a hard link too), names another output, is a
directory or lies under a file is refused with a ``ValueError`` naming the flag.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["atomic_write_bytes", "check_output_paths", "default_file_mode", "external_data_files", "model_files"]


def default_file_mode() -> int:
    """The mode a plain ``open()`` would give a new file (0o666 less the umask): temporary files
    made by ``tempfile`` are 0o600 and keep it through ``os.replace``."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``,
    with the mode a plain ``open()`` would give; a reader never sees a half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def external_data_files(model: object, model_path: str | os.PathLike) -> list[Path]:
    """The external data files an ``onnx.ModelProto`` references, resolved next to ``model_path``."""
    import onnx

    folder = Path(model_path).parent
    found: dict[str, Path] = {}
    for init in model.graph.initializer:  # type: ignore[attr-defined]
        if init.data_location == onnx.TensorProto.EXTERNAL:
            for entry in init.external_data:
                if entry.key == "location":
                    found.setdefault(entry.value, folder / entry.value)
    return list(found.values())


def model_files(path: str | os.PathLike, *, external: bool = True) -> list[Path]:
    """The files a model at ``path`` is read from: itself, an IR's ``.bin``, and (with ``external``)
    an ONNX model's external data files, read from the file's header without the weights.

    >>> [p.name for p in model_files("net.xml")]
    ['net.xml', 'net.bin']
    """
    p = Path(path)
    if p.suffix.lower() == ".xml":
        return [p, p.with_suffix(".bin")]
    if not external or not p.is_file():
        return [p]
    import onnx

    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception:  # unreadable: the importer reports it in its own words
        return [p]
    return [p, *external_data_files(model, p)]


def _same(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def check_output_paths(inputs: Iterable[str | os.PathLike], outputs: Mapping[str, str | os.PathLike | None]) -> None:
    """``ValueError`` when an output (``{flag: path}``, ``None`` for flags not given) would overwrite
    one of ``inputs`` or another output, is a directory, or sits under something that is not one.

    >>> check_output_paths(["m.onnx"], {"-o": "out.onnx", "--report": "m.onnx"})
    Traceback (most recent call last):
    ...
    ValueError: --report m.onnx: is an input file (m.onnx); choose another path
    """
    read = [Path(p) for p in inputs]
    given = [(flag, Path(p)) for flag, p in outputs.items() if p is not None]
    for i, (flag, out) in enumerate(given):
        for src in read:
            if _same(out, src):
                raise ValueError(f"{flag} {out}: is an input file ({src}); choose another path")
        for other_flag, other in given[:i]:
            if _same(out, other):
                raise ValueError(f"{flag} {out}: is also the path of {other_flag}; give each output its own path")
        if out.is_dir():
            raise ValueError(f"{flag} {out}: is a directory, expected a file path")
        for parent in out.absolute().parents:
            if parent.exists():
                if not parent.is_dir():
                    raise ValueError(f"{flag} {out}: {parent} is not a directory")
                break
