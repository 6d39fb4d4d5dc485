"""``onnx-sched gen FAMILY``: write a dataset of synthetic graphs.

::

    onnx-sched gen layered --nodes 500 --count 1000 --seed 0 -o data/train-500 --format npz
    onnx-sched gen er --nodes 1000 --count 30 --seed 10000 -o data/er-test
    onnx-sched gen ws --nodes 100 --count 10 --seed 0 -o data/ws --param k=6 --param p=0.1

Families: ``layered`` (paper 000 appendix A), ``er``, ``sbm`` (paper 001 C.3),
``ws``, ``ba`` (paper 002 E.5), and issue 17's export-like ones: ``randwire-er``,
``randwire-ws``, ``randwire-ba``, ``transformer``, ``corpus-subgraph`` (train-split
corpus pieces); see :mod:`onnx_sched.synth`.  ``--nodes`` is the number of ops
(randwire: within 10% or 12 ops; the others exactly).  Graph ``i`` uses
seed ``S + i`` (convention: training ``0..9999``, test ``10000+``).

Output folder: ``{family}-{i:05d}.npz`` (compact arrays, layout in
:mod:`onnx_sched.synth.dataset`) or ``{family}-{i:05d}.onnx`` (a runnable
model, :mod:`onnx_sched.synth.onnx_writer`), and ``manifest.json`` with the
family, its full parameters, the seed and per-file ``n_ops`` / ``n_edges`` /
``sha256`` (ONNX files also ``onnx_nodes``).  Every file is written to a temp
file and moved into place with ``os.replace``; the manifest is written last.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import asdict, is_dataclass, replace
from pathlib import Path
from typing import Any

import click

from onnx_sched import __version__
from onnx_sched.synth import FAMILIES
from onnx_sched.synth.common import DEFAULT_UNIT_BYTES, GMM_PAPER
from onnx_sched.synth.dataset import MANIFEST, atomic_write_bytes, graph_to_npz_bytes, sha256_file

__all__ = ["command", "family_params", "write_dataset"]


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    raise ValueError(f"--param value {text!r} is not a number")


def _params_default(family: str) -> Any:
    """The family's default ``params`` dataclass (layered, randwire-*, ...), or None."""
    p = inspect.signature(FAMILIES[family]).parameters.get("params")
    return p.default if p is not None and is_dataclass(p.default) else None


def family_params(family: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The family's numeric keyword parameters with ``overrides`` applied; unknown names raise."""
    fn = FAMILIES[family]
    dataclass_default = _params_default(family)
    if dataclass_default is not None:
        defaults = {k: v for k, v in asdict(dataclass_default).items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
    else:
        defaults = {
            name: p.default
            for name, p in inspect.signature(fn).parameters.items()
            if p.kind is p.POSITIONAL_OR_KEYWORD and name not in ("n", "seed") and isinstance(p.default, (int, float))
        }
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise ValueError(f"family {family!r} has no parameter {unknown[0]!r}; parameters: {', '.join(defaults)}")
    return {**defaults, **overrides}


def _generate(family: str, n: int, seed: int, params: dict[str, Any], unit_bytes: int):  # noqa: ANN202
    fn = FAMILIES[family]
    # families whose sizes come from tensor shapes (randwire-*, transformer, corpus-subgraph) have no unit
    extra = {"unit_bytes": unit_bytes} if "unit_bytes" in inspect.signature(fn).parameters else {}
    dataclass_default = _params_default(family)
    if dataclass_default is not None:
        return fn(n, seed, replace(dataclass_default, **params), **extra)
    return fn(n, seed, **params, **extra)


def write_dataset(
    family: str,
    nodes: int,
    count: int,
    seed: int,
    out: Path,
    fmt: str = "npz",
    overrides: dict[str, Any] | None = None,
    unit_bytes: int = DEFAULT_UNIT_BYTES,
) -> dict[str, Any]:
    """Generate and write the dataset; returns the manifest (also written to ``out/manifest.json``)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown graph family {family!r}; choose from {', '.join(FAMILIES)}")
    if nodes < 1 or count < 1:
        raise ValueError(f"--nodes and --count must be >= 1, got {nodes} and {count}")
    if fmt not in ("npz", "onnx"):
        raise ValueError(f"--format must be npz or onnx, got {fmt!r}")
    params = family_params(family, dict(overrides or {}))
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(count):
        s = seed + i
        g = _generate(family, nodes, s, params, unit_bytes)
        path = out / f"{family}-{i:05d}.{fmt}"
        entry: dict[str, Any] = {"file": path.name, "seed": s, "n_ops": g.n_ops, "n_edges": int(len(g.edges))}
        if fmt == "npz":
            atomic_write_bytes(path, graph_to_npz_bytes(g))
        else:
            from onnx_sched.synth.onnx_writer import graph_to_onnx

            model = graph_to_onnx(g)
            entry["onnx_nodes"] = len(model.graph.node)
            atomic_write_bytes(path, model.SerializeToString())
        entry["sha256"] = sha256_file(path)
        files.append(entry)
    manifest = {
        "format": fmt,
        "family": family,
        "params": params,
        "memory_mixture": asdict(GMM_PAPER),
        "nodes": nodes,
        "seed": seed,
        "count": count,
        "unit_bytes": unit_bytes,
        "generator": f"onnx-sched {__version__}",
        "files": files,
    }
    atomic_write_bytes(out / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


@click.command("gen")
@click.argument("family", type=click.Choice(sorted(FAMILIES)))
@click.option("--nodes", "-n", type=int, required=True, help="Ops per graph.")
@click.option("--count", "-k", type=int, default=1, show_default=True, help="Number of graphs.")
@click.option("--seed", "-s", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of graph 0; graph i uses seed+i.")
@click.option("-o", "--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Output folder.")
@click.option("--format", "fmt", type=click.Choice(["npz", "onnx"]), default="onnx", show_default=True)
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Override a family parameter (repeatable).")
@click.option("--unit-bytes", type=int, default=DEFAULT_UNIT_BYTES, show_default=True, help="Bytes per memory unit.")
def command(
    family: str, nodes: int, count: int, seed: int, out: Path, fmt: str, params: tuple[str, ...], unit_bytes: int
) -> None:
    """Write COUNT synthetic graphs of FAMILY (layered, er, sbm, ws, ba, randwire-er|ws|ba, transformer,
    corpus-subgraph) with manifest.json."""
    overrides: dict[str, Any] = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--param expects NAME=VALUE, got {item!r}")
        overrides[name.strip()] = _parse_value(value.strip())
    manifest = write_dataset(family, nodes, count, seed, out, fmt, overrides, unit_bytes)
    ops, edges = (sum(f[key] for f in manifest["files"]) for key in ("n_ops", "n_edges"))
    asked = "" if ops == nodes * count else f"; {nodes} asked per graph, which the family approximates"
    click.echo(f"wrote {count} {family} graphs ({ops} ops, {edges} edges in all{asked}) as {fmt} to {out}/")
