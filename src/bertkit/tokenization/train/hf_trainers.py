"""wordpiece-freq, bpe and bbpe on the `tokenizers` library's (Rust) trainers.

bertkit counts the words (corpus.count_words: files, JSONL/TSV fields, .gz, morpheme
splitting, bad lines, all cores) and the library merges by frequency.

Determinism. The library's trainer creates the `##c` / `c</w>` symbols in hash-map order,
so their ids, and through the id tie-break the merges themselves, can change from run to
run (huggingface/tokenizers#1794). So bertkit chooses the alphabet itself, registers
every prefixed/suffixed symbol up front in sorted order (no symbol is created in hash
order), feeds the trainer the counted words in sorted order, and rebuilds the result
with its vocabulary in a fixed order: special tokens, alphabet, learned tokens in merge
order. Byte-level BPE starts from the fixed 256-symbol alphabet.
"""

from __future__ import annotations

import json
from typing import Mapping

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from bertkit.errors import BertkitError
from bertkit.tokenization.train.feed import word_stream
from bertkit.tokenization.train.options import TrainOptions
from bertkit.tokenization.train.pipelines import BPE_SUFFIX, finish, with_pipeline, wordpiece_tokenizer
from bertkit.tokenization.train.wordpiece_likelihood import select_alphabet
from bertkit.tokenization.wordpiece import MAX_INPUT_CHARS_PER_WORD, WORDPIECE_PREFIX


def train_frequency_rule(word_counts: Mapping[str, int], options: TrainOptions) -> Tokenizer:
    """wordpiece-freq, bpe or bbpe from word counts (BERT words; byte-level words for bbpe)."""
    algorithm, specials = options.algorithm, options.reserved_tokens()
    chars, marked = initial_symbols(word_counts, options)
    if not word_counts or not chars:
        raise BertkitError("empty corpus: no words to build a vocabulary from")
    alphabet = chars + marked
    room = options.room_to_learn(len(alphabet))
    known = set(chars)
    limit = MAX_INPUT_CHARS_PER_WORD if algorithm == "wordpiece-freq" else None
    words = {w: n for w, n in word_counts.items() if (limit is None or len(w) <= limit) and known.issuperset(w)}

    draft, make_trainer, marker = _draft(options, chars)
    trainer = make_trainer(
        vocab_size=options.vocab_size,
        min_frequency=options.min_frequency,
        special_tokens=specials + marked,  # fixed ids for the marked symbols
        show_progress=options.show_progress,
        **marker,
    )
    draft.train_from_iterator(word_stream(words), trainer)

    trained = draft.get_vocab(with_added_tokens=False)
    initial = set(alphabet) | set(specials)
    # in merge order; capped, as the trainer does not count alphabet symbols it never saw
    # (characters found only in words over 100 characters, left out of wordpiece-freq)
    learned = [t for t in sorted(trained, key=trained.__getitem__) if t not in initial][:room]
    vocab = specials + [t for t in alphabet if t not in set(specials)] + learned
    if algorithm == "wordpiece-freq":
        return wordpiece_tokenizer(vocab, options.special_tokens, options.text)
    merges = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in json.loads(draft.to_str())["model"]["merges"]
    ]
    ids = {t: i for i, t in enumerate(vocab)}
    if algorithm == "bpe":
        model = models.BPE(ids, merges, unk_token=options.special_tokens.unk, end_of_word_suffix=BPE_SUFFIX)
    else:
        model = models.BPE(ids, merges)
    tokenizer = with_pipeline(Tokenizer(model), algorithm, options.text)
    if options.decoder_layout is not None:
        return options.decoder_layout.finish(tokenizer, options.special_tokens.extra)
    return finish(tokenizer, algorithm, options.special_tokens)


def initial_symbols(word_counts: Mapping[str, int], options: TrainOptions) -> tuple[list[str], list[str]]:
    """(characters, marked symbols) the vocabulary starts from, each in a fixed order.

    wordpiece-freq: "##c" for characters seen inside words; bpe: "c</w>" for every
    character (any can end a word); bbpe: the 256 byte symbols and nothing marked.
    """
    if options.algorithm == "bbpe":
        return sorted(pre_tokenizers.ByteLevel.alphabet()), []
    symbols = select_alphabet(word_counts, options.limit_alphabet)
    chars = [s for s in symbols if len(s) == 1]
    if options.algorithm == "wordpiece-freq":
        return chars, [s for s in symbols if len(s) > 1]
    return chars, [c + BPE_SUFFIX for c in chars]


def _draft(options: TrainOptions, chars: list[str]):
    """The untrained model (fed pre-split words) and its trainer class and marker option."""
    unk = options.special_tokens.unk
    if options.algorithm == "wordpiece-freq":
        draft = Tokenizer(models.WordPiece(unk_token=unk, continuing_subword_prefix=WORDPIECE_PREFIX))
        make_trainer, marker = trainers.WordPieceTrainer, {"continuing_subword_prefix": WORDPIECE_PREFIX}
    elif options.algorithm == "bpe":
        draft = Tokenizer(models.BPE(unk_token=unk, end_of_word_suffix=BPE_SUFFIX))
        make_trainer, marker = trainers.BpeTrainer, {"end_of_word_suffix": BPE_SUFFIX}
    else:
        draft = Tokenizer(models.BPE())
        make_trainer, marker = trainers.BpeTrainer, {"initial_alphabet": chars}
    draft.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # the words are normalized and split already
    return draft, make_trainer, marker
