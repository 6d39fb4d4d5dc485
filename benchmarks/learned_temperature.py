"""Choose the decoding temperature (and memory weight) of a learned peak-memory checkpoint on validation graphs.

The learned pass decodes the policy ``softmax(y / T - beta * live-memory change / s)``
(eq. 8 when ``beta = 0``; :mod:`onnx_sched.models.inference.mem_aware`).  A REINFORCE-trained
policy is sharp (its samples differ little from its greedy order), so a higher T can
find better best-of-K orders; how much depends on the checkpoint.  This script
measures best-of-``--samples`` (plus the greedy order) for each candidate ``(T, beta)``
on layered graphs with the *validation* seeds 9000+ (training used seeds < 9000;
tests use 10000+), against the registry pass ``beam`` at ``--ref-width``, and prints
the table.  ``--write`` stores the best pair in the checkpoint's metadata
(``onnx_sched.sample_temperature``, ``onnx_sched.mem_beta``), which the ``learned``
pass then uses by default.  ``--mem-betas`` defaults to the checkpoint's own beta
(0 for an eq. 8 checkpoint), so only T is searched unless asked.

    python benchmarks/learned_temperature.py --graphs 30 --ops 500 --write
    python benchmarks/learned_temperature.py --mem-betas 1 3 10 --ref-width 10000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from onnx_sched.models.inference.decoders import decode_graph, greedy, peaks, sample_orders
from onnx_sched.models.inference.mem_aware import mem_aware_orders
from onnx_sched.models.inference.topoformer_onnx import (
    DEFAULT_CHECKPOINT,
    TEMPERATURE_KEY,
    PriorityModel,
    set_sample_temperature,
)
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.synth.layered import layered_graph

VAL_SEED0 = 9000


def best_sampled(dg, y: np.ndarray, temperatures, samples: int, seed: int, mem_beta: float = 0.0) -> tuple[float, dict[float, float]]:  # noqa: ANN001
    """Greedy peak, and per temperature T the best of it and ``samples`` draws of the policy over ``y / T``
    (the sample-K decoder of the ``learned`` pass, seeded per graph).  With ``mem_beta = 0`` the greedy order
    does not depend on T and is decoded once."""
    def policy(t: float, k: int) -> np.ndarray:
        if mem_beta > 0:
            return mem_aware_orders(dg, y / t, mem_beta, k, seed=seed)
        return sample_orders(dg, y / t, k, np.random.default_rng(seed)) if k else greedy(dg, y)[None, :]

    greedy_peak = float(peaks(dg, policy(1.0, 0))[0])
    best = {}
    for t in temperatures:
        g_t = greedy_peak if mem_beta == 0 else float(peaks(dg, policy(t, 0))[0])
        best[t] = float(min(g_t, peaks(dg, policy(t, samples)).min()))
    return greedy_peak, best


def _cached_reference(path: Path | None, width: int, graphs: int, ops: int) -> list[int] | None:
    """The first ``graphs`` reference peaks from ``path`` if it holds at least that many at beam ``width``
    (and, when it says, for graphs of ``ops`` ops)."""
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("beam_width") != width or data.get("ops", ops) != ops or len(data.get("peaks", [])) < graphs:
        return None
    return data["peaks"][:graphs]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_CHECKPOINT)
    ap.add_argument("--graphs", type=int, default=30)
    ap.add_argument("--ops", type=int, default=500)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--ref-width", type=int, default=1000)
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1, 1.5, 2, 3, 4, 6, 8, 12])
    ap.add_argument("--mem-betas", type=float, nargs="+", default=None, help="memory weights to try (default: the checkpoint's)")
    ap.add_argument("--write", action="store_true", help="store the best temperature in the checkpoint")
    ap.add_argument("--out", type=Path, default=None, help="JSON results")
    ap.add_argument("--ref-cache", type=Path, default=None,
                    help="reference peaks JSON ({'beam_width', 'peaks'}, e.g. a training run's val_reference_*.json): "
                         "read when it covers --graphs at --ref-width, else computed (and written if the file does not exist)")
    args = ap.parse_args(argv)
    model = PriorityModel.load(args.model)
    betas = args.mem_betas if args.mem_betas is not None else [model.mem_beta]
    found: dict[tuple[float, float], list[float]] = {(t, b): [] for b in betas for t in args.temperatures}
    cached = _cached_reference(args.ref_cache, args.ref_width, args.graphs, args.ops)
    ref = []
    for i, seed in enumerate(range(VAL_SEED0, VAL_SEED0 + args.graphs)):
        g = layered_graph(args.ops, seed)
        if cached is None:
            beam = get_pass("beam", "peak-mem")(g, PassContext(time_limit=600, options={"beam_width": args.ref_width}))
            ref.append(float(beam.info["peak_bytes"]))
        else:
            ref.append(float(cached[i]))
        dg, y = decode_graph(g, False), model.priorities(g)
        for b in betas:
            for t, peak in best_sampled(dg, y, args.temperatures, args.samples, seed, b)[1].items():
                found[(t, b)].append(peak)
    if args.ref_cache is not None and not args.ref_cache.exists():  # never overwrite another run's cache
        args.ref_cache.write_text(json.dumps({"method": "beam", "beam_width": args.ref_width, "ops": args.ops,
                                              "peaks": [int(p) for p in ref]}), encoding="utf-8")
    r = np.asarray(ref)
    gaps = {key: float(np.mean((np.asarray(v) - r) / r) * 100.0) for key, v in found.items()}
    best = min(gaps, key=lambda key: (gaps[key], key))
    print(f"{args.graphs} validation graphs (seeds {VAL_SEED0}+) of {args.ops} ops, sample-{args.samples}, "
          f"gap from beam {args.ref_width}:")
    for (t, b), gap in gaps.items():
        print(f"  T = {t:<5g} beta = {b:<5g} {gap:+.2f} %{'   <- best' if (t, b) == best else ''}")
    result = {"model": str(args.model), "graphs": args.graphs, "ops": args.ops, "samples": args.samples,
              "ref_width": args.ref_width, "gap_pct": {f"T={t:g},beta={b:g}": g for (t, b), g in gaps.items()},
              "best": {"temperature": best[0], "mem_beta": best[1]}}
    if args.write:
        note = (f"best of T {args.temperatures} x beta {betas} on {args.graphs} validation graphs of {args.ops} ops "
                f"(sample-{args.samples} vs beam {args.ref_width}: {gaps[best]:+.2f} %)")
        set_sample_temperature(args.model, best[0], note, mem_beta=best[1])
        print(f"wrote {TEMPERATURE_KEY} = {best[0]:g}, mem_beta = {best[1]:g} into {args.model}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
