"""`bertkit generate`: text from a generating model (every family with a `generator`: T5, BART, GPT-2, GPT-1), one result per input.

  bertkit generate --model runs/t5/final "The <extra_id_0> walks in <extra_id_1> park."   # greedy
  bertkit generate --model DIR --num-beams 4 --max-new-tokens 32 "summarize: ..."
  bertkit generate --model DIR --do-sample --top-p 0.9 --temperature 0.8 --seed 1 --file texts.txt --format jsonl
  bertkit generate --model runs/gpt/final "It is a truth universally acknowledged" --max-new-tokens 40 \
      --do-sample --top-p 0.9 --repetition-penalty 1.2          # a decoder: the prompt, then its continuation

Input: TEXT arguments, --file (one text a line, or JSONL with --text-field) or lines on
stdin. Output: the generated text of each input on its own line (--format text), or one
JSON object per input {"text", "generated_text"} (--format jsonl). Special tokens are
dropped, T5's sentinels (<extra_id_N>) kept. A decoder-only model's result is the prompt
and its continuation (--no-return-full-text: the continuation alone); a prompt longer than
its context is cut from the left with a warning. The options are `model.generate`'s
(transformers' names and defaults; bertkit.inference.generation).
"""

from __future__ import annotations

import argparse
import json
import sys

from bertkit.commands import (
    add_precision_argument, add_runtime_options, add_skip_bad_lines_argument, one_line_warnings,
)
from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    from bertkit.model.families import families_that

    p = subparsers.add_parser("generate", help=f"generate text with a generating model ({families_that('generate')})",
                              description="Generate text for each input with an encoder-decoder "
                                          f"({families_that('encoder-decoder')}) or a decoder "
                                          f"({families_that('decoder')}): greedy by default, beam search "
                                          "(--num-beams) or sampling (--do-sample).")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="input texts")
    p.add_argument("--model", required=True, metavar="DIR", help="checkpoint directory of a generating model "
                   f"({families_that('generate')})")
    p.add_argument("--file", help="read inputs from this file instead, one per line (txt, .gz; JSONL: --text-field)")
    p.add_argument("--text-field", default="text", help="JSONL field holding the text (default: text)")
    add_skip_bad_lines_argument(p)
    add_generation_arguments(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-source-length", type=int,
                   help="input tokens kept (T5, default 512: the first ones; a decoder: the last ones, "
                        "default: what its context leaves beside the new tokens)")
    p.add_argument("--device", help="cpu, cuda, ... (default: cuda when available; int8: cpu)")
    add_precision_argument(p)
    p.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text (default): one generated text a line; jsonl: {text, generated_text} per input")
    add_runtime_options(p)
    p.set_defaults(func=run)


def add_generation_arguments(p: argparse.ArgumentParser) -> None:
    """The decoding flags (`generate` and `predict` on a text-to-text model)."""
    p.add_argument("--max-new-tokens", type=int, help="tokens generated at most (default: 20, as transformers)")
    p.add_argument("--min-new-tokens", type=int, help="no EOS before this many tokens")
    p.add_argument("--num-beams", type=int, default=1, help="beam search with this many beams (default: 1, greedy)")
    p.add_argument("--length-penalty", type=float, default=1.0, help="beam score = log p / length ** this")
    p.add_argument("--early-stopping", choices=("true", "false", "never"), default="false",
                   help="beam search stop rule, as transformers (default: false)")
    p.add_argument("--no-repeat-ngram-size", type=int, default=0, help="no n-gram of this size twice")
    p.add_argument("--do-sample", action="store_true", help="sample instead of taking the most likely tokens")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=50, help="sample from the k most likely tokens (0: all)")
    p.add_argument("--top-p", type=float, default=1.0, help="sample from the smallest set reaching this probability")
    p.add_argument("--repetition-penalty", type=float, default=1.0,
                   help="> 1 makes tokens already in the text less likely (CTRL's rule; default 1.0: none)")
    p.add_argument("--stop", action="append", metavar="TEXT", dest="stop_strings",
                   help="end a text when it comes to contain TEXT (kept; repeatable)")
    p.add_argument("--return-full-text", action=argparse.BooleanOptionalAction, default=None,
                   help="a decoder's result: the prompt, then its continuation (default), or the continuation alone")
    p.add_argument("--seed", type=int, help="random seed of the sampling")


def generation_options(args: argparse.Namespace) -> dict:
    """`model.generate` keyword arguments from the decoding flags."""
    options = dict(num_beams=args.num_beams, length_penalty=args.length_penalty,
                   early_stopping={"true": True, "false": False}.get(args.early_stopping, args.early_stopping),
                   no_repeat_ngram_size=args.no_repeat_ngram_size, do_sample=args.do_sample,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   repetition_penalty=args.repetition_penalty)
    if args.stop_strings:
        options["stop_strings"] = args.stop_strings
    if args.return_full_text is not None:
        options["return_full_text"] = args.return_full_text
    if args.max_new_tokens is not None:
        options["max_new_tokens"] = args.max_new_tokens
    if args.min_new_tokens is not None:
        options["min_new_tokens"] = args.min_new_tokens
    return options


def run(args: argparse.Namespace) -> int:
    from bertkit.commands.inputs import read_texts
    from bertkit.inference.generation import generate, load_generator

    inputs = read_texts(args.texts, args.file, args.text_field, args.skip_bad_lines)
    check_texts(inputs)
    loaded = load_generator(args.model, args.device, args.precision)
    texts = [item.text for item in inputs]
    with one_line_warnings():  # a prompt cut to the context
        results = generate(texts, loaded, batch_size=args.batch_size, max_source_length=args.max_source_length,
                           seed=args.seed, **generation_options(args))
    if args.format == "jsonl":
        sys.stdout.write("".join(json.dumps({"text": text, "generated_text": result}, ensure_ascii=False) + "\n"
                                 for text, result in zip(texts, results)))
    else:
        sys.stdout.write("".join(result + "\n" for result in results))
    return 0


def check_texts(inputs) -> None:
    """Every input non-empty; the error names its line (or argument)."""
    for item in inputs:
        if not item.text.strip():
            raise BertkitError(f"{item.source}: empty text, nothing to generate from")
