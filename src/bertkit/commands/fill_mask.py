"""`bertkit fill-mask`: top-k predictions for mask tokens ([MASK]; <mask> for RoBERTa).

  bertkit fill-mask --model DIR "Paris is a beautiful [MASK]." "The [MASK] sat on the mat."
  bertkit fill-mask --model DIR --file texts.txt --format jsonl     # one text a line (or JSONL: --text-field)

Output: a table per text (rank, token, score, the filled text), or with --format jsonl one
JSON object per text: {"text", "predictions": [[mask 1's top-k], [mask 2's], ...]}, each
prediction {"token", "token_str", "token_id", "score", "sequence"}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bertkit.commands import add_precision_argument, add_runtime_options, add_skip_bad_lines_argument
from bertkit.errors import BertkitError
from bertkit.model.families import families_that, family_of


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("fill-mask", help="predict [MASK] tokens with a checkpoint that has an MLM head",
                              description="Predict the mask tokens of texts given as arguments, read from --file "
                                          "(one text a line, or JSONL) or from stdin.")
    p.add_argument("texts", nargs="*", metavar="TEXT",
                   help='texts containing the mask token, e.g. "Paris is a beautiful [MASK]." (RoBERTa: <mask>)')
    p.add_argument("--model", required=True,
                   help=f"checkpoint directory with an MLM head (model_type {families_that('fill-mask')}; ELECTRA: "
                        "its generator)")
    p.add_argument("--file", help="read texts from this file instead, one per line (txt, .gz; JSONL: --text-field)")
    p.add_argument("--text-field", default="text", help="JSONL field holding the text (default: text)")
    add_skip_bad_lines_argument(p)
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    add_precision_argument(p)
    p.add_argument("--format", choices=("table", "jsonl"), default="table",
                   help="table (default): ranked lines per text; jsonl: one JSON object per text on stdout")
    add_runtime_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.commands.inputs import read_texts
    from bertkit.inference.masked_lm import fill_mask
    from bertkit.tokenization import Tokenizer

    inputs = read_texts(args.texts, args.file, args.text_field, args.skip_bad_lines)
    if (Path(args.model) / "config.json").is_file():  # a family without an MLM head says so first (not its tokenizer)
        family_of(args.model).masked_lm(args.model)
    tokenizer = Tokenizer.from_pretrained(args.model)
    _check_texts(inputs, tokenizer.mask_token)
    texts = [item.text for item in inputs]
    results = fill_mask(texts, model=args.model, tokenizer=tokenizer, top_k=args.top_k, batch_size=args.batch_size,
                        precision=args.precision)
    if args.format == "jsonl":
        sys.stdout.write("".join(json.dumps({"text": text, "predictions": masks}, ensure_ascii=False) + "\n"
                                 for text, masks in zip(texts, results)))
        return 0
    for number, (text, masks) in enumerate(zip(texts, results)):
        if len(texts) > 1:
            print(("\n" if number else "") + text)
        for index, predictions in enumerate(masks, start=1):
            if len(masks) > 1:
                print(f"mask {index}:")
            for rank, p in enumerate(predictions, start=1):
                print(f"{rank:>3}. {p['token_str']:<16} {p['score']:.4f}  {p['sequence']}")
    return 0


def _check_texts(inputs, mask_token: str | None) -> None:
    """Every text non-empty and holding the mask token; errors name the line (or argument)."""
    if mask_token is None:
        raise BertkitError("tokenizer: has no mask token (set mask_token in tokenizer_config.json)")
    for item in inputs:
        if not item.text.strip():
            raise BertkitError(f"{item.source}: empty text; every text needs a {mask_token} token")
        if mask_token not in item.text:
            raise BertkitError(f"{item.source}: no {mask_token} token in {_clip(item.text)!r}")


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
