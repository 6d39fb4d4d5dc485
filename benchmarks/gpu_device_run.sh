#!/bin/bash
# Run on the device tool's machine (an H100 / H200, one call), from the repository copy with `.gpu/` carried
# (benchmarks/gpu_prepare.sh): installs the carried wheels, makes the package importable from the tree, then runs
# benchmarks/gpu_checks.sh and every corpus model split over a CPU core and cuda:0 (benchmarks/torch_parts_corpus.py),
# writing what comes back into $OUT (at most 8 files: the checks are packed into one archive).
#
#   bash benchmarks/gpu_device_run.sh [MODEL ...]        # gpu_checks.sh's models, default mobilenet_v2 randwire_ws
#
# DEVICE (default cuda:0) is the torch device of both steps.
set -u
DEVICE=${DEVICE:-cuda:0}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
ln -sfn ../passes onnx_sched/passes
ln -sfn ../models onnx_sched/models
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -m onnx_sched.cli "$@"\n' > /tmp/bin/onnx-sched
chmod +x /tmp/bin/onnx-sched
export PATH=/tmp/bin:$PATH
echo "nproc $(nproc); $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)"
[ $# -eq 0 ] && set -- mobilenet_v2 randwire_ws
timeout 300 env OUT=/tmp/gc ONNX_SCHED_CORPUS=.gpu/corpus JOBS=8 DEVICE="$DEVICE" bash benchmarks/gpu_checks.sh "$@"
echo "gpu_checks done at $(( $(date +%s) - T0 )) s"
tar czf "$OUT/gpu_checks.tgz" -C /tmp/gc . 2>/dev/null
timeout 240 python3 benchmarks/torch_parts_corpus.py --device "$DEVICE" --corpus .gpu/corpus/onnx --budget 180 \
    --out "$OUT/torch_parts_corpus_cuda.json" > "$OUT/torch_parts_corpus_cuda.log" 2>&1
echo "torch_parts_corpus: rc $? at $(( $(date +%s) - T0 )) s"
tail -n 4 "$OUT/torch_parts_corpus_cuda.log"
