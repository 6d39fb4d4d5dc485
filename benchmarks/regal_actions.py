"""What the REGAL policy decides per op: its mode action on held-out problems.

For the first ``--synthetic`` held-out synthetic graphs and the named corpus models
(features with seed 0, no pin, as the ``regal`` pass runs the shipped policy), prints per
head the share of ops at each level, the share of ops where the policy's level equals
the hand-written feature prior's
(:func:`~onnx_sched.models.inference.regal.feature_prior`, the imitation target of
training), the correlation of the priority mean level with the op's expected schedule
position (per graph), and the mean memory feature (input + output bytes / the graph's
largest) of the ops given the highest device-1 affinity level against the other ops.

    python benchmarks/regal_actions.py --synthetic 10 --corpus resnet50 yolos_tiny
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from regal_eval import held_out_sets

from onnx_sched.cost import device_memory as dm
from onnx_sched.models.inference.regal import LEVELS, feature_prior, load_policy
from onnx_sched.models.inference.regal_features import position_column, prepare
from onnx_sched.models.training.regal_data import DEVICES

ND = len(DEVICES)
HEADS = ([f"affinity {d} {p}" for d in range(ND) for p in ("mean", "var")] + ["priority mean", "priority var"]
         + [f"transfer {d} {p}" for d in range(ND) for p in ("mean", "var")] + ["crossover"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synthetic", type=int, default=10)
    ap.add_argument("--corpus", nargs="*", default=["resnet50", "yolos_tiny"])
    ap.add_argument("--model", default=None, help="REGAL policy .onnx (default: the shipped checkpoint)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    policy = load_policy(args.model)
    counts = np.zeros((len(HEADS), LEVELS))
    agree, corr, light = [], [], []
    for graphs in held_out_sets(args.synthetic, args.corpus).values():
        for g in graphs:
            inputs = prepare(dm.DeviceMemoryProblem.build(g, DEVICES), 0, pin=False,
                             evaluations=policy.feature_evaluations)
            a, prior = policy.actions(inputs), feature_prior(inputs, ND)
            for h in range(len(HEADS)):
                counts[h] += np.bincount(a[:, h], minlength=LEVELS)
            agree.append((a == prior).mean(axis=0))
            corr.append(float(np.corrcoef(a[:, 2 * ND], inputs.x[:, position_column(ND)])[0, 1]))
            top = a[:, 2] == LEVELS - 1  # highest mean level of the device-1 affinity
            mem = inputs.x[:, :2].sum(axis=1)
            light.append((float(mem[top].mean()) if top.any() else float("nan"), float(mem[~top].mean())))
    share = counts / counts.sum(axis=1, keepdims=True)
    print(f"{'head':18s} " + " ".join(f"level {k}" for k in range(LEVELS)) + "  = prior")
    for h, name in enumerate(HEADS):
        print(f"{name:18s} " + " ".join(f"{v:7.1%}" for v in share[h]) + f"  {np.mean(agree, axis=0)[h]:6.1%}")
    print("correlation of the priority mean level with the expected position, per graph: "
          + ", ".join(f"{c:.2f}" for c in corr))
    top_mem, rest_mem = np.nanmean(light, axis=0)
    print(f"mean memory feature of ops at device-1 affinity level {LEVELS - 1}: {top_mem:.3f}, other ops: {rest_mem:.3f}")
    if args.out:
        args.out.write_text(json.dumps({"heads": HEADS, "level_share": share.tolist(),
                                        "agreement_with_prior": np.mean(agree, axis=0).tolist(),
                                        "priority_position_correlation": corr,
                                        "memory_device1_top_vs_rest": [top_mem, rest_mem]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
