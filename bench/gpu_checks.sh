#!/usr/bin/env bash
# The GPU checks and figures, as one short run on a lent GPU machine (no install: the
# machine's own torch and transformers, bertkit from src/). CI has no GPU, so this is
# where the CUDA-only tests run and where docs/benchmarks.md's GPU figures come from.
# Each step has its own time limit and log (in $OUT, else /tmp/gpu-checks); a failing
# step does not stop the others. About 6 minutes on an H100.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-checks}
mkdir -p "$out"
export PYTHONPATH=src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

step() {  # step NAME SECONDS COMMAND...: run it, keep its log, print its tail
    local name=$1 limit=$2
    shift 2
    echo "=== $name"
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n "${TAIL:-12}" "$out/$name.log"
    echo "--- $name: exit $rc, $((SECONDS - start)) s"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
step tests 90 python3 -m pytest -q -p no:cacheprovider tests/training/test_nonfinite.py tests/inference/test_precision.py
TAIL=16 step demo 100 python3 -m bertkit demo --budget 45s --output-dir /tmp/gpu-demo --no-progress
step pretrain_step 100 python3 bench/bench_pretrain_step.py --device cuda --precision bf16 --sizes mini base --repeats 10
step pretrain_step_fp32 60 python3 bench/bench_pretrain_step.py --device cuda --sizes base --repeats 10
step t5_step 80 python3 bench/bench_t5_step.py --device cuda --sizes t5-mini t5-small --repeats 10
step xlnet_step 80 python3 bench/bench_xlnet_step.py --device cuda --sizes mini base --repeats 10
step generate 60 python3 bench/bench_generate.py --device cuda --sizes t5-small --repeats 3
