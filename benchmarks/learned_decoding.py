"""Decoding knobs of the learned peak-memory policy on unseen 500-op layered graphs.

For the 30 graphs of ``docs/learned_layered.json`` (test seeds 10000+, reference beam
width 10^4 stored there), prints the mean % gap of greedy decoding, best-of-16 samples
at several temperatures (logits / T) and best-of-256 samples, for the model given
(default: the shipped ``models/topoformer_peakmem.onnx``).  Used to check whether the
sample-16 gap is a decoding or a model limitation.

    python benchmarks/learned_decoding.py [MODEL.onnx]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from onnx_sched.models.decoders import decode_graph, greedy, peaks, sample_orders
from onnx_sched.models.topoformer_onnx import DEFAULT_CHECKPOINT, PriorityModel
from onnx_sched.synth.layered import layered_graph

TEMPERATURES = (0.5, 1.0, 1.5, 2.0, 3.0)


def main(argv: list[str]) -> None:
    stored = json.loads((Path(__file__).resolve().parents[1] / "docs" / "learned_layered.json").read_text())
    size = stored["results"][0]
    ref = np.array(size["rows"][0]["peaks"], float)
    model = PriorityModel.load(argv[0] if argv else DEFAULT_CHECKPOINT)
    res: dict[str, list[float]] = {"greedy": [], **{f"sample-16, T={t:g}": [] for t in TEMPERATURES}, "sample-256": []}
    for seed in size["seeds"]:
        g = layered_graph(size["n_ops"], seed=seed)
        y = model.priorities(g)
        dg = decode_graph(g, False)
        gp = peaks(dg, greedy(dg, y)[None, :])[0]
        res["greedy"].append(gp)
        for t in TEMPERATURES:
            res[f"sample-16, T={t:g}"].append(min(gp, peaks(dg, sample_orders(dg, y / t, 16, np.random.default_rng(seed))).min()))
        res["sample-256"].append(min(gp, peaks(dg, sample_orders(dg, y, 256, np.random.default_rng(seed))).min()))
    print(f"{len(ref)} graphs of {size['n_ops']} ops, gap from beam {size['ref_width']}:")
    for k, v in res.items():
        print(f"  {k:<20} {np.mean((np.array(v) - ref) / ref) * 100:+.2f} %")


if __name__ == "__main__":
    main(sys.argv[1:])
