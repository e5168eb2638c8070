"""`bertkit demo`: the whole BERT pipeline on a small public-domain corpus, on a CPU.

Jane Austen's six novels (shipped in the package) -> a WordPiece tokenizer -> packed
pre-training sequences -> a tiny BERT pre-trained with the budget recipe for a wall-clock
time (`--recipe bert --max-steps N`: the paper's recipe on NSP pairs for a step count)
while the progress bar shows MLM accuracy rising -> fill-mask answers on sentences of the
novels, chosen before training: for each, the novel's word, the untrained model's guesses,
the pre-trained model's, and whether its top 5 holds it. Everything lands in one run
folder with metrics, curves and a report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from bertkit.errors import BertkitError

DEFAULT_BUDGET = "7m"  # the pre-training's wall-clock time: the demo stays under 10 minutes on 2 cores
BERT_RECIPE_STEPS = 1200  # `--recipe bert` without --budget or --max-steps: a step count that fits the same minutes


@dataclass
class DemoOptions:
    output_dir: Path
    corpus: list[Path] | None = None  # None: the embedded Austen novels
    vocab_size: int = 8000
    preset: str = "tiny"
    max_seq_length: int | None = None  # None: the length the recipe was measured on (RECIPE_DATA)
    budget: str | None = DEFAULT_BUDGET  # training time (90s, 4m); None: max_steps
    max_steps: int | None = None  # set: train this many steps instead of for the budget
    batch_size: int | None = None  # None: the recipe's
    lr: float | None = None  # None: the recipe's
    recipe: str = "budget"
    seed: int = 42
    overrides: dict[str, str] | None = None  # --set fields of the pre-training run
    progress: bool = True
    workers: int = 2  # processes of the tokenizer's word count and the data build


def embedded_corpus() -> Path:
    path = Path(str(resources.files("bertkit") / "assets" / "austen_novels.txt.gz"))
    if not path.is_file():
        raise BertkitError(f"{path}: the embedded demo corpus is missing (reinstall bertkit or pass --corpus FILE)")
    return path


def run_demo(options: DemoOptions) -> Path:
    """Run the pipeline; returns the folder holding the trained model and the report."""
    from bertkit.data.build import BuildOptions, build_dataset
    from bertkit.inference.masked_lm import fill_mask
    from bertkit.demos.fill_mask_examples import AUSTEN_EXAMPLES, TOP_K, corpus_examples
    from bertkit.objectives import get_objective
    from bertkit.objectives.base import preset_config
    from bertkit.pretraining import RECIPE_DATA, pretrain
    from bertkit.tokenization import Tokenizer
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    out = options.output_dir
    corpus = options.corpus or [embedded_corpus()]
    started = time.perf_counter()
    print(f"bertkit demo — pre-training a {options.preset} BERT from scratch on {', '.join(p.name for p in corpus)}")
    print(f"everything goes to {out}/\n")

    config = _run_config(options, out)  # a bad option fails here, before any work
    print(f"[1/4] WordPiece tokenizer, {options.vocab_size} tokens")
    tok_dir = out / "tokenizer"
    trained = train_tokenizer(corpus, tok_dir, TrainOptions(vocab_size=options.vocab_size, workers=options.workers,
                                                                show_progress=options.progress))
    print(f"      {trained.vocab_size} tokens in {trained.seconds:.0f}s -> {tok_dir}")

    data_format = "nsp" if config.objective == "mlm_nsp" else "packed"
    max_seq_length = RECIPE_DATA[options.recipe][1] if options.max_seq_length is None else options.max_seq_length
    print(f"[2/4] {data_format} pre-training sequences, max {max_seq_length} tokens, dynamic masking")
    data_dir = out / "data"
    built = build_dataset(corpus, tok_dir, data_dir, BuildOptions(instance_format=data_format, max_seq_length=max_seq_length,
                                                                  seed=options.seed),
                          workers=options.workers, overwrite=True, show_progress=options.progress)
    print(f"      {built.train_instances} training and {built.eval_instances} held-out instances "
          f"({built.train_tokens / 1e6:.2f}M tokens) in {built.seconds:.0f}s -> {data_dir}")

    length = f"for {options.budget}" if config.budget_seconds is not None else f"{config.max_steps} steps"
    print(f"[3/4] {config.objective} pre-training ({config.recipe} recipe), {length}, batches of {config.batch_size} sequences")
    tokenizer = Tokenizer.from_pretrained(tok_dir)
    examples = AUSTEN_EXAMPLES if options.corpus is None else corpus_examples(
        corpus, lambda word: len(tokenizer.backend.encode(word, add_special_tokens=False).ids) == 1, seed=options.seed)
    texts = [example.text for example in examples]
    untrained = _untrained_model(config, tokenizer, get_objective(config.objective), preset_config)
    before = fill_mask(texts, untrained, tokenizer, top_k=TOP_K) if texts else []
    result = pretrain(config, overwrite=True)

    print(f"\n[4/4] fill-mask on sentences of the corpus (chosen before training): the corpus's word, "
          f"the untrained model's top {TOP_K} -> the pre-trained model's")
    after = fill_mask(texts, str(result.final_dir), top_k=TOP_K) if texts else []
    hits = 0
    for example, guess_before, guess_after in zip(examples, before, after):
        hit = example.hit(guess_after[0])
        hits += hit
        print(f"  {example.text}")
        print(f"      corpus's word: {example.word}   top {TOP_K} holds it: {'yes' if hit else 'no'}")
        print(f"      untrained:   {_top(guess_before[0])}")
        print(f"      pre-trained: {_top(guess_after[0])}")
    print(f"\nfill-mask: {hits} of {len(examples)} examples have the corpus's word in the top {TOP_K}")
    evals = [r for r in result.records if "eval_mlm_accuracy" in r]
    if evals:
        first, last = evals[0], evals[-1]
        nsp = f"; NSP accuracy {last['eval_nsp_accuracy']:.1f}%" if "eval_nsp_accuracy" in last else ""
        print(f"held-out MLM accuracy {first['eval_mlm_accuracy']:.1f}% (step {first['step']}) -> "
              f"{last['eval_mlm_accuracy']:.1f}% (step {last['step']}){nsp}")
    run_dir = out / "run"
    print(f"\nmodel + tokenizer: {result.final_dir}   (bertkit fill-mask --model {result.final_dir} \"...[MASK]...\")")
    print(f"report: {run_dir / 'report.md'}   curves: {', '.join(p.name for p in sorted(run_dir.glob('*.png')))}")
    print(f"total time {time.perf_counter() - started:.0f}s")
    return run_dir


def _run_config(options: DemoOptions, out: Path):
    """The pre-training run's configuration: the recipe, then the demo's options, then `--set`.
    A budget run evaluates 6 times over its time; a step run every sixth of its steps."""
    from bertkit.pretraining import build_config, with_recipe
    from bertkit.training.budget import parse_budget

    values: dict = dict(data=str(out / "data"), output_dir=str(out / "run"), preset=options.preset, seed=options.seed,
                        progress=options.progress)
    values.update({k: v for k, v in (("batch_size", options.batch_size), ("lr", options.lr)) if v is not None})
    if options.max_steps is not None:
        steps = options.max_steps
        values.update(max_steps=steps, eval_steps=max(1, steps // 6), save_steps=max(1, steps // 2),
                      log_steps=max(1, steps // 60))
    else:
        values.update(budget_seconds=parse_budget(options.budget or DEFAULT_BUDGET), budget_evals=6, log_steps=10,
                      save_steps=10**9)  # a checkpoint at the end only
    return build_config(with_recipe(values, options.recipe), options.overrides or {})


def _untrained_model(config, tokenizer, objective_cls, preset_config):
    """The model exactly as pre-training initialises it (same preset, same seed)."""
    import torch

    torch.manual_seed(config.seed)
    model_config = preset_config(config.preset, tokenizer.vocab_size, 0, tokenizer.pad_token_id, config.model)
    return objective_cls.build_model(model_config).eval()


def _top(predictions: list[dict]) -> str:
    return "  ".join(f"{p['token']} ({p['score']:.2f})" for p in predictions)
