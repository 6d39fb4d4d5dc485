"""onnx-sched as a pass of an Olive workflow (needs ``pip install olive-ai``).

    python examples/olive_pass.py [MODEL.onnx] [--method auto] [--time-limit 10]

Builds an Olive workflow config whose only pass is onnx-sched's
(``OnnxSchedOlivePass``) and runs it with Olive's package config plus that pass
(``olive_pass.package_config()``: Olive finds a pass's class only through it).
Without Olive it prints the config and how to install Olive, and exits 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from onnx_sched.plugins import olive_pass

HERE = Path(__file__).resolve().parent


def workflow_config(model: str, method: str, time_limit: float, output_dir: str) -> dict:
    """An Olive workflow: one ONNX input model, one onnx-sched pass."""
    return {
        "input_model": {"type": "ONNXModel", "model_path": model},
        "passes": {
            "schedule": {
                "type": "OnnxSchedOlivePass",
                "objective": "peak-mem",
                "method": method,
                "time_limit": time_limit,
            }
        },
        "output_dir": output_dir,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(HERE / "randwire_ws.onnx"))
    parser.add_argument("--method", default="auto")
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    config = workflow_config(args.model, args.method, args.time_limit, str(Path.cwd() / "olive_out"))
    if not olive_pass.HAVE_OLIVE:
        print(f"Olive cannot be imported ({olive_pass.OLIVE_IMPORT_ERROR}; pip install olive-ai); the workflow "
              "would be:")
        print(json.dumps(config, indent=2))
        return
    from olive.workflows import run as olive_run

    print(olive_run(config, package_config=olive_pass.package_config()))


if __name__ == "__main__":
    main()
