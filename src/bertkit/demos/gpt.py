"""`bertkit demo --family gpt`: a GPT pre-trained from scratch on the embedded Austen novels, on a CPU, in
under 10 minutes, ending with what a person can judge: held-out perplexity against the unigram baseline
and the first evaluation, and sampled continuations of prompts in the novels' style.

Austen's novels -> a byte-level BPE tokenizer in GPT-2's layout -> packed 64-token sequences, documents
joined by <|endoftext|> -> gpt-tiny pre-trained with the clm budget recipe (bertkit.model.gpt.recipes) for
the time left -> perplexity lines and three seeded, sampled continuations. The anchor is nanoGPT's
shakespeare_char on a laptop CPU (a few minutes, text that reads like the corpus).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIME = "9m"
VOCAB_SIZE = 4096  # a small vocabulary: the LM head is a large share of a tiny model's step
MAX_SEQ_LENGTH = 64  # the budget recipe's data (bertkit.pretraining.RECIPE_DATA)
TAIL_SECONDS = 25  # sampling, the report and loading the final model, after pre-training
BUILD_SECONDS = 40  # the data build, reserved before it runs
PROMPTS = ("It is a truth universally acknowledged", "Emma Woodhouse, handsome, clever, and rich,",
           "\u201cMy dear Mr. Bennet,\u201d said his lady to him one day,")
SAMPLING = {"max_new_tokens": 40, "do_sample": True, "temperature": 0.8, "top_p": 0.9, "repetition_penalty": 1.2}


@dataclass
class GptDemoOptions:
    output_dir: Path
    corpus: list[Path] | None = None  # None: the embedded Austen novels
    time: str = DEFAULT_TIME  # the whole demo's wall-clock target; pre-training gets what is left
    budget: str | None = None  # pre-training time given outright instead of derived from `time`
    max_steps: int | None = None  # set: train this many steps instead of for a time
    preset: str | None = None  # None: the clm budget recipe's (gpt-tiny)
    seed: int = 42
    overrides: dict[str, str] | None = None
    progress: bool = True
    workers: int = 2
    skip_bad_lines: bool = False  # a corpus line that is not UTF-8 (or malformed JSONL) is skipped, not fatal


def run_gpt_demo(options: GptDemoOptions) -> Path:
    """Run the pipeline; returns the run folder (report, curves, final/)."""
    from bertkit.data.build import BuildOptions, build_dataset
    from bertkit.demos.pretraining import cpu_description, embedded_corpus
    from bertkit.inference.generation import generate
    from bertkit.pretraining import build_config, pretrain
    from bertkit.tokenization.train import TrainOptions, train_tokenizer
    from bertkit.training.budget import describe_budget, parse_budget

    out = options.output_dir
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    total = parse_budget(options.time)
    sources = options.corpus or [embedded_corpus()]
    print(f"bertkit demo --family gpt — pre-training a GPT from scratch on {', '.join(p.name for p in sources)}")
    print(f"this CPU: {cpu_description()}; the demo's time: {describe_budget(total)}; everything goes to {out}/\n")
    fixed = parse_budget(options.budget) if options.budget else None

    print(f"[1/4] byte-level BPE tokenizer in GPT-2's layout, {VOCAB_SIZE} tokens")
    tok_dir = out / "tokenizer"
    trained = train_tokenizer(sources, tok_dir, TrainOptions(vocab_size=VOCAB_SIZE, algorithm="bbpe", layout="gpt2",
                                                              workers=options.workers, show_progress=options.progress,
                                                              skip_bad_lines=options.skip_bad_lines))
    print(f"      {trained.vocab_size} tokens in {trained.seconds:.0f}s -> {tok_dir}")

    print(f"[2/4] packed pre-training sequences of {MAX_SEQ_LENGTH} tokens, documents joined by <|endoftext|>")
    data_dir = out / "data"
    built = build_dataset(sources, tok_dir, data_dir, BuildOptions(instance_format="packed",
                                                                   max_seq_length=MAX_SEQ_LENGTH, seed=options.seed,
                                                                   skip_bad_lines=options.skip_bad_lines),
                          workers=options.workers, overwrite=True, show_progress=options.progress)
    print(f"      {built.train_instances} training and {built.eval_instances} held-out instances "
          f"({built.train_tokens / 1e6:.2f}M tokens) in {built.seconds:.0f}s -> {data_dir}")

    budget = fixed or float(max(int(total - (time.perf_counter() - started) - TAIL_SECONDS), 30))
    values = dict(objective="clm", recipe="budget", data=str(data_dir), output_dir=str(out / "run"), seed=options.seed,
                  progress=options.progress, log_steps=10, save_steps=10**9)
    if options.preset:
        values["preset"] = options.preset
    if options.max_steps is not None:
        values.update(max_steps=options.max_steps, eval_steps=max(1, options.max_steps // 6))
    else:
        values.update(budget_seconds=budget, budget_evals=6)
    config = build_config(values, options.overrides or {})
    length = f"for {describe_budget(budget)}" if config.budget_seconds is not None else f"{config.max_steps} steps"
    print(f"[3/4] clm pre-training of {config.preset} ({config.recipe} recipe: lr {config.lr:g}, batches of "
          f"{config.batch_size}), {length}")
    result = pretrain(config, overwrite=True)

    evals = [r for r in result.records if "eval_lm_loss" in r]
    print(f"\n[4/4] three continuations of prompts in the novels' style (sampled: temperature "
          f"{SAMPLING['temperature']}, top-p {SAMPLING['top_p']}, seed {options.seed})")
    texts = generate(list(PROMPTS), str(result.final_dir), seed=options.seed, **SAMPLING)
    for text in texts:
        print(f"  {' '.join(text.split())}\n")
    if evals:
        first, last = evals[0], evals[-1]
        print(f"held-out perplexity {_perplexity(first)} (step {first['step']}) -> {_perplexity(last)} "
              f"(step {last['step']}); unigram baseline {math.exp(last['eval_unigram_loss']):,.0f} (a model that "
              f"learned only the tokens' frequencies)")
        print(f"held-out next-token accuracy {first['eval_lm_accuracy']:.1f}% -> {last['eval_lm_accuracy']:.1f}% "
              f"(the most frequent token alone: {last['eval_majority_accuracy']:.1f}%)")
    run_dir = out / "run"
    print(f"\nmodel + tokenizer: {result.final_dir}   (bertkit generate --model {result.final_dir} \"...\" --do-sample)")
    print(f"report: {run_dir / 'report.md'}   curves: {', '.join(p.name for p in sorted(run_dir.glob('*.png')))}")
    print(f"total time {time.perf_counter() - started:.0f}s on {cpu_description()}")
    return run_dir


def _perplexity(record: dict) -> str:
    return f"{math.exp(min(record['eval_lm_loss'], 50.0)):,.0f}"
