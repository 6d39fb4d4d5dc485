"""Per op on a CUDA device: bytes the allocator held while the op ran beyond its outputs (its temporaries).

The multi-device memory model counts tensors only.  Section 14.6 of docs/results.md found one GPU process above
its prediction (light_densenet121, +6 %); this script finds which ops take the extra.  It splits the model as
`device_memory_real.py` does (same method, seed and budget, so the same schedule), then runs the GPU device's ops
one by one in this process on their plan's inputs (received tensors made up with the right shape and type), and
for each op records the allocator's high-water mark during the op minus what was allocated before it and minus
the op's outputs.

    python benchmarks/torch_op_workspace.py --model light_densenet121 --device cuda:0 --out runs/op_workspace.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from onnx_sched.api import optimize_model
from onnx_sched.bench.inputs import import_feed
from onnx_sched.bench.runtimes.device_ops import device_ops
from onnx_sched.bench.runtimes.device_plan import Recv, RunOp, device_plans, load_schedule
from onnx_sched.bench.runtimes.torch_parts import torch_device, worker_context
from onnx_sched.bench.weights import with_random_weights

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "onnx"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--model", default="light_densenet121")
    ap.add_argument("--method", default="brkga")
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--devices", default="CPU,GPU")
    ap.add_argument("--device-name", default="GPU", help="the schedule's device whose ops run on --device")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import torch

    dev = torch_device(args.device)
    if dev is None or not dev.startswith("cuda") or not torch.cuda.is_available():
        ap.error(f"--device {args.device}: needs a CUDA device torch sees")
    devices = tuple(args.devices.split(","))
    result = optimize_model(args.corpus / f"{args.model}.onnx", "peak-mem", args.method, args.time_limit,
                            devices=devices)
    sched = load_schedule(result.model, report=result.report)
    sched = replace(sched, imported=with_random_weights(sched.imported))
    plan = next(p for p in device_plans(sched) if p.name == args.device_name)
    feed = import_feed(sched.imported, seed=0)
    rows = []
    with worker_context(dev):
        ops = device_ops(plan, dev)
        nodes = sched.imported.model.graph.node
        held: dict[str, object] = {k: ops.from_host(np.ascontiguousarray(v)) for k, v in feed.items()}
        for act in plan.actions:
            if isinstance(act, Recv):
                held[act.tensor] = ops.from_host(np.zeros(act.shape, dtype=np.dtype(act.dtype)))
            elif isinstance(act, RunOp):
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                outs = ops.run(act.node, {x: held[x] for x in act.feeds})
                torch.cuda.synchronize()
                out_bytes = sum(int(t.numel() * t.element_size()) for t in outs if t is not None)
                extra = torch.cuda.max_memory_allocated() - before - out_bytes
                node = nodes[act.node]
                rows.append({"node": node.name, "op_type": node.op_type, "extra_bytes": int(extra),
                             "output_bytes": out_bytes})
                held.update(zip(act.outputs, outs))
                for x in act.frees:
                    held.pop(x, None)
    rows.sort(key=lambda r: -r["extra_bytes"])
    print(f"{args.model}: {len(rows)} ops on {args.device}, predicted peak {plan.predicted_peak_bytes:,} B")
    for r in rows[:args.top]:
        print(f"  {r['node']:40s} {r['op_type']:12s} extra {r['extra_bytes']:>10,} B"
              f"  outputs {r['output_bytes']:>10,} B")
    if args.out:
        meta = {"command": " ".join(["python", "benchmarks/torch_op_workspace.py", *sys.argv[1:]]),
                "model": args.model, "device": args.device, "predicted_peak_bytes": plan.predicted_peak_bytes}
        args.out.write_text(json.dumps({**meta, "ops": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
