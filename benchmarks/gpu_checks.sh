#!/bin/bash
# What a session with a CUDA GPU checks, in one go (docs/results.md sections 17.3, 14.5): the CUDA tests, the CPU-core +
# GPU placement benchmark, per-device peak memory of multi-device memory schedules with the GPU device's ops on the GPU
# (its peak from the CUDA allocator), and the user's path -- profiles scaled to the split executor's run, `optimize`
# choosing among `auto`'s candidates by real runs, `bench-placement` on the written model -- and the models split over a
# CPU core and the GPU in three ways, outputs against one ONNX Runtime session (benchmarks/torch_parts_corpus.py).
# The device tool returns at most 8 files from its $OUT (a run of section 17.5 lost its JSON): write this script's
# files elsewhere and pack them into one, e.g. in a device call `PACK=$OUT/gpu_checks.tgz OUT=/tmp/gpu_checks bash ...`.
#
#   OUT=runs/gpu_checks bash benchmarks/gpu_checks.sh [MODEL ...]
#
# DEVICE (default cuda:0) is the torch device of device 1; DEVICE=torch:cpu JOBS=2 runs the same steps without a GPU
# (a smoke test of the script: the CUDA tests skip).
# Needs the package with the [gpu] extra (torch + onnx2torch) and the corpus beside the repository
# (../shared/corpus, or ONNX_SCHED_CORPUS).  Each step's exit status is printed; a failing step does not stop the next.
set -u
OUT=${OUT:-runs/gpu_checks}
mkdir -p "$OUT"
CORPUS_ROOT=$(cd "${ONNX_SCHED_CORPUS:-$(dirname "$0")/../../shared/corpus}" && pwd)  # absolute: the tests read it too
CORPUS=$CORPUS_ROOT/onnx
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(randwire_ws segformer_b0 mobilenet_v2 bert_base)
DEVICE=${DEVICE:-cuda:0}
JOBS=${JOBS:-8}
export PYTHONUNBUFFERED=1

python3 -c "import torch; print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))" \
    > "$OUT/env.txt" 2>&1
onnx-sched devices >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

ONNX_SCHED_CORPUS=$CORPUS_ROOT python3 -m pytest -q -n "$JOBS" -p no:cacheprovider -rs tests/test_torch_runner.py tests/test_device_processes.py \
    tests/test_distributed_training.py > "$OUT/tests.log" 2>&1
echo "tests: rc $?, $(tail -n 1 "$OUT/tests.log")"

python3 benchmarks/gpu_placement.py --device "$DEVICE" --repeats 10 --time-limit 3 --models "${MODELS[@]}" \
    --out "$OUT/gpu_placement.json" --markdown "$OUT/gpu_placement.md" --profiles-dir "$OUT/profiles" \
    > "$OUT/bench.log" 2>&1
echo "gpu_placement: rc $?"
cat "$OUT/gpu_placement.md" 2>/dev/null

python3 benchmarks/device_memory_real.py --corpus "$CORPUS" --method brkga --time-limit 5 --torch-device "GPU=$DEVICE" \
    --models light_squeezenet randwire_ws randwire_er randwire_ws_regular light_densenet121 \
    --out "$OUT/device_memory.json" > "$OUT/device_memory.log" 2>&1
echo "device_memory_real: rc $?"
grep -E "^(│|┃|┏|┡|└)" "$OUT/device_memory.log"

M="${MODELS[0]}"
{
    onnx-sched profile "$CORPUS/$M.onnx" --runtime ort --scale-to-run -o "$OUT/$M.cpu.json" &&
    onnx-sched profile "$CORPUS/$M.onnx" --device "$DEVICE" --scale-to-run -o "$OUT/$M.gpu.json" &&
    onnx-sched optimize "$CORPUS/$M.onnx" -o "$OUT/$M.placed.onnx" --objective latency \
        --profiles "$OUT/$M.cpu.json" --profiles "$OUT/$M.gpu.json" --target measured --report "$OUT/$M.optimize.json" &&
    onnx-sched bench-placement "$CORPUS/$M.onnx" --placement "$OUT/$M.placed.onnx" --runtime ort \
        --devices "CPU,$DEVICE" --repeats 20 --report "$OUT/$M.bench.json"
} > "$OUT/cli.log" 2>&1
echo "cli ($M): rc $?"
tail -n 3 "$OUT/cli.log"

python3 benchmarks/torch_parts_corpus.py --device "$DEVICE" --corpus "$CORPUS" --models "${MODELS[@]}" \
    --out "$OUT/torch_parts.json" > "$OUT/torch_parts.log" 2>&1
echo "torch_parts_corpus: rc $?"
tail -n 2 "$OUT/torch_parts.log"

if [ -n "${PACK:-}" ]; then
    tar czf "$PACK" -C "$OUT" . && echo "packed $OUT into $PACK"
fi
