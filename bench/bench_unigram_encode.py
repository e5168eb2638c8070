"""Unigram encode speed: bertkit `Tokenizer.__call__` vs the `tokenizers` library's own `encode_batch`.

Both sides run in this process on the same Unigram tokenizer (one bertkit trains here, or
`--tokenizer DIR`) and the same texts, with the same truncation (longest_first, 128) and
padding (to the longest row, on the tokenizer's side: the LEFT for the xlnet layout):
  * reference: `tokenizers.Tokenizer.from_file(tokenizer.json).encode_batch(texts)` with
    truncation and padding enabled on the Rust tokenizer — bare, and with ids, type ids and
    attention mask read out into Python lists (the least a caller must do to use them);
  * bertkit: `tok(texts, truncation=True, max_length=128, padding=True)`, lists and "pt".
The target (issue 17): bertkit within 10% of `encode_batch`.

Texts: half Korean (NSMC reviews), half English (SST-2 sentences), from `$BERTKIT_DATA`
or `../shared/data`. The tokenizer is trained on other lines of the same sources.
Run: `python bench/bench_unigram_encode.py [--texts 10000 --repeats 7 --vocab-size 16000]`;
a quick check: `--texts 200 --repeats 1 --train-lines 2000 --vocab-size 2000`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path


from bertkit.tokenization import Tokenizer
from bertkit.tokenization.train import TrainOptions, train_tokenizer

sys.path.insert(0, os.path.dirname(__file__))
from common import add_clock_argument, clock_of, data_dir, interleaved_best, rust_encode_batch  # noqa: E402

MAX_LENGTH = 128


def source_lines() -> tuple[list[str], list[str]]:
    """(Korean NSMC reviews, English SST-2 sentences) from the shared data folder."""
    directory = data_dir()
    nsmc, sst2 = directory / "nsmc" / "ratings_train.raw-derived.txt.gz", directory / "glue" / "SST-2" / "train.tsv"
    for path in (nsmc, sst2):
        if not path.is_file():
            sys.exit(f"bench_unigram_encode: {path} not found (expected in the shared data folder)")
    with gzip.open(nsmc, "rt", encoding="utf-8") as handle:
        korean = [row.split("\t")[1] for row in handle.read().splitlines()[1:] if row.count("\t") == 2]
    english = [line.split("\t")[0] for line in sst2.read_text(encoding="utf-8").splitlines()[1:]]
    return [t for t in korean if t.strip()], [t for t in english if t.strip()]


def rust_reference(tok: Tokenizer, tokenizer_json: Path, read_fields: bool):
    return rust_encode_batch(tokenizer_json, MAX_LENGTH, tok.pad_token_id, tok.pad_token, read_fields, tok.padding_side)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tokenizer", metavar="DIR", help="a Unigram tokenizer directory (default: train one here)")
    parser.add_argument("--vocab-size", type=int, default=16_000)
    parser.add_argument("--layout", default="xlnet", choices=["xlnet", "t5", "albert"])
    parser.add_argument("--train-lines", type=int, default=50_000, help="lines of each language to train on")
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)

    korean, english = source_lines()
    half = args.texts // 2
    texts = korean[:half] + english[: args.texts - half]
    if len(texts) < args.texts:
        sys.exit(f"bench_unigram_encode: only {len(texts)} texts available, asked for {args.texts}")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(args.tokenizer) if args.tokenizer else Path(tmp) / "tok"
        if not args.tokenizer:
            corpus = Path(tmp) / "train.txt"
            train = korean[half : half + args.train_lines] + english[half : half + args.train_lines]
            corpus.write_text("\n".join(train) + "\n", encoding="utf-8")
            options = TrainOptions(
                algorithm="unigram", vocab_size=args.vocab_size, layout=args.layout, show_progress=False
            )
            train_tokenizer([corpus], directory, options)
        tok = Tokenizer.from_pretrained(directory)
        if tok.model_type != "Unigram":
            sys.exit(f"bench_unigram_encode: {directory} holds a {tok.model_type} tokenizer, not Unigram")
        candidates: dict[str, Callable[[list[str]], object]] = {
            "tokenizers encode_batch": rust_reference(tok, directory / "tokenizer.json", False),
            "tokenizers encode_batch + read ids/types/mask": rust_reference(tok, directory / "tokenizer.json", True),
            "bertkit Tokenizer.__call__ (lists)": lambda t: tok(t, truncation=True, max_length=MAX_LENGTH, padding=True),
            "bertkit Tokenizer.__call__ (return_tensors='pt')": lambda t: tok(
                t, truncation=True, max_length=MAX_LENGTH, padding=True, return_tensors="pt"
            ),
        }
        # sanity: both sides give the same ids, type ids and mask (padding side included)
        reference = candidates["tokenizers encode_batch + read ids/types/mask"](texts[:200])
        ours = tok(texts[:200], truncation=True, max_length=MAX_LENGTH, padding=True)
        assert (ours["input_ids"], ours["token_type_ids"], ours["attention_mask"]) == reference

        for run in candidates.values():  # warm-up
            run(texts[:500])
        timings, _ = interleaved_best({name: partial(run, texts) for name, run in candidates.items()}, args.repeats, clock)
    rate = {name: len(texts) / best for name, best in timings.items()}  # best of N: least disturbed
    n_tokens = sum(len(row) for row in tok(texts, truncation=True, max_length=MAX_LENGTH)["input_ids"])
    print(f"{len(texts)} texts ({n_tokens / len(texts):.1f} tokens each after truncation to {MAX_LENGTH}), "
          f"Unigram vocab {len(tok):,} ({args.layout if not args.tokenizer else directory}), padding=longest "
          f"on the {tok.padding_side}, best of {args.repeats} repeats, {clock.label}, {os.cpu_count()} CPU cores")  # fmt: skip
    for name, value in rate.items():
        print(f"  {name:<50} {value:>10,.0f} texts/s")
    base, fields = rate["tokenizers encode_batch"], rate["tokenizers encode_batch + read ids/types/mask"]
    for name in ("bertkit Tokenizer.__call__ (lists)", "bertkit Tokenizer.__call__ (return_tensors='pt')"):
        print(f"ratio {name}: {rate[name] / base:.2f} vs encode_batch, {rate[name] / fields:.2f} vs encode_batch + read fields")


if __name__ == "__main__":
    main()
