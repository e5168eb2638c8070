"""Training tokenizers: WordPiece by a likelihood rule (default; score "gain" or "pmi"), and
on the `tokenizers` library's trainers WordPiece by frequency, BPE, byte-level BPE and
Unigram (SentencePiece-style, unigram.py).

    from bertkit.tokenization.train import TrainOptions, train_tokenizer
    train_tokenizer(["corpus.txt.gz"], "tok/", TrainOptions(algorithm="wordpiece", vocab_size=30000))

The output directory loads in `bertkit.tokenization.Tokenizer.from_pretrained` and in
transformers (see output.py for the files).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer

from bertkit.errors import BertkitError
from bertkit.tokenization.train.corpus import CorpusSource, count_words, existing_files
from bertkit.tokenization.train.hf_trainers import train_frequency_rule
from bertkit.tokenization.train.options import (
    ALGORITHMS,
    BERT_SPECIALS,
    ROBERTA_SPECIALS,
    SpecialTokens,
    TextOptions,
    TrainOptions,
)
from bertkit.tokenization.train.output import save_tokenizer
from bertkit.tokenization.train.pipelines import wordpiece_tokenizer
from bertkit.tokenization.train.unigram import resolve_layout, train_unigram
from bertkit.tokenization.train.wordpiece_likelihood import learn_wordpiece, select_alphabet
from bertkit.tokenization.wordpiece import MAX_INPUT_CHARS_PER_WORD

__all__ = [
    "ALGORITHMS",
    "BERT_SPECIALS",
    "ROBERTA_SPECIALS",
    "SpecialTokens",
    "TextOptions",
    "TrainOptions",
    "TrainResult",
    "train_tokenizer",
    "train_wordpiece_likelihood",
]


@dataclass(frozen=True)
class TrainResult:
    """What a run produced: the tokenizer, where it was written, and a few facts."""

    tokenizer: Tokenizer
    output_dir: Path | None
    vocab_size: int
    seconds: float


def train_tokenizer(
    files: Iterable[str | Path],
    output_dir: str | Path | None,
    options: TrainOptions | None = None,
    *,
    tsv_column: str | None = None,
) -> TrainResult:
    """Train a tokenizer on `files` (text / JSONL / TSV, optionally .gz) and save it to `output_dir`.

    `output_dir=None` trains without writing. Errors about input (empty corpus, unreadable
    or non-UTF-8 file, vocabulary too small) raise `BertkitError` with one line naming
    the file/line or the option.
    """
    options = options or TrainOptions()
    started = time.perf_counter()
    source = CorpusSource(
        existing_files(files),
        text_field=options.text_field,
        tsv_column=tsv_column,
        skip_bad_lines=options.skip_bad_lines,
    )
    scheme = {"bbpe": "bytelevel", "unigram": "metaspace"}.get(options.algorithm, "bert")
    word_counts = count_words(
        source, options.text, scheme=scheme, workers=options.workers, show_progress=options.show_progress
    )
    if options.algorithm == "unigram":
        tokenizer = train_unigram(
            word_counts,
            resolve_layout(options.layout, options.sentinels),
            vocab_size=options.vocab_size,
            lowercase=options.text.lowercase,
            sentinels=options.sentinels,
            extra=options.special_tokens.extra,
            show_progress=options.show_progress,
        )
    elif options.algorithm == "wordpiece":
        tokenizer = train_wordpiece_likelihood(word_counts, options)
    else:
        tokenizer = train_frequency_rule(word_counts, options)
    if output_dir is not None:
        output_dir = Path(output_dir)
        save_tokenizer(tokenizer, output_dir, options, source.files)
    return TrainResult(tokenizer, output_dir, tokenizer.get_vocab_size(), time.perf_counter() - started)


def train_wordpiece_likelihood(word_counts: dict[str, int], options: TrainOptions) -> Tokenizer:
    """The likelihood-rule WordPiece tokenizer for BERT word counts (see wordpiece_likelihood.py).

    Vocabulary order: special tokens, the alphabet, learned tokens in merge order.
    """
    alphabet = select_alphabet(word_counts, options.limit_alphabet)
    if not alphabet:
        raise BertkitError("empty corpus: no words to build a vocabulary from")
    learned = learn_wordpiece(
        word_counts,
        alphabet,
        options.room_to_learn(len(alphabet)),
        score=options.merge_score,
        min_frequency=options.min_frequency,
        max_word_chars=MAX_INPUT_CHARS_PER_WORD,
        show_progress=options.show_progress,
    )
    specials = options.special_tokens.tokens()
    taken = set(specials)
    vocab = specials + [t for t in learned.alphabet + learned.learned if t not in taken]
    return wordpiece_tokenizer(vocab, options.special_tokens, options.text)
