"""`bertkit demo`: the whole BERT pipeline on a small public-domain corpus, on a CPU.

Jane Austen's six novels (shipped in the package) -> a WordPiece tokenizer -> NSP
pre-training instances -> a tiny BERT pre-trained with MLM+NSP while the progress bar
shows MLM accuracy rising -> fill-mask answers of the trained model beside those of the
same model untrained. The seed sentences ask what Austen's novels can answer (a model
that has read only Austen knows rooms, carriages and sisters, not Paris).
Everything lands in one run folder with metrics, curves and a report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from bertkit.errors import BertkitError

SEED_SENTENCES = [
    "It is a truth universally acknowledged, that a single [MASK] in possession of a good fortune, must be in want of a wife.",
    "She walked into the [MASK] and sat down by the fire.",
    "The [MASK] was at the door, and they set off for the ball.",
    "I am very much obliged to [MASK] for your kindness.",
    "Elizabeth and her [MASK] Jane were very fond of each other.",
]


@dataclass
class DemoOptions:
    output_dir: Path
    corpus: list[Path] | None = None  # None: the embedded Austen novels
    vocab_size: int = 8000
    preset: str = "tiny"
    max_seq_length: int = 128
    max_steps: int = 1200
    batch_size: int = 32
    lr: float = 1e-3
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
    from bertkit.objectives.mlm_nsp import MlmNspObjective
    from bertkit.objectives.base import preset_config
    from bertkit.pretraining import build_config, pretrain
    from bertkit.tokenization import Tokenizer
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    out = options.output_dir
    corpus = options.corpus or [embedded_corpus()]
    started = time.perf_counter()
    print(f"bertkit demo — pre-training a {options.preset} BERT from scratch on {', '.join(p.name for p in corpus)}")
    print(f"everything goes to {out}/\n")

    print(f"[1/4] WordPiece tokenizer, {options.vocab_size} tokens")
    tok_dir = out / "tokenizer"
    trained = train_tokenizer(corpus, tok_dir, TrainOptions(vocab_size=options.vocab_size, workers=options.workers,
                                                                show_progress=options.progress))
    print(f"      {trained.vocab_size} tokens in {trained.seconds:.0f}s -> {tok_dir}")

    print(f"[2/4] NSP pre-training instances, max {options.max_seq_length} tokens, dynamic masking")
    data_dir = out / "data"
    built = build_dataset(corpus, tok_dir, data_dir, BuildOptions(max_seq_length=options.max_seq_length, seed=options.seed),
                          workers=options.workers, overwrite=True, show_progress=options.progress)
    print(f"      {built.train_instances} training and {built.eval_instances} held-out instances "
          f"({built.train_tokens / 1e6:.2f}M tokens) in {built.seconds:.0f}s -> {data_dir}")

    print(f"[3/4] MLM+NSP pre-training, {options.max_steps} steps of {options.batch_size} sequences")
    values = dict(data=str(data_dir), output_dir=str(out / "run"), objective="mlm_nsp", preset=options.preset,
                  max_steps=options.max_steps, batch_size=options.batch_size, lr=options.lr,
                  warmup_steps=max(1, options.max_steps // 10), eval_steps=max(1, options.max_steps // 6),
                  save_steps=max(1, options.max_steps // 2), log_steps=max(1, options.max_steps // 60),
                  seed=options.seed, progress=options.progress)
    config = build_config(values, options.overrides or {})
    tokenizer = Tokenizer.from_pretrained(tok_dir)
    untrained = _untrained_model(config, tokenizer, MlmNspObjective, preset_config)
    before = [fill_mask(s, untrained, tokenizer, top_k=3)[0] for s in SEED_SENTENCES]
    result = pretrain(config, overwrite=True)

    print("\n[4/4] fill-mask: the untrained model's guesses -> the pre-trained model's")
    after = [fill_mask(s, str(result.final_dir), top_k=3)[0] for s in SEED_SENTENCES]
    for sentence, guess_before, guess_after in zip(SEED_SENTENCES, before, after):
        print(f"  {sentence}")
        print(f"      untrained:   {_top(guess_before)}")
        print(f"      pre-trained: {_top(guess_after)}")
    evals = [r for r in result.records if "eval_mlm_accuracy" in r]
    if evals:
        first, last = evals[0], evals[-1]
        print(f"\nheld-out MLM accuracy {first['eval_mlm_accuracy']:.1f}% (step {first['step']}) -> "
              f"{last['eval_mlm_accuracy']:.1f}% (step {last['step']}); NSP accuracy {last.get('eval_nsp_accuracy', 0):.1f}%")
    run_dir = out / "run"
    print(f"\nmodel + tokenizer: {result.final_dir}   (bertkit fill-mask --model {result.final_dir} \"...[MASK]...\")")
    print(f"report: {run_dir / 'report.md'}   curves: {', '.join(p.name for p in sorted(run_dir.glob('*.png')))}")
    print(f"total time {time.perf_counter() - started:.0f}s")
    return run_dir


def _untrained_model(config, tokenizer, objective_cls, preset_config):
    """The model exactly as pre-training initialises it (same preset, same seed)."""
    import torch

    torch.manual_seed(config.seed)
    model_config = preset_config(config.preset, tokenizer.vocab_size, 0, tokenizer.pad_token_id, config.model)
    return objective_cls.build_model(model_config).eval()


def _top(predictions: list[dict]) -> str:
    return "  ".join(f"{p['token']} ({p['score']:.2f})" for p in predictions)
