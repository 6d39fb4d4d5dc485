"""Every corpus model split between an ONNX Runtime CPU core and a torch device: do the outputs stay the model's?

The split executor runs a torch device's parts as onnx2torch modules (``runtimes/torch_parts.py``).  Its GPU runs so
far (docs/results.md 17.3-17.4) covered a few models each; this check runs the whole corpus, three placements per
model, each against one ONNX Runtime session of the whole model (corpus weights replaced by seeded random ones, so
outputs are informative):

* ``all``: every op on the torch device (one part);
* ``halves``: the first half of the topological order on the CPU, the rest on the torch device;
* ``blocks``: blocks of ``--block`` consecutive ops (topological order) alternating between the two, many crossings.

Reported per model and placement: parts, tensors crossing, the largest absolute difference from the ONNX Runtime
outputs and whether it is within the torch device's tolerance (``TOLERANCE``), and the seconds of one run after a
warm-up.  A model onnx2torch cannot convert, or that fails otherwise, is recorded with its one-line reason and the
run goes on.

    python benchmarks/torch_parts_corpus.py --device cuda:0 --out docs/torch_parts_corpus_cuda.json
    python benchmarks/torch_parts_corpus.py --device torch:cpu --models light_squeezenet resnet50   # no GPU

``--device`` another label (``CPU1``) puts device 1 on ONNX Runtime's CPU too: then every part is an ONNX Runtime
session, which checks how the installed ONNX Runtime takes the parts the split executor cuts (ONNX Runtime 1.22-1.30
failed on three of them, docs/results.md 17.6).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ONNX_SCHED_CORPUS", ROOT.parent / "shared" / "corpus")) / "onnx"


def placements(n_ops: int, order: np.ndarray, block: int) -> dict[str, np.ndarray]:
    """The three placements of the module docstring (device 1 = the torch device).

    >>> {k: v.tolist() for k, v in placements(5, np.array([0, 1, 2, 3, 4]), 2).items()}
    {'all': [1, 1, 1, 1, 1], 'halves': [0, 0, 1, 1, 1], 'blocks': [0, 0, 1, 1, 0]}
    """
    rank = np.empty(n_ops, np.int64)
    rank[order] = np.arange(n_ops)
    return {"all": np.ones(n_ops, np.int64), "halves": (rank >= n_ops // 2).astype(np.int64),
            "blocks": ((rank // block) % 2).astype(np.int64)}


def crossing(graph: Any, placement: np.ndarray) -> int:
    """Tensors read on a device other than their producer's."""
    consumers, count = graph.tensor_consumers, 0
    for t, producer in enumerate(graph.tensor_producer):
        readers = consumers.indices[consumers.indptr[t]:consumers.indptr[t + 1]]
        count += bool(producer >= 0 and (placement[readers] != placement[producer]).any())
    return count


def check_model(path: Path, device: str, block: int, seed: int) -> list[dict[str, Any]]:
    from onnx_sched.bench.inputs import import_feed
    from onnx_sched.bench.outputs import compare_outputs
    from onnx_sched.bench.runtimes.torch_parts import TOLERANCE
    from onnx_sched.bench.split_executor import SplitExecutor, device_spec, iter_parts, split_model
    from onnx_sched.bench.weights import with_random_weights
    from onnx_sched.dag import kahn_order
    from onnx_sched.importers.onnx import import_onnx

    imported = with_random_weights(import_onnx(path))
    graph, feed = imported.graph, import_feed(imported, seed)
    second_core = 1 % (os.cpu_count() or 1)
    specs = [device_spec("CPU", threads=1, cores=(0,)), device_spec(device, threads=1, cores=(second_core,))]
    outputs = [o.name for o in imported.model.graph.output]
    tol = max(TOLERANCE[specs[1].kernels or "cpu"])  # "": ONNX Runtime's CPU kernels on both devices
    with SplitExecutor(iter_parts(imported, np.zeros(graph.n_ops, np.int64)), specs[:1], outputs) as ex:
        reference = ex.run(feed)
    rows = []
    for name, p in placements(graph.n_ops, np.asarray(kahn_order(graph)), block).items():
        parts = split_model(imported, p)
        with SplitExecutor(parts, specs, outputs) as ex:
            ex.run(feed)  # warm-up: conversion caches, CUDA kernels
            t0 = time.perf_counter()
            got = ex.run(feed)
            seconds = time.perf_counter() - t0
        ok, err = compare_outputs(reference, got, tol)
        rows.append({"model": path.stem, "placement": name, "torch_ops": int(p.sum()), "parts": len(parts),
                     "crossing": crossing(graph, p), "max_abs_diff": float(err), "tolerance": tol, "equal": bool(ok),
                     "seconds": round(seconds, 4)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda:0",
                    help="device 1: a torch device (cuda:N, torch:cpu), or any other label for ONNX Runtime's CPU")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--models", nargs="*", help="model names (default: every .onnx in the corpus)")
    ap.add_argument("--block", type=int, default=16, help="ops per block of the 'blocks' placement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=float("inf"),
                    help="seconds after which no further model is started (models run smallest file first)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    paths = [args.corpus / f"{m}.onnx" for m in args.models] if args.models else sorted(args.corpus.glob("*.onnx"))
    paths.sort(key=lambda p: p.stat().st_size)
    console, rows, failed, skipped = Console(), [], {}, []
    t_start = time.perf_counter()
    for path in paths:
        t0 = time.perf_counter()
        if t0 - t_start > args.budget:
            skipped.append(path.stem)
            continue
        try:
            got = check_model(path, args.device, args.block, args.seed)
        except Exception as exc:  # a model onnx2torch cannot convert, or a failure to report and pass over
            failed[path.stem] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            print(f"{path.stem}: {failed[path.stem]}", file=sys.stderr)
            continue
        rows += got
        print(f"{path.stem}: {time.perf_counter() - t0:.1f} s, "
              + ", ".join(f"{r['placement']} {'ok' if r['equal'] else 'DIFFERS'} {r['max_abs_diff']:.2g}" for r in got),
              file=sys.stderr)
    import onnxruntime as ort

    table = Table(title=f"parts on {args.device} beside an ONNX Runtime {ort.__version__} CPU core: outputs vs one "
                  "ORT session")
    for col in ("model", "placement", "torch ops", "parts", "crossing", "max abs diff", "equal", "s"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["model"], r["placement"], str(r["torch_ops"]), str(r["parts"]), str(r["crossing"]),
                      f"{r['max_abs_diff']:.2g}", "yes" if r["equal"] else "NO", f"{r['seconds']:.3f}")
    console.print(table)
    equal = sum(r["equal"] for r in rows)
    console.print(f"{len({r['model'] for r in rows})} models, {equal} of {len(rows)} placements equal; "
                  f"{len(failed)} models failed: {', '.join(failed) or 'none'}; "
                  f"past --budget: {', '.join(skipped) or 'none'}; "
                  f"{time.perf_counter() - t_start:.0f} s")
    if args.out:
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "device": args.device, "block": args.block,
                                        "onnxruntime": ort.__version__,
                                        "rows": rows, "failed": failed, "skipped": skipped}, indent=1))
    return 0 if equal == len(rows) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
