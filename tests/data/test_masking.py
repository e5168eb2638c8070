"""Masking: rates and 80/10/10 ratios measured on >= 100k tokens, whole words and spans
checked against a plain-Python word grouping, the span-length law against the truncated
geometric (scipy chi-square), dynamic-masking determinism, and word boundaries of a real
WordPiece (MiniLM) and of tiny trained byte-level BPE / "</w>" BPE tokenizers against the
words the `tokenizers` pre-tokenizer reports."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bertkit.data.masking import (
    Masker,
    MaskingConfig,
    example_rng,
    sample_span_lengths,
    span_length_mean,
    word_boundaries,
    word_starts,
)
from bertkit.errors import BertkitError, ConfigError
from bertkit.tokenization import Tokenizer

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = [PAD, UNK, CLS, SEP, MASK]
VOCAB = 5000
# Synthetic vocabulary: about one id in three is a continuation piece ("##x").
STARTS = np.random.default_rng(123).random(VOCAB) < 0.67
STARTS[SPECIALS] = True


def make_masker(strategy: str = "token", **options) -> Masker:
    config = MaskingConfig(strategy=strategy, **options)
    return Masker(config, vocab_size=VOCAB, mask_token_id=MASK, special_ids=SPECIALS, word_starts=STARTS)


def pair_example(rng: np.random.Generator, length: int) -> np.ndarray:
    """[CLS] A [SEP] B [SEP] [PAD]... of `length` ids, with random text lengths and padding."""
    text = int(rng.integers(length // 2, length - 2))
    split = int(rng.integers(1, text))
    ids = np.full(length, PAD, dtype=np.int64)
    ids[1 : text + 1] = rng.integers(len(SPECIALS), VOCAB, size=text)
    ids[0], ids[split], ids[text + 1] = CLS, SEP, SEP
    return ids


def run(masker: Masker, examples: list[np.ndarray], epoch: int = 0):
    """Concatenated (inputs, masked, labels) over examples masked with example_rng(0, epoch, i)."""
    outs = [masker(ids, example_rng(0, epoch, i)) for i, ids in enumerate(examples)]
    return np.concatenate(examples), np.concatenate([o[0] for o in outs]), np.concatenate([o[1] for o in outs])


def reference_words(ids: np.ndarray, starts: np.ndarray = STARTS, ends: np.ndarray | None = None) -> list[list[int]]:
    """Plain-Python grouping: positions of each word (specials end words and belong to none)."""
    special = set(SPECIALS)
    words: list[list[int]] = []
    previous_ended = True
    for position, token in enumerate(ids.tolist()):
        if token in special:
            previous_ended = True
            continue
        if previous_ended or starts[token]:
            words.append([])
        words[-1].append(position)
        previous_ended = ends is not None and bool(ends[token])
    return words


def check_ratios(inputs: np.ndarray, masked: np.ndarray, labels: np.ndarray) -> None:
    chosen = labels != -100
    assert np.array_equal(labels[chosen], inputs[chosen])
    to_mask = np.mean(masked[chosen] == MASK)
    unchanged = np.mean(masked[chosen] == inputs[chosen])  # includes random draws of the original (1/V)
    replaced = 1 - to_mask - unchanged
    assert abs(to_mask - 0.8) < 0.01, to_mask
    assert abs(replaced - 0.1) < 0.01, replaced
    assert abs(unchanged - 0.1) < 0.01, unchanged
    assert np.array_equal(masked[~chosen], inputs[~chosen])  # nothing else is touched


@pytest.fixture(scope="module")
def pairs_128() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [pair_example(rng, 128) for _ in range(3000)]  # ~290k non-special tokens


# ---------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "field, value",
    [
        ("mlm_probability", 0.0),
        ("mlm_probability", 1.5),
        ("mask_token_ratio", -0.1),
        ("random_token_ratio", 0.3),  # 0.8 + 0.3 > 1
        ("max_predictions_per_seq", 0),
        ("strategy", "wwm"),
        ("span_geometric_p", 0.0),
        ("max_span_length", 0),
    ],
)
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ConfigError, match=field if field != "random_token_ratio" else "mask_token_ratio"):
        MaskingConfig(**{field: value})


def test_masking_needs_no_torch_and_agrees_on_the_ignore_index():
    import subprocess
    import sys

    code = "import sys, bertkit.data.masking as m; print(m.IGNORE_INDEX, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    from bertkit.model.bert.modeling import IGNORE_INDEX

    assert out == [str(IGNORE_INDEX), "False"]


def test_masker_argument_errors():
    with pytest.raises(ConfigError, match="word_starts"):
        Masker(MaskingConfig(strategy="whole_word"), vocab_size=VOCAB, mask_token_id=MASK, special_ids=SPECIALS)
    with pytest.raises(ConfigError, match="word_starts"):
        Masker(MaskingConfig(), vocab_size=VOCAB, mask_token_id=MASK, special_ids=SPECIALS, word_starts=STARTS[:10])
    with pytest.raises(ConfigError, match="mask_token_id"):
        Masker(MaskingConfig(), vocab_size=VOCAB, mask_token_id=VOCAB, special_ids=SPECIALS)
    masker = make_masker()
    with pytest.raises(BertkitError, match=f"id {VOCAB} is outside the vocabulary"):
        masker(np.array([CLS, VOCAB, SEP]), example_rng(0, 0, 0))
    with pytest.raises(ValueError, match="1-D"):
        masker(np.zeros((2, 3), dtype=np.int64), example_rng(0, 0, 0))


# ---------------------------------------------------------------------- token strategy


def test_token_rate_and_80_10_10(pairs_128):
    inputs, masked, labels = run(make_masker(), pairs_128)
    candidates = ~np.isin(inputs, SPECIALS)
    assert candidates.sum() > 100_000
    chosen = labels != -100
    assert not chosen[~candidates].any()  # [CLS]/[SEP]/[PAD] never chosen
    assert np.array_equal(masked[~candidates], inputs[~candidates])
    assert abs(chosen.sum() / candidates.sum() - 0.15) < 0.005
    check_ratios(inputs, masked, labels)


def test_budget_rounds_without_bias_at_every_length():
    masker = make_masker()
    rng = np.random.default_rng(1)
    errors = []
    for n in range(7, 60):
        ids = np.concatenate(([CLS], rng.integers(len(SPECIALS), VOCAB, size=n), [SEP]))
        counts = np.array([(masker(ids, example_rng(1, n, i))[1] != -100).sum() for i in range(400)])
        expected = 0.15 * n
        assert set(counts.tolist()) <= {int(np.floor(expected)), int(np.ceil(expected))}, n
        assert abs(counts.mean() - expected) < 0.1, n  # > 4 standard errors
        errors.append(counts.mean() - expected)
    assert abs(np.mean(errors)) < 0.015


def test_at_least_one_cap_and_empty_cases():
    masker = make_masker()
    short = np.array([CLS, 10, 11, SEP])
    assert all((masker(short, example_rng(0, 0, i))[1] != -100).sum() == 1 for i in range(50))
    only_specials = np.array([CLS, SEP, PAD, PAD])
    masked, labels = masker(only_specials, example_rng(0, 0, 0))
    assert np.array_equal(masked, only_specials) and (labels == -100).all()
    empty = masker(np.array([], dtype=np.int64), example_rng(0, 0, 0))
    assert empty[0].shape == empty[1].shape == (0,)
    rng = np.random.default_rng(2)
    for strategy in ("token", "whole_word", "span"):
        capped = make_masker(strategy, max_predictions_per_seq=5)
        counts = [(capped(pair_example(rng, 128), example_rng(0, 0, i))[1] != -100).sum() for i in range(200)]
        assert max(counts) == 5, strategy


def test_output_types_and_input_untouched():
    ids = np.array([CLS, *range(100, 140), SEP], dtype=np.int32)
    before = ids.copy()
    masked, labels = make_masker(mlm_probability=0.5)(ids, example_rng(3, 0, 0))
    assert masked.dtype == labels.dtype == np.int64
    assert np.array_equal(ids, before)


def test_random_replacements_are_uniform_over_non_special_ids():
    vocab = 25
    masker = Masker(
        MaskingConfig(mlm_probability=1.0, mask_token_ratio=0.0, random_token_ratio=1.0),
        vocab_size=vocab,
        mask_token_id=MASK,
        special_ids=SPECIALS,
    )
    ids = np.full(400, 7)
    draws = np.concatenate([masker(ids, example_rng(0, 0, i))[0] for i in range(100)])
    counts = np.bincount(draws, minlength=vocab)
    assert counts[SPECIALS].sum() == 0
    assert stats.chisquare(counts[len(SPECIALS) :]).pvalue > 1e-3


def test_dynamic_masking_is_a_function_of_seed_epoch_index(pairs_128):
    masker = make_masker()
    ids = pairs_128[0]
    first, again = masker(ids, example_rng(7, 2, 5)), masker(ids, example_rng(7, 2, 5))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other_epochs = [masker(ids, example_rng(7, epoch, 5))[1] for epoch in (0, 1, 3)]
    assert all(not np.array_equal(first[1], labels) for labels in other_epochs)
    _, _, epoch0 = run(masker, pairs_128[:200], epoch=0)
    _, _, epoch1 = run(masker, pairs_128[:200], epoch=1)
    chosen0, chosen1 = epoch0 != -100, epoch1 != -100
    assert (chosen0 & chosen1).sum() / chosen0.sum() < 0.3  # ~15% overlap, as independent draws


# ---------------------------------------------------------------------- whole words


def test_whole_word_never_partial_and_within_budget(pairs_128):
    masker = make_masker("whole_word")
    total_chosen = total_candidates = 0
    for i, ids in enumerate(pairs_128[:1500]):
        masked, labels = masker(ids, example_rng(0, 0, i))
        chosen = labels != -100
        words = reference_words(ids)
        n = sum(len(w) for w in words)
        assert chosen.sum() <= int(np.ceil(0.15 * n))
        for word in words:
            assert chosen[word].all() or not chosen[word].any(), (ids[word], chosen[word])
            if chosen[word].all():  # the 80/10/10 decision is taken once per word
                assert (masked[word] == MASK).all() or not (masked[word] == MASK).any()
        total_chosen += chosen.sum()
        total_candidates += n
    assert total_candidates > 100_000
    assert abs(total_chosen / total_candidates - 0.15) < 0.005


def test_whole_word_80_10_10():
    rng = np.random.default_rng(4)
    examples = [pair_example(rng, 256) for _ in range(2400)]  # ~450k candidate tokens
    check_ratios(*run(make_masker("whole_word"), examples))


# ---------------------------------------------------------------------- spans


def test_span_length_sampler_follows_the_truncated_geometric():
    p, longest = 0.2, 10
    lengths = sample_span_lengths(np.random.default_rng(5), p, longest, 200_000)
    law = np.array([p * (1 - p) ** (k - 1) for k in range(1, longest + 1)])
    law /= law.sum()
    counts = np.bincount(lengths, minlength=longest + 1)
    assert counts[0] == 0 and len(counts) == longest + 1
    assert stats.chisquare(counts[1:], law * len(lengths)).pvalue > 1e-3
    assert span_length_mean(p, longest) == pytest.approx(3.8, abs=0.005)  # SpanBERT's figure
    assert span_length_mean(p, longest) == pytest.approx(np.dot(np.arange(1, 11), law))


def masked_runs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the maximal runs of chosen positions."""
    edges = np.diff(np.concatenate(([0], (labels != -100).astype(np.int8), [0])))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def test_span_lengths_in_words_follow_the_law_on_long_sequences():
    """On long sequences the end-of-budget effect is negligible and the masked runs (one per
    span: spans keep a free word between them) follow the truncated geometric in words."""
    masker = make_masker("span")
    rng = np.random.default_rng(6)
    words_per_span = []
    for i in range(16):  # 16 x 8192 = 131k tokens
        ids = np.concatenate(([CLS], rng.integers(len(SPECIALS), VOCAB, size=8190), [SEP]))
        _, labels = masker(ids, example_rng(0, 0, i))
        starts, ends = masked_runs(labels)
        is_start = STARTS[ids].copy()
        is_start[1] = True  # the piece after [CLS] starts a word whatever it is
        assert is_start[starts].all() and (is_start[ends] | (ids[ends] == SEP)).all()  # whole words
        words_per_span += [int(is_start[s:e].sum()) for s, e in zip(starts, ends, strict=True)]
    words_per_span = np.array(words_per_span)
    assert words_per_span.max() <= 10
    assert abs(words_per_span.mean() - span_length_mean(0.2, 10)) < 0.15
    law = np.array([0.2 * 0.8 ** (k - 1) for k in range(1, 11)])
    counts = np.bincount(words_per_span, minlength=11)[1:]
    assert stats.chisquare(counts, law / law.sum() * counts.sum()).pvalue > 1e-3


def test_spans_rate_ratios_and_whole_words():
    masker = make_masker("span")
    rng = np.random.default_rng(7)
    examples = [pair_example(rng, 512) for _ in range(3000)]  # ~1.1M candidate tokens: ~12k spans
    inputs, masked, labels = run(masker, examples)
    candidates = ~np.isin(inputs, SPECIALS)
    chosen = labels != -100
    assert not chosen[~candidates].any()
    assert abs(chosen.sum() / candidates.sum() - 0.15) < 0.005
    check_ratios(inputs, masked, labels)
    for i, ids in enumerate(examples[:300]):
        example_chosen = masker(ids, example_rng(0, 0, i))[1] != -100
        for word in reference_words(ids):
            assert example_chosen[word].all() or not example_chosen[word].any()


def test_spans_stay_inside_one_segment_and_apart():
    """White-box: the chosen spans as word ranges, on many short segments."""
    masker = make_masker("span")
    rng = np.random.default_rng(8)
    for trial in range(300):
        lengths = rng.integers(1, 4, size=60)  # pieces per word
        segment_start = rng.random(60) < 0.2
        segment_start[0] = True
        budget = int(rng.integers(1, 40))
        span_of_word, n_spans = masker._choose_spans(lengths, segment_start, budget, rng)
        segment = np.cumsum(segment_start)
        assert lengths[span_of_word >= 0].sum() <= budget
        for span in range(n_spans):
            words = np.flatnonzero(span_of_word == span)
            assert 1 <= len(words) <= 10 and np.array_equal(words, np.arange(words[0], words[-1] + 1))
            assert len(set(segment[words].tolist())) == 1  # never crosses a special token
            after = words[-1] + 1
            if after < 60 and segment[after] == segment[words[0]]:
                assert span_of_word[after] == -1  # a free word before the next span


# ---------------------------------------------------------------------- word boundaries of real tokenizers

TRAINED_TEXTS = [  # only characters of the training corpus below, so no [UNK] splits a word
    "Playing walkers, jumped; trainable tokenization reads-painters.",
    "retrained maskers learn working tokens  and   talk.",
]
TEXTS = [
    "Pretraining unaffable tokenizers, e.g. BERT's whole-word masking (1984)!",
    "The painters were repainting; unlearnable tokenizations jumped over walkers.",
    "Dynamic masking draws a new mask every epoch for every sequence in the corpus.",
]


def check_grouping_matches(
    tokenizer: Tokenizer, starts: np.ndarray, ends: np.ndarray | None, reference, texts: list[str] = TEXTS
) -> None:
    """The Masker's word of each token equals the `reference` word (-1 for specials)."""
    masker = Masker(
        MaskingConfig(strategy="whole_word"),
        vocab_size=tokenizer.vocab_size,
        mask_token_id=tokenizer.mask_token_id,
        special_ids=tokenizer.all_special_ids,
        word_starts=starts,
        word_ends=ends,
    )
    for text in texts:
        encoding = tokenizer.backend.encode(text)
        ids = np.array(encoding.ids)
        assert tokenizer.unk_token_id not in ids
        special = np.isin(ids, tokenizer.all_special_ids)
        word_of, lengths, _ = masker._words(ids, special, np.flatnonzero(~special))
        got = np.full(len(ids), -1)
        got[~special] = word_of
        assert got.tolist() == reference(text, encoding), (encoding.tokens, got)
        assert lengths.sum() == (~special).sum()


def pre_tokenizer_words(text, encoding) -> list[int]:
    """The pre-tokenizer's word index per token (-1 for specials)."""
    return [-1 if w is None else w for w in encoding.word_ids]


def whitespace_words(text, encoding) -> list[int]:
    """Word index per token, a word being a whitespace-separated chunk of `text` (-1 for specials):
    pre-tokenizer words are merged unless their first non-space character follows a space."""
    words, current, previous = [], -1, None
    for word_id in encoding.word_ids:
        if word_id is None:
            words.append(-1)
            continue
        if word_id != previous:
            start = encoding.word_to_chars(word_id)[0]
            while text[start].isspace():
                start += 1
            if current < 0 or text[start - 1].isspace():
                current += 1
            previous = word_id
        words.append(current)
    return words


def test_wordpiece_word_starts_on_minilm(minilm_dir):
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    starts = word_starts(tokenizer)
    assert starts.shape == (tokenizer.vocab_size,) and starts.dtype == bool
    vocab = tokenizer.get_vocab()
    assert starts[vocab["pre"]] and not starts[vocab["##train"]] and starts[vocab["[CLS]"]]
    check_grouping_matches(tokenizer, starts, None, pre_tokenizer_words)
    # whole-word masking on real text never masks part of a word
    masker = Masker.from_tokenizer(MaskingConfig(strategy="whole_word", mlm_probability=0.3), tokenizer)
    encoding = tokenizer.backend.encode(" ".join(TEXTS))
    ids, word_ids = np.array(encoding.ids), encoding.word_ids
    for i in range(200):
        chosen = masker(ids, example_rng(0, 0, i))[1] != -100
        for word in set(w for w in word_ids if w is not None):
            positions = [j for j, w in enumerate(word_ids) if w == word]
            assert chosen[positions].all() or not chosen[positions].any()


def english_corpus(path: Path, lines: int = 200) -> Path:
    rng = random.Random(0)
    stems = ["play", "walk", "talk", "jump", "paint", "read", "train", "token", "mask", "learn", "work"]
    endings = ["", "s", "ed", "ing", "er", "ers", "able", "ization"]
    glue = [" "] * 6 + [", ", "; ", "-"]
    rows = []
    for _ in range(lines):
        words = [rng.choice(stems) + rng.choice(endings) for _ in range(rng.randint(4, 12))]
        rows.append("".join(word + rng.choice(glue) for word in words[:-1]) + words[-1] + ".")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Tokenizer]:
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    root = tmp_path_factory.mktemp("masking-tokenizers")
    corpus = english_corpus(root / "en.txt")
    tokenizers = {}
    for algorithm in ("bbpe", "bpe"):
        options = TrainOptions(algorithm=algorithm, vocab_size=300, show_progress=False)
        train_tokenizer([corpus], root / algorithm, options)
        tokenizers[algorithm] = Tokenizer.from_pretrained(root / algorithm)
    return tokenizers


def test_byte_level_bpe_words_are_whitespace_words(trained):
    tokenizer = trained["bbpe"]
    assert tokenizer.model_type == "BPE"
    starts = word_starts(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
    assert all(starts[i] == (t.startswith("\u0120") or i in tokenizer.all_special_ids) for i, t in enumerate(tokens))
    check_grouping_matches(tokenizer, starts, None, whitespace_words, TEXTS + TRAINED_TEXTS)


def test_end_of_word_bpe_uses_word_ends(trained):
    tokenizer = trained["bpe"]
    with pytest.raises(BertkitError, match="word ends"):
        word_starts(tokenizer)
    starts, ends = word_boundaries(tokenizer)
    vocab = tokenizer.get_vocab()
    assert ends is not None and ends[vocab["s</w>"]] and not ends[vocab["s"]] and not starts[vocab["s"]]
    check_grouping_matches(tokenizer, starts, ends, pre_tokenizer_words, TRAINED_TEXTS)
    masker = Masker.from_tokenizer(MaskingConfig(strategy="span"), tokenizer)
    ids = np.array(tokenizer.backend.encode(TRAINED_TEXTS[0]).ids)
    assert (masker(ids, example_rng(0, 0, 0))[1] != -100).any()


def test_metaspace_unigram_and_word_level_word_starts():
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import models, pre_tokenizers

    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "\u2581the", "\u2581un", "aff", "able", "\u2581", *"theunafbl"]
    backend = RustTokenizer(models.Unigram([(p, -float(len(p) < 3)) for p in pieces], unk_id=1, byte_fallback=False))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer = Tokenizer(backend)
    encoding = backend.encode("the unaffable the")
    assert encoding.tokens == ["[CLS]", "\u2581the", "\u2581un", "aff", "able", "\u2581the", "[SEP]"]
    assert word_starts(tokenizer)[encoding.ids].tolist() == [True, True, True, False, False, True, True]
    check_grouping_matches(tokenizer, word_starts(tokenizer), None, pre_tokenizer_words, ["the unaffable the"])

    word_level = RustTokenizer(models.WordLevel({p: i for i, p in enumerate(pieces[:6])}, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    assert word_starts(Tokenizer(word_level)).all()
