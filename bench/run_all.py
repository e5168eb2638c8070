"""Run every benchmark the README's table cites, one after another: what `make bench` runs.

Each entry is one script with the options of its table row (thread count, clock) and a quick
variant (tiny presets, one round: `--quick`, `make bench-quick` / `BENCH_QUICK=1 make bench`)
that checks every bench still runs in a few minutes; quick figures are not the table's. Each
bench prints its own clock beside its ratios; this prints the CPU class and the load before
each one (figures from a loaded machine are not comparable) and, at the end, which failed.

    python bench/run_all.py                      # the table's figures (hours: fine-tuning runs)
    python bench/run_all.py --quick              # every bench in its smallest mode
    python bench/run_all.py --quick --only gpt   # the entries whose script name contains "gpt"

Not run here: `experiments/budget_downstream.py` (the 60-minute budget row, 3 seeds: hours of
its own) and `bench/gpu_checks.sh` (a GPU).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from common import WALL, data_dir, load_average  # noqa: E402

TINY_STEP = ["--batch-size", "4", "--seq-len", "32", "--repeats", "1"]
ONE_THREAD = ["--threads", "1", "--cpu-time"]

# (script, the README row it fills, the row's options, the quick options)
BENCHES: list[tuple[str, str, list[str], list[str]]] = [
    ("bench_embed.py", "bertkit.embed vs transformers BertModel", [], ["--texts", "128", "--repeats", "1"]),
    ("bench_embed_lengths.py", "embed / fine-tuning step, unpadded vs padded (1 thread CPU time)",
     ["--threads", "1", "--clock", "cpu"], ["--threads", "1", "--clock", "cpu", "--texts", "128", "--repeats", "1"]),
    ("bench_finetune.py", "bertkit finetune glue vs transformers Trainer", [], ["--dry-run"]),
    ("bench_finetune_recipes.py", "fine-tuning at equal settings, seeds 1-3", [],
     ["--dry-run", "--tasks", "sst2", "--seeds", "1"]),
    ("bench_pretrain_step.py", "pre-training step vs BertForPreTraining, 2 threads wall", [],
     ["--sizes", "tiny", *TINY_STEP]),
    ("bench_pretrain_step.py", "pre-training step vs BertForPreTraining, 1 thread CPU time", ONE_THREAD,
     ["--sizes", "tiny", *TINY_STEP, *ONE_THREAD]),
    ("bench_pretrain_loop.py", "whole pretrain loop vs the bare step", [],
     ["--steps", "6", "--rounds", "1", "--batch-size", "8"]),
    ("bench_data_build.py", "data build, corpus-en", [], ["--max-chars", "300000"]),
    ("bench_objectives_roberta.py", "RoBERTa pre-training step (1 thread CPU time)", ONE_THREAD,
     ["--sizes", "tiny", *TINY_STEP, *ONE_THREAD]),
    ("bench_albert.py", "ALBERT pre-training step (1 thread CPU time)", ONE_THREAD,
     ["--sizes", "tiny", *TINY_STEP, *ONE_THREAD]),
    ("bench_electra.py", "ELECTRA pre-training step (1 thread CPU time)", ONE_THREAD,
     ["--sizes", "tiny", *TINY_STEP, *ONE_THREAD]),
    ("bench_generate.py", "T5 generate vs transformers", [],
     ["--sizes", "t5-tiny", "--batches", "1", "--max-new-tokens", "4", "--repeats", "1"]),
    ("bench_t5_step.py", "T5 span-corruption step", [], ["--sizes", "t5-tiny", *TINY_STEP]),
    ("bench_bart_step.py", "BART denoising step and generate (one thread)", ONE_THREAD,
     ["--sizes", "bart-tiny", *TINY_STEP, "--batches", "1", "--max-new-tokens", "4", *ONE_THREAD]),
    ("bench_gpt_generate.py", "GPT-2 generate vs transformers", [],
     ["--sizes", "gpt-tiny", "--batches", "1", "--max-new-tokens", "4", "--repeats", "1"]),
    ("bench_gpt_step.py", "causal-LM step, one thread", ONE_THREAD, ["--sizes", "gpt-tiny", *TINY_STEP, *ONE_THREAD]),
    ("bench_gpt_step.py", "causal-LM step, two threads", [], ["--sizes", "gpt-tiny", *TINY_STEP]),
    ("bench_elmo_step.py", "ELMo biLM step vs nn.LSTM", [],
     ["--batch-size", "4", "--words", "10", "--repeats", "1", "--vocab", "1024", "--samples", "128"]),
    ("bench_xlnet_step.py", "XLNet permutation-LM step", [], ["--sizes", "tiny", *TINY_STEP]),
    ("bench_xlnet_inference.py", "XLNet classification inference", [],
     ["--sizes", "tiny", "--batches", "1", "--batch-size", "8", "--max-len", "64", "--repeats", "1"]),
    ("bench_unigram_encode.py", "Unigram Tokenizer.__call__ vs encode_batch", [],
     ["--texts", "1000", "--repeats", "1", "--vocab-size", "2000", "--train-lines", "5000"]),
    ("bench_cli_startup.py", "bertkit --help wall time", [], ["--repeats", "1"]),
    ("bench_tokenize.py", "Tokenizer.__call__ vs encode_batch", [], ["--texts", "1000", "--repeats", "1"]),
    ("bench_tokenizer_training.py", "tokenizer training vs tokenizers' trainers", [], ["--vocab-size", "2000"]),
]


def cpu_class() -> str:
    """The CPU's model name and the flags that split this machine class (AVX-512, VNNI, BF16, AMX)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "CPU unknown (no /proc/cpuinfo)"
    lines = text.splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    marks = [flag for flag in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if flag in flags]
    return f"{model}, {os.cpu_count()} cores, {' '.join(marks) or 'no AVX2'}"


def quick_corpus() -> list[str]:
    """The smallest corpus-en file: the quick tokenizer-training run's whole corpus."""
    files = sorted((data_dir() / "corpus-en").glob("*.txt.gz"), key=lambda path: path.stat().st_size)
    return [str(files[0])] if files else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", default=bool(os.environ.get("BENCH_QUICK")),
                        help="every bench in its smallest mode (also when BENCH_QUICK is set)")
    parser.add_argument("--only", nargs="+", default=[], help="run the entries whose script name contains one of these")
    args = parser.parse_args()
    selected = [entry for entry in BENCHES if not args.only or any(word in entry[0] for word in args.only)]
    print(f"{'quick' if args.quick else 'full'} run of {len(selected)} benches; {cpu_class()}", flush=True)
    failed = []
    for script, row, full, quick in selected:
        options = quick if args.quick else full
        if args.quick and script == "bench_tokenizer_training.py":
            options = [*options, *quick_corpus()]
        command = [sys.executable, str(Path(__file__).with_name(script)), *options]
        print(f"\n### {script} {' '.join(options)}  [{row}]  ({load_average()})", flush=True)
        seconds, result = WALL.elapsed(lambda: subprocess.run(command))
        print(f"### {script}: {'ok' if result.returncode == 0 else f'FAILED ({result.returncode})'} "
              f"in {seconds:.0f} s wall", flush=True)
        if result.returncode != 0:
            failed.append(f"{script} {' '.join(options)}")
    print(f"\n{len(selected) - len(failed)} of {len(selected)} benches ran" + (": failed " + "; ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
