"""Choose the sampling temperature of a learned peak-memory checkpoint on validation graphs.

The sample-K decoder draws orders from eq. 8 over priorities / T.  A REINFORCE-trained
policy is sharp (its samples differ little from its greedy order), so a higher T can
find better best-of-K orders; how much depends on the checkpoint.  This script
measures best-of-``--samples`` (plus the greedy order) for each candidate T on
layered graphs with the *validation* seeds 9000+ (training used seeds < 9000; tests
use 10000+), against the registry pass ``beam`` at ``--ref-width``, and prints the
table.  ``--write`` stores the best T in the checkpoint's metadata
(``onnx_sched.sample_temperature``), which the ``learned`` pass then uses by default.

    python benchmarks/learned_temperature.py --graphs 30 --ops 500 --write
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from onnx_sched.models.decoders import decode_graph, greedy, peaks, sample_orders
from onnx_sched.models.topoformer_onnx import DEFAULT_CHECKPOINT, TEMPERATURE_KEY, PriorityModel, set_sample_temperature
from onnx_sched.passes import PassContext, get_pass
from onnx_sched.synth.layered import layered_graph

VAL_SEED0 = 9000


def best_sampled(dg, y: np.ndarray, temperatures, samples: int, seed: int) -> tuple[float, dict[float, float]]:  # noqa: ANN001
    """Greedy peak, and per temperature T the best of it and ``samples`` eq. 8 draws from ``y / T``
    (the sample-K decoder of the ``learned`` pass, seeded per graph)."""
    greedy_peak = float(peaks(dg, greedy(dg, y)[None, :])[0])
    best = {}
    for t in temperatures:
        drawn = sample_orders(dg, y / t, samples, np.random.default_rng(seed))
        best[t] = float(min(greedy_peak, peaks(dg, drawn).min()))
    return greedy_peak, best


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_CHECKPOINT)
    ap.add_argument("--graphs", type=int, default=30)
    ap.add_argument("--ops", type=int, default=500)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--ref-width", type=int, default=1000)
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1, 1.5, 2, 3, 4, 6, 8, 12])
    ap.add_argument("--write", action="store_true", help="store the best temperature in the checkpoint")
    ap.add_argument("--out", type=Path, default=None, help="JSON results")
    args = ap.parse_args(argv)
    model = PriorityModel.load(args.model)
    found: dict[float, list[float]] = {t: [] for t in args.temperatures}
    ref = []
    for seed in range(VAL_SEED0, VAL_SEED0 + args.graphs):
        g = layered_graph(args.ops, seed)
        beam = get_pass("beam", "peak-mem")(g, PassContext(time_limit=600, options={"beam_width": args.ref_width}))
        ref.append(float(beam.info["peak_bytes"]))
        _, best = best_sampled(decode_graph(g, False), model.priorities(g), args.temperatures, args.samples, seed)
        for t, peak in best.items():
            found[t].append(peak)
    r = np.asarray(ref)
    gaps = {t: float(np.mean((np.asarray(v) - r) / r) * 100.0) for t, v in found.items()}
    best = min(gaps, key=lambda t: (gaps[t], t))
    print(f"{args.graphs} validation graphs (seeds {VAL_SEED0}+) of {args.ops} ops, sample-{args.samples}, "
          f"gap from beam {args.ref_width}:")
    for t, gap in gaps.items():
        print(f"  T = {t:<5g} {gap:+.2f} %{'   <- best' if t == best else ''}")
    result = {"model": str(args.model), "graphs": args.graphs, "ops": args.ops, "samples": args.samples,
              "ref_width": args.ref_width, "gap_pct": {f"{t:g}": g for t, g in gaps.items()}, "best": best}
    if args.write:
        note = (f"best of {args.temperatures} on {args.graphs} validation graphs of {args.ops} ops "
                f"(sample-{args.samples} vs beam {args.ref_width}: {gaps[best]:+.2f} % vs {gaps.get(1.0, float('nan')):+.2f} % at T=1)")
        set_sample_temperature(args.model, best, note)
        print(f"wrote {TEMPERATURE_KEY} = {best:g} into {args.model}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
