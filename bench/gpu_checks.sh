#!/usr/bin/env bash
# The GPU checks and figures, as one short run on a lent GPU machine (no install: the
# machine's own torch and transformers, bertkit from src/). CI has no GPU, so this is
# where the CUDA-only tests run and where docs/benchmarks.md's GPU figures come from
# (issue 36: tokens/s and MFU of the shared loop's step for BERT-base at seq 128 and 512,
# T5-base and XLNet-base, transformers' eager step beside them, T5 generation tokens/s; the
# compiled step with static shapes under torch.compile's modes, CUDA graphs included, and the
# compile cache's gain on a second run, as a resumed run has it).
# Each step has its own time limit and log (in $OUT, else /tmp/gpu-checks), and writes its
# figures as JSON there; a failing step does not stop the others, and the whole run stops
# starting steps once TOTAL seconds (default 480) are spent. About 7 minutes on an H100 before
# the compile-mode steps were added; they come right after the eager BERT-base step, and the
# steps that no longer fit in TOTAL are skipped with a line saying so (TOTAL=720 runs them all).
#
#   bash bench/gpu_checks.sh                                  # on the GPU machine
#   DRY=1 STRETCH=10 PYTHON=.venv/bin/python bash bench/gpu_checks.sh   # on a CPU: tiny models, a few steps
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-checks}
mkdir -p "$out"
export PYTHONPATH=src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
total=${TOTAL:-480}
[ -n "${DRY:-}" ] && total=${TOTAL:-3600}
stretch=${STRETCH:-1}  # each step's limit times this (a dry run on a slow, shared CPU: STRETCH=10)
py=${PYTHON:-python3}  # the machine's python with torch and transformers

step() {  # step NAME SECONDS COMMAND...: run it (within what is left of TOTAL), keep its log, print its tail
    local name=$1 limit=$(($2 * stretch))
    shift 2
    local left=$((total - SECONDS))
    if [ "$left" -lt 20 ]; then
        echo "=== $name: skipped, ${total} s spent"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "=== $name (limit $limit s)"
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    grep -v "Loading weights\|tie_word_embeddings\|^\s*$" "$out/$name.log" | tail -n "${TAIL:-14}"
    echo "--- $name: exit $rc, $((SECONDS - start)) s"
}

if [ -n "${DRY:-}" ]; then  # the same steps on a CPU, tiny models: checks the script itself
    common=(--device cpu --precision fp32 --preset tiny --warmup 2 --steps 2 --threads 2)
    big=(2 4); seq512=(2); t5=(2); xlnet=(2); gen=(2)
    short=(--seq-len 64); few=()
    tests=(tests/training/test_sync_free_step.py tests/model/test_static_shapes.py)
    modes=(default); cached_modes=(default)
else
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
    common=(--device cuda --precision bf16 --preset base --warmup 20 --steps 20)
    big=(64 128 256); seq512=(32 64); t5=(32 64); xlnet=(16 32); gen=(32)
    short=(); few=(--warmup 10 --steps 10)
    tests=(tests/training/test_nonfinite.py tests/training/test_sync_free_step.py tests/inference/test_precision.py
           tests/model/test_varlen_attention.py tests/model/test_static_shapes.py)
    modes=(default reduce-overhead); cached_modes=(reduce-overhead)
fi
"$py" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
step tests 60 "$py" -m pytest -q -p no:cacheprovider "${tests[@]}"
step bert128 100 "$py" bench/bench_gpu_step.py --case bert "${common[@]}" "${short[@]}" --batch-sizes "${big[@]}" \
    --reference --json "$out/bert128.json"
# the compiled step (static shapes: one graph a micro-batch size) in each mode; reduce-overhead adds CUDA
# graphs. Its inductor cache is kept in $out so the second run below reads it, as a resumed run reads
# the run folder's compile_cache/ (bertkit.training.compile): the whole-run times show the gain
step bert128_compile 150 env TORCHINDUCTOR_CACHE_DIR="$out/inductor_cache" \
    "$py" bench/bench_gpu_step.py --case bert "${common[@]}" "${short[@]}" \
    --batch-sizes "${big[-1]}" --compile --compile-modes "${modes[@]}" --json "$out/bert128_compile.json"
step bert128_compile_cached 100 env TORCHINDUCTOR_CACHE_DIR="$out/inductor_cache" \
    "$py" bench/bench_gpu_step.py --case bert "${common[@]}" "${short[@]}" \
    --batch-sizes "${big[-1]}" --compile --compile-modes "${cached_modes[@]}" --json "$out/bert128_compile_cached.json"
step bert512 60 "$py" bench/bench_gpu_step.py --case bert "${common[@]}" --seq-len "${short[1]:-512}" \
    --batch-sizes "${seq512[@]}" --json "$out/bert512.json"
step t5 60 "$py" bench/bench_gpu_step.py --case t5 "${common[@]}" --seq-len "${short[1]:-512}" --batch-sizes "${t5[@]}" \
    "${few[@]}" --reference --json "$out/t5.json"
step xlnet 60 "$py" bench/bench_gpu_step.py --case xlnet "${common[@]}" --seq-len "${short[1]:-512}" \
    --batch-sizes "${xlnet[@]}" "${few[@]}" --reference --json "$out/xlnet.json"
step t5_generate 35 "$py" bench/bench_gpu_step.py --case generate "${common[@]}" --seq-len "${short[1]:-128}" \
    --batch-sizes "${gen[@]}" --max-new-tokens "${GEN_TOKENS:-64}" --json "$out/t5_generate.json"
# T5 compiled: one graph since its all-labelled check is skipped while compiling (docs/benchmarks.md)
step t5_compile 90 "$py" bench/bench_gpu_step.py --case t5 "${common[@]}" --seq-len "${short[1]:-512}" \
    --batch-sizes "${t5[-1]}" "${few[@]}" --compile --json "$out/t5_compile.json"
# last, as the first to give up when TOTAL is spent: kernel search without CUDA graphs (a long compile)
step bert128_autotune 120 "$py" bench/bench_gpu_step.py --case bert "${common[@]}" "${short[@]}" \
    --batch-sizes "${big[-1]}" --compile --compile-modes max-autotune-no-cudagraphs --json "$out/bert128_autotune.json"
echo "total $SECONDS s; figures in $out/*.json, logs in $out/*.log"
