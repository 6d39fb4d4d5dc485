#!/bin/bash
# Prepare a device-tool call (docs/results.md 17.6), here, before any device time is spent: `.gpu/` in the repository
# (ignored through .git/info/exclude) with the corpus and the wheels the lent machine lacks (onnx2torch, memray and
# what memray imports; its image has torch, onnx, onnxruntime, numba, networkx, rich, click -- no OR-Tools, pymoo or
# OpenVINO, so the device steps avoid them).  Then call the device tool with carry [".gpu"] and the command
# `bash benchmarks/gpu_device_run.sh` (about 8 minutes on an H200, of the 15 a session gets).
#
#   bash benchmarks/gpu_prepare.sh [CORPUS]        # CORPUS: default ../shared/corpus
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/corpus}
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/whl
cp -rL "$CORPUS" .gpu/corpus
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpu/whl onnx2torch memray textual platformdirs
du -sh .gpu
