"""Wall time and peak of wide beam searches (the final beams of ``auto``) on irregular graphs.

Each graph is an ``onnx-sched gen``-style graph written as ONNX and imported, exactly as
``benchmarks/certificates.py`` builds it (``generated_model``); each beam runs once, without a
time limit.
Run it in two checkouts to compare two versions of the search kernels.

    python benchmarks/beam_timing.py --graphs sbm-80 ws-80 --widths 200000 400000 1000000 --out beam_timing.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from certificates import SIZES, generated_model

from onnx_sched.cost.memory import profile
from onnx_sched.importers.onnx import import_onnx
from onnx_sched.passes.order.beam import beam_search


def certificate_graph(name: str, work: Path) -> object:
    """``FAMILY-SIZE`` as ``benchmarks/certificates.py`` writes it, imported back."""
    family, size = name.rsplit("-", 1)
    return import_onnx(generated_model(family, int(size), SIZES.index(int(size)), work)).graph


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["sbm-80", "ws-80"])
    ap.add_argument("--widths", nargs="+", type=int, default=[200_000, 400_000, 1_000_000])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.graphs:
            graph = certificate_graph(name, Path(tmp))
            beam_search(graph, 16, inplace=False)  # kernels compiled or loaded before the clock
            for width in args.widths:
                t0 = time.perf_counter()
                order, _ = beam_search(graph, width, inplace=False)
                seconds = time.perf_counter() - t0
                peak = int(profile(graph, order, False).peak)
                rows.append({"graph": name, "ops": graph.n_ops, "width": width, "seconds": seconds, "peak": peak})
                print(f"{name:8s} width {width:>9,d}  {seconds:7.1f} s  peak {peak / 2**20:9.2f} MiB", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"command": "python benchmarks/beam_timing.py " + " ".join(
            sys.argv[1:] if argv is None else argv), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
