"""Decoding knobs of the learned peak-memory policy on unseen 500-op layered graphs.

For the 30 graphs of ``docs/learned_layered.json`` (test seeds 10000+, reference beam
width 10^4 stored there), prints the mean % gap of greedy decoding, best-of-16 samples
at several temperatures (logits / T) and best-of-256 samples (with the checkpoint's memory weight beta), for the model given
(default: the shipped ``models/checkpoints/topoformer_peakmem.onnx``).  Used to check whether the
sample-16 gap is a decoding or a model limitation.

    python benchmarks/learned_decoding.py [MODEL.onnx]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from learned_temperature import best_sampled

from onnx_sched.dag import longest_path_from_source
from onnx_sched.models.inference.decoders import decode_graph
from onnx_sched.models.inference.topoformer_onnx import DEFAULT_CHECKPOINT, PriorityModel
from onnx_sched.synth.layered import layered_graph

TEMPERATURES = (0.5, 1.0, 1.5, 2.0, 3.0)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT_CHECKPOINT), help="ONNX export of the policy")
    args = ap.parse_args(argv)
    stored = json.loads((Path(__file__).resolve().parents[1] / "docs" / "learned_layered.json").read_text())
    size = stored["results"][0]
    ref = np.array(size["rows"][0]["peaks"], float)
    model = PriorityModel.load(args.model)
    res: dict[str, list[float]] = {"greedy": [], **{f"sample-16, T={t:g}": [] for t in TEMPERATURES}, "sample-256": []}
    for seed in size["seeds"]:
        g = layered_graph(size["n_ops"], seed=seed)
        y = model.priorities(g)
        dg = decode_graph(g, False)
        gp, best16 = best_sampled(dg, y, TEMPERATURES, 16, seed, model.mem_beta)
        res["greedy"].append(gp)
        for t in TEMPERATURES:
            res[f"sample-16, T={t:g}"].append(best16[t])
        res["sample-256"].append(best_sampled(dg, y, (1.0,), 256, seed, model.mem_beta)[1][1.0])
    # a two-parameter reference point: priority = -3 x depth (a layer-by-layer wavefront), memory-aware
    # decoding with beta = 3 -- how much of the policy's quality such a hand-made rule already gives
    res["depth wavefront + memory term, sample-16"] = []
    for seed in size["seeds"]:
        g = layered_graph(size["n_ops"], seed=seed)
        dg = decode_graph(g, False)
        res["depth wavefront + memory term, sample-16"].append(best_sampled(dg, -3.0 * longest_path_from_source(g), (1.0,), 16, seed, 3.0)[1][1.0])
    print(f"{len(ref)} graphs of {size['n_ops']} ops, gap from beam {size['ref_width']}:")
    for k, v in res.items():
        print(f"  {k:<42} {np.mean((np.array(v) - ref) / ref) * 100:+.2f} %")


if __name__ == "__main__":
    main(sys.argv[1:])
