"""Where a command may write: never over a file it reads, never two outputs to one path.

Every command that writes files (the model, ``--report``, ``--plot``, profiles, placements)
checks its output paths here before it writes anything.  The files a model is read from are
the model itself, an IR's ``.bin`` and an ONNX model's external data files; an output path
that names one of them (through a symlink or a hard link too), names another output, is a
directory or lies under a file is refused with a ``ValueError`` naming the flag.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

__all__ = [
    "atomic_write", "atomic_write_bytes", "check_output_paths", "copy_targets", "default_file_mode", "external_data_files",
    "is_model_file", "is_special", "model_files", "same_entry",
]


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # once, at import: setting it is process-wide, so not on every write


def default_file_mode() -> int:
    """The mode a plain ``open()`` would give a new file (0o666 less the umask): temporary files
    made by ``tempfile`` are 0o600 and keep it through ``os.replace``."""
    return 0o666 & ~_UMASK


def is_special(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (through links) is a device, a pipe or a socket: ``/dev/null``, ``/dev/stdout``, a FIFO.

    >>> is_special("/dev/null"), is_special(__file__)
    (True, False)
    """
    path = Path(path)
    return path.exists() and not path.is_file() and not path.is_dir()


def atomic_write(path: str | os.PathLike[str], fill: Callable[[str], None]) -> Path:
    """Make ``path`` by ``fill(temporary path)`` in the same folder, then ``os.replace`` (which also
    replaces a link at ``path``), with the mode a plain ``open()`` would give; a reader never sees a
    half-written file.  A device or a pipe (:func:`is_special`) cannot be replaced without destroying it
    (``-o /dev/null`` as root): the file is made in the temporary folder and copied into it."""
    path = Path(path)
    if is_special(path):
        with tempfile.TemporaryDirectory(prefix="onnx_sched_") as folder:
            tmp = Path(folder) / path.name
            fill(str(tmp))
            with open(tmp, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        return path
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        fill(tmp)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def external_data_files(model: object, model_path: str | os.PathLike) -> list[Path]:
    """The external data files an ``onnx.ModelProto`` references, resolved next to ``model_path``; not
    ``model_path`` itself, which a model imported with its weights left in its file refers to
    (:func:`~onnx_sched.importers.onnx.load_model_by_reference`)."""
    import onnx

    folder = Path(model_path).parent
    found: dict[str, Path] = {}
    for init in model.graph.initializer:  # type: ignore[attr-defined]
        if init.data_location == onnx.TensorProto.EXTERNAL:
            for entry in init.external_data:
                if entry.key == "location" and not is_model_file(entry.value, model_path):
                    found.setdefault(entry.value, folder / entry.value)
    return list(found.values())


def is_model_file(location: str, model_path: str | os.PathLike) -> bool:
    """Whether an external-data ``location`` names the model file ``model_path`` itself."""
    return (Path(model_path).parent / location).resolve() == Path(model_path).resolve()


def model_files(path: str | os.PathLike, *, external: bool = True) -> list[Path]:
    """The files a model at ``path`` is read from: itself, an IR's ``.bin``, and (with ``external``)
    an ONNX model's external data files, read from the file's header without the weights.

    >>> [p.name for p in model_files("net.xml")]
    ['net.xml', 'net.bin']
    """
    p = Path(path)
    if p.suffix.lower() == ".xml":
        return [p, p.with_suffix(".bin")]
    if not external or not p.is_file() or not _mentions(p, b"location"):
        return [p]
    import onnx

    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception:  # unreadable: the importer reports it in its own words
        return [p]
    return [p, *external_data_files(model, p)]


def _mentions(path: Path, word: bytes) -> bool:
    """Whether the bytes of the file at ``path`` contain ``word``: an ONNX file without the key ``location`` has no
    external data, which saves parsing its weights (a second or more per GB) to find none."""
    import mmap

    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return False
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(word) >= 0
    except OSError:  # unreadable: whoever reads it next says so
        return True


def copy_targets(model_path: str | os.PathLike, external: Iterable[Path], output: str | os.PathLike) -> list[tuple[Path, Path]]:
    """(input file, where it goes) for each external data file a model written to ``output`` needs
    beside it; files already in place (the output goes to the model's own folder) are left out.
    ``ValueError`` for a location outside the model's folder (onnx refuses those too)."""
    folder, out_dir = Path(model_path).parent, Path(output).parent
    pairs = []
    for src in external:
        rel = Path(os.path.relpath(src, folder))
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"{model_path}: external data location {src} is outside the model's folder")
        if not same_entry(src, out_dir / rel):
            pairs.append((Path(src), out_dir / rel))
    return pairs


def same_entry(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """The same name in the same folder (a link at that name is not followed: it is its own entry)."""
    a, b = Path(a), Path(b)
    return a.name == b.name and _same(a.parent, b.parent)


def _same(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def check_output_paths(inputs: Iterable[str | os.PathLike], outputs: Mapping[str, str | os.PathLike | None],
                       reserved: Iterable[str | os.PathLike] = ()) -> None:
    """``ValueError`` when an output (``{flag: path}``, ``None`` for flags not given) would overwrite
    one of ``inputs`` or another output, takes a ``reserved`` path (where the written model's
    external data goes), is a directory, or sits under something that is not one.

    >>> check_output_paths(["m.onnx"], {"-o": "out.onnx", "--report": "m.onnx"})
    Traceback (most recent call last):
    ...
    ValueError: --report m.onnx: is an input file (m.onnx); choose another path
    """
    read = [Path(p) for p in inputs]
    taken = [Path(p) for p in reserved]
    given = [(flag, Path(p)) for flag, p in outputs.items() if p is not None]
    for i, (flag, out) in enumerate(given):
        for place in taken:
            if same_entry(out, place):
                raise ValueError(f"{flag} {out}: is where the written model's external data goes; choose another path")
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
