"""BART's noising functions (Lewis et al. 2019), as fairseq's `DenoisingDataset` defines them.

Pure functions of int64 token arrays and an explicit `numpy.random.Generator`. A document
is `<s> text </s>` (a packed instance: its first token BOS, its last EOS); every function
leaves those two in place and takes its candidates from the tokens between them.

  permute_sentences   shuffle a share `p` of the sentences (fairseq's: ceil(n * p) of the n
                      sentences, chosen at random, exchange places among themselves)
  infill / mask       `mask_ratio` of the candidate tokens, in spans whose lengths are drawn
                      from Poisson(lambda) until they cover that many (the last one cut to
                      fit), each starting at a candidate drawn uniformly (spans may overlap,
                      as fairseq's); `replace_length` 1: a span becomes one <mask> (text
                      infilling), 0: it is deleted, -1: each of its tokens becomes <mask>.
                      A zero-length span inserts one <mask>. Span lengths of 1 throughout
                      (`span_lengths=None`) is token masking. A share `mask_random` of the
                      spans get a random token instead of <mask>.
  insert_noise        `ceil(n * p)` new tokens at random places (fairseq's insertion)
  rotate              the document rotated to start at a random token (BOS / EOS kept)

A span never crosses a token that is not a candidate (a document break `</s>` inside a
packed instance): it stops there. The target of every function is the clean document.
"""

from __future__ import annotations

import math

import numpy as np

MAX_SPAN_LENGTH = 128  # fairseq's Poisson table covers lengths 0..127 (a draw above is as rare as never)


def full_stop_ids(tokens: list[str]) -> np.ndarray:
    """(K,) int64: ids of the vocabulary tokens `tokens` (id order, decoded text) that end a sentence:
    their text, stripped, ends in . ! ? … or a CJK full stop."""
    ends = (".", "!", "?", "…", "。", "！", "？")
    return np.array([i for i, text in enumerate(tokens) if text.strip().endswith(ends)], dtype=np.int64)


def sentence_bounds(tokens: np.ndarray, is_full_stop: np.ndarray) -> np.ndarray:
    """(S + 1,) int64 starts of the sentences of tokens[1:-1] (positions in `tokens`), then the
    end: a sentence ends after a run of full-stop tokens (`is_full_stop` (L,) bool); the text
    after the last full stop is the last sentence."""
    inner = is_full_stop[1:-1]
    run_end = inner & ~np.concatenate([inner[1:], [False]])  # the last full stop of each run
    starts = np.concatenate([[1], np.flatnonzero(run_end) + 2])  # +1: position in tokens, +1: after it
    starts = starts[starts < len(tokens) - 1]
    return np.concatenate([starts, [len(tokens) - 1]]).astype(np.int64)


def permute_sentences(tokens: np.ndarray, bounds: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """`tokens` with ceil(S * p) of its S sentences (`bounds`: sentence_bounds) shuffled among
    their own places; one sentence: unchanged."""
    count = len(bounds) - 1
    chosen_count = math.ceil(count * p)
    if count < 2 or chosen_count < 2:
        return tokens.copy()
    chosen = rng.permutation(count)[:chosen_count]
    order = np.arange(count)
    order[chosen] = chosen[rng.permutation(chosen_count)]
    pieces = [tokens[:1]] + [tokens[bounds[i]:bounds[i + 1]] for i in order] + [tokens[-1:]]
    return np.concatenate(pieces)


def poisson_span_lengths(budget: int, lam: float, rng: np.random.Generator) -> np.ndarray:
    """Span lengths from Poisson(lam) (at most MAX_SPAN_LENGTH - 1), drawn in rounds of `budget`
    until they sum to at least `budget`, cut after the first that reaches it and that one
    shortened to make the sum exactly `budget` (fairseq's). Zero lengths included (insertions)."""
    lengths = np.zeros(0, dtype=np.int64)
    while lengths.sum() < budget:
        draws = np.minimum(rng.poisson(lam, size=budget), MAX_SPAN_LENGTH - 1)
        lengths = np.concatenate([lengths, draws])
    cumulative = np.cumsum(lengths)
    last = int(np.searchsorted(cumulative, budget))  # the first span whose cumulative sum reaches the budget
    lengths = lengths[:last + 1].copy()
    lengths[last] = budget - (cumulative[last - 1] if last else 0)
    return lengths


def mask_spans(tokens: np.ndarray, candidates: np.ndarray, mask_ratio: float, span_lengths_from, mask_id: int,
               mask_random: float, random_ids: np.ndarray, replace_length: int,
               rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(noised tokens, inserted masks): text infilling or token masking (module docstring).

    candidates: (L,) bool, the tokens a span may start at and cover; span_lengths_from:
    budget -> lengths (e.g. poisson_span_lengths), None for spans of one token; random_ids:
    the ids a random replacement is drawn from. Zero-length spans are returned as a count
    of masks to insert (`insert_noise` places them, as fairseq does after masking)."""
    budget = math.ceil(int(candidates.sum()) * mask_ratio)
    if budget == 0:
        return tokens.copy(), 0
    lengths = np.ones(budget, dtype=np.int64) if span_lengths_from is None else span_lengths_from(budget, rng=rng)
    inserts = int((lengths == 0).sum())
    lengths = lengths[lengths > 0]
    positions = np.flatnonzero(candidates)
    starts = positions[rng.permutation(len(positions))[:len(lengths)]]
    randomized = rng.random(len(starts)) < mask_random
    out = tokens.copy()
    keep = np.ones(len(tokens), dtype=bool)
    covered = np.zeros(len(tokens), dtype=bool)
    for start, length, is_random in zip(starts, lengths, randomized):
        stop = start
        while stop < len(tokens) and stop - start < length and candidates[stop]:
            stop += 1  # the span: [start, stop), never past a non-candidate
        covered[start:stop] = True
        replacement = rng.choice(random_ids) if is_random else mask_id
        if replace_length == 0:
            keep[start:stop] = False
        elif replace_length == 1:
            out[start] = replacement
            keep[start + 1:stop] = False
        else:
            out[start:stop] = replacement
    # a later span may start inside an earlier one's deleted tokens (overlap): it is deleted with them
    return out[keep], inserts


def insert_noise(tokens: np.ndarray, count: int, mask_id: int, mask_random: float, random_ids: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """`count` new tokens at distinct random places between BOS and EOS: ceil(count * mask_random)
    of them random ids, the rest <mask> (fairseq's add_insertion_noise)."""
    if count == 0:
        return tokens.copy()
    length = len(tokens) + count
    places = rng.permutation(length - 2)[:count] + 1  # never before BOS or after EOS
    out = np.full(length, -1, dtype=np.int64)
    num_random = math.ceil(count * mask_random)
    out[places[num_random:]] = mask_id
    out[places[:num_random]] = rng.choice(random_ids, size=num_random)
    out[out == -1] = tokens
    return out


def rotate(tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """BOS, the text rotated to start at a random token of it, EOS (fairseq's add_rolling_noise)."""
    offset = int(rng.integers(1, max(1, len(tokens) - 1) + 1))
    return np.concatenate([tokens[:1], tokens[offset:-1], tokens[1:offset], tokens[-1:]])
