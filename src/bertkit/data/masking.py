"""Masked-LM corruption of one example: which positions to predict and what the model sees.

`Masker(config, ...)(input_ids, rng)` returns `(masked_ids, labels)`; it is a pure
function of the ids and an explicit `np.random.Generator`, so `example_rng(seed, epoch,
index)` makes every example's mask reproducible, and a new epoch a new mask (RoBERTa's
dynamic masking). It runs per example inside the training loop, so all of it is
vectorised numpy (a 128-token example takes ~20 us with the token strategy).

Budget. Candidates are the positions whose id is not special ([CLS], [SEP], [PAD], [MASK],
[UNK] or any other id in `special_ids`). The number to predict is
`mlm_probability * candidates`, rounded down or up at random with the fraction as the
probability of rounding up (so the rate is exactly 15% in expectation at every length,
unlike `round`), at least 1 when there is a candidate, at most `max_predictions_per_seq`.

Strategies:
  token       the budget's positions chosen uniformly without replacement (BERT).
  whole_word  words (a word-start piece plus the continuation pieces after it; a special
              token always ends a word) taken in random order; a word whose pieces would
              push the count past the budget is skipped and the next one tried (BERT's
              whole-word masking). All pieces of a chosen word are predicted.
  span        SpanBERT: draw a span length in words from Geometric(p) truncated to
              1..max_span_length (renormalised, as the paper: mean 3.8 words for p=0.2;
              clipping with min(l, 10) instead would give 4.46); the span starts at a word
              drawn uniformly among the starts where the whole span fits: inside one
              segment (never across a special token), on free words, at least one word
              away from earlier spans (so each span's boundary tokens x_{s-1}, x_{e+1}
              stay visible, which the span boundary objective reads, and the masked runs
              in `labels` are exactly the spans), and within the remaining budget. When no
              start fits a length, shorter lengths are drawn (the truncated distribution
              conditioned on fitting); it stops when the budget is spent or no word fits.
              So lengths follow the law exactly until the budget runs low: on long
              sequences the mean is 3.8 words, but the last spans of a sequence are cut
              down to what remains (observed mean ~3.0 at 128 tokens, ~3.5 at 512).

Corruption (80/10/10). Each chosen unit - a position (token), a word (whole_word) or a
span (span, as SpanBERT) - independently becomes [MASK] with probability
mask_token_ratio, a random token with random_token_ratio, else stays unchanged; so a
word is never half [MASK] and half visible (Google's generator decides per piece; the
rates per token are the same in expectation). A random token is drawn per position,
uniformly from the non-special ids (it may equal the original, as in BERT). `labels` hold the original id at every chosen
position and IGNORE_INDEX (-100) elsewhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertkit.errors import BertkitError, ConfigError
from bertkit.tokenization.decoding import pipeline_components
from bertkit.labels import IGNORE_INDEX

STRATEGIES = ("token", "whole_word", "span")
BYTE_LEVEL_SPACE = "\u0120"  # "Ġ": the byte-level alphabet's symbol for a space byte
METASPACE = "\u2581"  # "▁": SentencePiece's / Metaspace's default space symbol
_SPAN_TRIES = 8  # cheap rejection tries for a span start before listing every start that fits


@dataclass(frozen=True)
class MaskingConfig:
    """How examples are masked (see the module docstring for the strategies)."""

    mlm_probability: float = 0.15
    max_predictions_per_seq: int | None = None  # BERT: 20 at 128 tokens, 80 at 512; None = no cap
    mask_token_ratio: float = 0.8  # of chosen positions -> [MASK]
    random_token_ratio: float = 0.1  # -> a random token; the rest stay unchanged
    strategy: str = "token"  # "token" | "whole_word" | "span"
    span_geometric_p: float = 0.2
    max_span_length: int = 10  # in words

    def __post_init__(self) -> None:
        _check_fraction("mlm_probability", self.mlm_probability, open_low=True)
        _check_fraction("mask_token_ratio", self.mask_token_ratio)
        _check_fraction("random_token_ratio", self.random_token_ratio)
        if self.mask_token_ratio + self.random_token_ratio > 1 + 1e-9:
            raise ConfigError(
                f"mask_token_ratio + random_token_ratio = {self.mask_token_ratio + self.random_token_ratio:g} "
                "must be at most 1"
            )
        if self.max_predictions_per_seq is not None:
            _check_positive_int("max_predictions_per_seq", self.max_predictions_per_seq)
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy={self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        _check_fraction("span_geometric_p", self.span_geometric_p, open_low=True)
        _check_positive_int("max_span_length", self.max_span_length)

    @property
    def needs_words(self) -> bool:
        """True when the strategy masks whole words (so the Masker needs word boundaries)."""
        return self.strategy != "token"


def example_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator for one example: every random choice made for it derives from these three numbers."""
    return np.random.default_rng([seed, epoch, index])


class Masker:
    """Masks one example at a time; build once per run, call per example.

    vocab_size: number of token ids (random replacements are drawn below it).
    mask_token_id: the [MASK] id. special_ids: ids never chosen and never drawn as random tokens.
    word_starts: (vocab_size,) bool, True when a token begins a new word (`word_starts`);
        needed for whole_word and span.
    word_ends: optional (vocab_size,) bool, True when a token ends its word (BPE with an
        end-of-word suffix such as "</w>", see `word_boundaries`).
    """

    def __init__(
        self,
        config: MaskingConfig,
        *,
        vocab_size: int,
        mask_token_id: int,
        special_ids: Sequence[int],
        word_starts: np.ndarray | None = None,
        word_ends: np.ndarray | None = None,
    ):
        if not isinstance(config, MaskingConfig):
            raise TypeError(f"config must be a MaskingConfig, got {type(config).__name__}")
        _check_positive_int("vocab_size", vocab_size)
        if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, (int, np.integer)):
            raise ConfigError(f"mask_token_id={mask_token_id!r} must be an integer token id")
        if not 0 <= mask_token_id < vocab_size:
            raise ConfigError(f"mask_token_id={mask_token_id} is outside the vocabulary (size {vocab_size})")
        special = np.zeros(vocab_size, dtype=bool)
        special_list = [int(i) for i in special_ids]
        bad = [i for i in special_list if not 0 <= i < vocab_size]
        if bad:
            raise ConfigError(f"special_ids {bad} are outside the vocabulary (size {vocab_size})")
        special[special_list] = True
        special[mask_token_id] = True  # [MASK] is never a prediction target nor a random replacement
        self.config = config
        self.vocab_size = vocab_size
        self.mask_token_id = int(mask_token_id)
        self._special = special  # (V,) bool
        self._random_ids = np.flatnonzero(~special)  # (R,) int64: what a "random token" is drawn from
        if self._random_ids.size == 0:
            raise ConfigError("special_ids cover the whole vocabulary: nothing can be masked")
        self._starts = self._ends = None
        if word_starts is not None:
            self._starts = _boundary_array("word_starts", word_starts, vocab_size) | special
        if word_ends is not None:
            self._ends = _boundary_array("word_ends", word_ends, vocab_size) | special
        if config.needs_words and self._starts is None:
            raise ConfigError(f"strategy={config.strategy!r} needs word_starts (see bertkit.data.masking.word_starts)")
        self._mask_below = config.mask_token_ratio  # u < this -> [MASK]
        self._random_below = config.mask_token_ratio + config.random_token_ratio  # u < this -> random

    @classmethod
    def from_tokenizer(cls, config: MaskingConfig, tokenizer: Any) -> Masker:
        """A Masker for ids made by a bertkit `Tokenizer` (its specials, [MASK] and word boundaries)."""
        if tokenizer.mask_token_id is None:
            raise BertkitError("the tokenizer has no mask token; masked-LM pre-training needs one")
        starts = ends = None
        if config.needs_words:
            starts, ends = word_boundaries(tokenizer)
        return cls(
            config,
            vocab_size=tokenizer.vocab_size,
            mask_token_id=tokenizer.mask_token_id,
            special_ids=tokenizer.all_special_ids,
            word_starts=starts,
            word_ends=ends,
        )

    def __call__(self, input_ids: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """input_ids (T,) int -> (masked_ids (T,) int64 copy, labels (T,) int64).

        labels hold the original id at the chosen positions and -100 elsewhere; `rng` makes
        every random choice (use `example_rng(seed, epoch, index)`).
        """
        ids = np.array(input_ids, dtype=np.int64)  # (T,) always a copy
        if ids.ndim != 1:
            raise ValueError(f"input_ids must be 1-D (T,), got shape {ids.shape}")
        labels = np.full(ids.shape, IGNORE_INDEX, dtype=np.int64)
        if ids.size == 0:
            return ids, labels
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= self.vocab_size:
            raise BertkitError(
                f"token id {low if low < 0 else high} is outside the vocabulary (size {self.vocab_size}): "
                "were the data built with another tokenizer?"
            )
        special = self._special[ids]  # (T,) bool
        candidates = np.flatnonzero(~special)  # (n,) positions that may be chosen
        if candidates.size == 0:
            return ids, labels
        budget = self._budget(candidates.size, rng)
        strategy = self.config.strategy
        if strategy == "token":
            positions = self._choose_tokens(candidates, budget, rng)
            decisions = rng.random(positions.size)  # (k,) one per position
        else:
            word_of, lengths, segment_start = self._words(ids, special, candidates)
            if strategy == "whole_word":
                unit_of_word, n_units = self._choose_words(lengths, budget, rng)
            else:
                unit_of_word, n_units = self._choose_spans(lengths, segment_start, budget, rng)
            unit_of_candidate = unit_of_word[word_of]  # (n,) -1 = not chosen
            chosen = unit_of_candidate >= 0
            positions = candidates[chosen]
            decisions = rng.random(n_units)[unit_of_candidate[chosen]]  # (k,) one per word / span
        labels[positions] = ids[positions]
        ids[positions[decisions < self._mask_below]] = self.mask_token_id
        to_random = positions[(decisions >= self._mask_below) & (decisions < self._random_below)]
        if to_random.size:
            ids[to_random] = self._random_ids[rng.integers(self._random_ids.size, size=to_random.size)]
        return ids, labels

    def max_predictions(self, length: int) -> int:
        """The most positions a sequence of `length` tokens gets to predict: the budget of
        `length` candidates rounded up (a sequence has no more), capped; every strategy
        chooses at most its budget. A compiled step's static row count (bertkit.model.static_shapes)."""
        most = max(1, math.ceil(self.config.mlm_probability * length))
        cap = self.config.max_predictions_per_seq
        return most if cap is None else min(most, cap)

    # ------------------------------------------------------------------ choices

    def _budget(self, n: int, rng: np.random.Generator) -> int:
        """Positions to predict among n candidates: unbiased rounding of p*n, >= 1, capped."""
        expected = self.config.mlm_probability * n
        budget = math.floor(expected)
        budget += int(rng.random() < expected - budget)
        budget = max(1, budget)
        cap = self.config.max_predictions_per_seq
        return budget if cap is None else min(budget, cap)

    @staticmethod
    def _choose_tokens(candidates: np.ndarray, budget: int, rng: np.random.Generator) -> np.ndarray:
        """(k,) positions: `budget` of the candidates, uniformly without replacement."""
        if budget >= candidates.size:
            return candidates
        keys = rng.random(candidates.size)  # the k smallest random keys = a uniform k-subset
        return candidates[np.argpartition(keys, budget - 1)[:budget]]

    def _words(self, ids: np.ndarray, special: np.ndarray, candidates: np.ndarray):
        """Group the candidate positions into words.

        Returns word_of (n,) word index of each candidate, lengths (W,) pieces per word,
        segment_start (W,) bool: the word is the first after a special token (or the start).
        """
        after_special = np.empty(ids.size, dtype=bool)  # (T,) position 0 or right after a special
        after_special[0] = True
        after_special[1:] = special[:-1]
        starts = self._starts[ids] | after_special  # (T,)
        if self._ends is not None:
            starts[1:] |= self._ends[ids[:-1]]
        first_piece = starts[candidates]  # (n,) True at the first piece of each word
        word_of = np.cumsum(first_piece) - 1  # (n,) the first candidate always starts a word
        first = np.flatnonzero(first_piece)  # (W,) index into candidates
        lengths = np.empty_like(first)  # (W,) pieces per word
        lengths[:-1] = first[1:] - first[:-1]
        lengths[-1] = candidates.size - first[-1]
        return word_of, lengths, after_special[candidates[first]]

    @staticmethod
    def _choose_words(lengths: np.ndarray, budget: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """Whole words in random order, skipping those that overshoot; (W,) unit per word (-1 = no), W."""
        n_words = lengths.size
        order = rng.permutation(n_words)  # (W,)
        ordered = lengths[order]
        filled = np.cumsum(ordered)
        fit = int(np.searchsorted(filled, budget, side="right"))  # the first `fit` words all fit
        chosen = np.zeros(n_words, dtype=bool)
        chosen[order[:fit]] = True
        remaining = budget - (int(filled[fit - 1]) if fit else 0)
        if remaining and fit < n_words:  # word `fit` overshoots; later words may still fit
            later = fit + 1 + np.flatnonzero(ordered[fit + 1 :] <= remaining)
            for position, length in zip(later.tolist(), ordered[later].tolist(), strict=True):
                if length <= remaining:
                    chosen[order[position]] = True
                    remaining -= length
                    if not remaining:
                        break
        unit_of_word = np.where(chosen, np.arange(n_words), -1)
        return unit_of_word, n_words

    def _choose_spans(
        self, lengths: np.ndarray, segment_start: np.ndarray, budget: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, int]:
        """SpanBERT spans of whole words; (W,) span index per word (-1 = none), number of spans.

        For a drawn length, the start is uniform over the words where the span fits. It is
        found by rejection (a few cheap Python tries: a start drawn over all words is kept
        when it fits) and, when those fail, by listing every start that fits (numpy); both
        give the same uniform choice.
        """
        n_words = lengths.size
        pieces_before = np.concatenate(([0], np.cumsum(lengths)))  # (W+1,) pieces before word w
        segment = np.cumsum(segment_start) - 1  # (W,) segment index of each word
        next_segment = np.flatnonzero(segment_start)  # (S,) first word of each segment
        next_segment[:-1] = next_segment[1:]
        next_segment[-1] = n_words
        segment_end = next_segment[segment]  # (W,) one past the last word of the word's segment
        before, seg_end, seg_first = pieces_before.tolist(), segment_end.tolist(), segment_start.tolist()
        blocked = [False] * n_words  # chosen words and their neighbours
        span_of_word = np.full(n_words, -1, dtype=np.int64)
        n_spans, remaining, max_length = 0, budget, self.config.max_span_length
        p = self.config.span_geometric_p
        uniforms: list[float] = []
        while remaining > 0 and max_length > 0:
            if len(uniforms) < 2 * _SPAN_TRIES + 2:
                uniforms += rng.random(64).tolist()
            length = _span_length(uniforms.pop(), p, max_length)
            start = -1
            for _ in range(_SPAN_TRIES):
                s = int(uniforms.pop() * n_words)
                e = s + length
                if e <= seg_end[s] and before[e] - before[s] <= remaining and not any(blocked[s:e]):
                    start = s
                    break
            if start < 0:
                word = np.arange(n_words)
                taken = np.array(blocked)
                next_blocked = np.minimum.accumulate(np.where(taken, word, n_words)[::-1])[::-1]  # (W,)
                free_run = np.minimum(next_blocked, segment_end) - word  # (W,) free words from w on
                pieces = pieces_before[np.minimum(word + length, n_words)] - pieces_before[:-1]  # (W,)
                fits = np.flatnonzero((free_run >= length) & (pieces <= remaining))
                if fits.size == 0:  # no room for this length, hence for any longer one: draw shorter
                    max_length = length - 1
                    continue
                start = int(fits[int(uniforms.pop() * fits.size)])
            end = start + length
            span_of_word[start:end] = n_spans
            blocked[start:end] = [True] * length
            if not seg_first[start]:
                blocked[start - 1] = True
            if end < seg_end[start]:
                blocked[end] = True
            n_spans += 1
            remaining -= before[end] - before[start]
        return span_of_word, n_spans


def sample_span_lengths(rng: np.random.Generator, p: float, max_length: int, size: int) -> np.ndarray:
    """(size,) int64 span lengths from Geometric(p) truncated to 1..max_length (renormalised).

    Inverse CDF: P(L <= l) = (1 - q^l) / (1 - q^max_length) with q = 1 - p.
    """
    if p >= 1.0 or max_length == 1:
        return np.ones(size, dtype=np.int64)
    q = 1.0 - p
    u = rng.random(size)
    lengths = 1 + np.floor(np.log1p(-u * (1.0 - q**max_length)) / math.log(q)).astype(np.int64)
    return np.minimum(lengths, max_length)


def _span_length(u: float, p: float, max_length: int) -> int:
    """`sample_span_lengths` for one uniform number u in [0, 1), in plain Python (the loop's hot path)."""
    if p >= 1.0 or max_length == 1:
        return 1
    q = 1.0 - p
    return min(max_length, 1 + math.floor(math.log1p(-u * (1.0 - q**max_length)) / math.log(q)))


def span_length_mean(p: float, max_length: int) -> float:
    """Mean of Geometric(p) truncated to 1..max_length (3.8 for SpanBERT's p=0.2, max 10)."""
    weights = [p * (1 - p) ** (length - 1) for length in range(1, max_length + 1)]
    return sum(length * w for length, w in enumerate(weights, start=1)) / sum(weights)


# ---------------------------------------------------------------------- word boundaries


def word_starts(tokenizer: Any) -> np.ndarray:
    """(V,) bool: True when a token id begins a new word (see `word_boundaries` for the rules).

    Raises BertkitError for a BPE that marks word *ends* ("</w>"): use `word_boundaries`
    (or `Masker.from_tokenizer`), which returns the ends as well.
    """
    starts, ends = word_boundaries(tokenizer)
    if ends is not None:
        raise BertkitError(
            "this BPE tokenizer marks word ends (end-of-word suffix), not starts: use "
            "word_boundaries(tokenizer) or Masker.from_tokenizer, which handle both"
        )
    return starts


def word_boundaries(tokenizer: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(starts (V,) bool, ends (V,) bool or None) from a bertkit Tokenizer's vocabulary.

    - WordPiece: a token with the continuation prefix ("##") continues a word, others start one.
    - Byte-level BPE (RoBERTa/GPT-2): a token beginning with "Ġ" (a space) starts a word,
      others continue. Approximation: punctuation glued to a word ("word," -> "word", ",")
      counts as part of it, and a text's first word has no "Ġ" without add_prefix_space
      (it still starts a word, as anything right after a special token or at position 0 does).
    - Metaspace (SentencePiece Unigram/BPE): "▁" starts a word, as byte-level.
    - BPE with a continuation prefix: as WordPiece. BPE with an end-of-word suffix ("</w>"):
      no token starts a word by itself; `ends` marks tokens with the suffix, and the token
      after an end starts the next word.
    - WordLevel: every token is a word.
    Special and added tokens are always word starts (and ends).
    """
    vocab = tokenizer.get_vocab()
    size = max(tokenizer.vocab_size, max(vocab.values(), default=-1) + 1)
    tokens = [""] * size
    for token, index in vocab.items():
        tokens[index] = token
    backend = tokenizer.backend
    model = backend.model
    kind = tokenizer.model_type
    spec = json.loads(backend.to_str())
    components = list(pipeline_components(spec.get("pre_tokenizer"))) + list(pipeline_components(spec.get("decoder")))
    component_types = {c.get("type") for c in components}
    prefix = getattr(model, "continuing_subword_prefix", None)
    suffix = getattr(model, "end_of_word_suffix", None)
    ends = None
    if kind == "WordPiece":
        starts = np.array([not t.startswith(prefix or "##") for t in tokens])
    elif "ByteLevel" in component_types and kind != "WordLevel":
        starts = np.array([t.startswith(BYTE_LEVEL_SPACE) for t in tokens])
    elif "Metaspace" in component_types and kind != "WordLevel":
        space = next((c.get("replacement") for c in components if c.get("type") == "Metaspace"), None) or METASPACE
        starts = np.array([t.startswith(space) for t in tokens])
    elif kind == "BPE" and prefix:
        starts = np.array([not t.startswith(prefix) for t in tokens])
    elif kind == "BPE" and suffix:
        starts = np.zeros(size, dtype=bool)
        ends = np.array([t.endswith(suffix) for t in tokens])
    elif kind == "WordLevel":
        starts = np.ones(size, dtype=bool)
    else:
        raise BertkitError(
            f"cannot tell where words start in this {kind} tokenizer (no '##' prefix, 'Ġ'/'▁' space "
            "symbol or '</w>' suffix): use strategy='token'"
        )
    whole = list(backend.get_added_tokens_decoder()) + list(tokenizer.all_special_ids)
    starts[whole] = True
    if ends is not None:
        ends[whole] = True
    return starts, ends


# ---------------------------------------------------------------------- validation


def _check_fraction(name: str, value: Any, *, open_low: bool = False) -> None:
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not number or not (0 < value <= 1 if open_low else 0 <= value <= 1):
        interval = "(0, 1]" if open_low else "[0, 1]"
        raise ConfigError(f"{name}={value!r} must be a number in {interval}")


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name}={value!r} must be a positive integer")


def _boundary_array(name: str, value: Any, vocab_size: int) -> np.ndarray:
    array = np.asarray(value)
    if array.shape != (vocab_size,):
        raise ConfigError(f"{name} must have shape ({vocab_size},) (one flag per token id), got {array.shape}")
    return array.astype(bool)
