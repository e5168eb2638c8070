"""`bertkit fill-mask`: top-k predictions for mask tokens ([MASK]; <mask> for RoBERTa)."""

from __future__ import annotations

import argparse

from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("fill-mask", help="predict [MASK] tokens with a checkpoint that has an MLM head")
    p.add_argument("text", metavar="TEXT",
                   help='text containing the mask token, e.g. "Paris is a beautiful [MASK]." (RoBERTa: <mask>)')
    p.add_argument("--model", required=True,
                   help="checkpoint directory with an MLM head (BERT, RoBERTa, ALBERT, or an ELECTRA generator)")
    p.add_argument("--top-k", type=int, default=5)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.fill_mask import fill_mask

    if not args.text.strip():
        raise BertkitError("TEXT: empty text")
    results = fill_mask(args.text, model=args.model, top_k=args.top_k)
    for index, predictions in enumerate(results, start=1):
        if len(results) > 1:
            print(f"mask {index}:")
        for rank, p in enumerate(predictions, start=1):
            print(f"{rank:>3}. {p['token_str']:<16} {p['score']:.4f}  {p['sequence']}")
    return 0
