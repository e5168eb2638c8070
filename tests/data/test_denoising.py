"""BART's noising functions (bertkit.data.denoising) over 100k+ tokens: span lengths are
Poisson(lambda) (chi-square), the budget is exactly ceil(mask_ratio * candidates), the
masked share and the random share within binomial-style bounds, BOS / EOS and
non-candidates survive, permutation keeps every token, one sentence stays as it is."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
from scipy import stats

from bertkit.data.denoising import (full_stop_ids, insert_noise, mask_spans, permute_sentences, poisson_span_lengths,
                                    rotate, sentence_bounds)

BOS, EOS, MASK = 0, 2, 4
RANDOM_IDS = np.arange(1000, 2000)
DOCUMENTS, LENGTH = 400, 300  # 119,200 candidate tokens


def _document(rng: np.random.Generator) -> np.ndarray:
    tokens = rng.integers(100, 900, LENGTH)
    tokens[0], tokens[-1] = BOS, EOS
    return tokens


def test_span_lengths_are_poisson_and_fill_the_budget_exactly():
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(DOCUMENTS):
        budget = math.ceil((LENGTH - 2) * 0.3)
        lengths = poisson_span_lengths(budget, 3.0, rng)
        assert lengths.sum() == budget and (lengths >= 0).all()
        draws.extend(lengths[:-1].tolist())  # the last one is cut to fit the budget
    draws = np.array(draws)
    assert len(draws) > 10_000
    top = 9  # bins 0..8 and >= 9, each expected well over 5 times
    observed = np.bincount(np.minimum(draws, top), minlength=top + 1)
    pmf = stats.poisson.pmf(np.arange(top), 3.0)
    expected = np.append(pmf, 1 - pmf.sum()) * len(draws)
    statistic, p_value = stats.chisquare(observed, expected)
    assert p_value > 0.001, (statistic, observed, expected.round())
    assert abs(draws.mean() - 3.0) < 4 * math.sqrt(3.0 / len(draws))


def test_text_infilling_masks_its_share_keeps_bos_eos_and_randomizes_a_tenth():
    rng = np.random.default_rng(1)
    covered = candidates_total = spans = randomized = 0
    lengths = partial(poisson_span_lengths, lam=3.0)
    for _ in range(DOCUMENTS):
        tokens = _document(rng)
        candidates = np.ones(LENGTH, dtype=bool)
        candidates[[0, -1]] = False
        candidates[150] = False  # a document break: never masked, never crossed
        tokens[150] = EOS
        # replace_length -1 keeps the length, so the masked positions can be counted
        out, inserts = mask_spans(tokens, candidates, 0.3, lengths, MASK, 0.1, RANDOM_IDS, -1, rng)
        assert len(out) == LENGTH and out[0] == BOS and out[-1] == EOS and out[150] == EOS
        changed = out != tokens
        covered += int(changed.sum())
        candidates_total += int(candidates.sum())
        starts = changed & ~np.concatenate([[False], changed[:-1]])
        spans += int(starts.sum())
        randomized += int((starts & (out >= 1000)).sum())
        infilled, _ = mask_spans(tokens, candidates, 0.3, lengths, MASK, 0.0, RANDOM_IDS, 1,
                                 np.random.default_rng(7))
        assert infilled[0] == BOS and infilled[-1] == EOS and len(infilled) < LENGTH
    share = covered / candidates_total
    # fairseq's spans may overlap, so a little under the 30% drawn are distinct tokens
    assert 0.25 < share < 0.30, share
    assert abs(randomized / spans - 0.1) < 4 * math.sqrt(0.09 / spans), (randomized, spans)


def test_zero_length_spans_come_back_as_insertions_and_token_masking_has_no_spans():
    rng = np.random.default_rng(2)
    tokens = _document(rng)
    candidates = np.ones(LENGTH, dtype=bool)
    candidates[[0, -1]] = False
    inserted = 0
    for _ in range(50):
        _, count = mask_spans(tokens, candidates, 0.3, partial(poisson_span_lengths, lam=3.0), MASK, 0.0, RANDOM_IDS,
                              1, rng)
        inserted += count
    assert inserted > 0  # P(0) = e^-3: about 5 per document
    masked, count = mask_spans(tokens, candidates, 0.3, None, MASK, 0.0, RANDOM_IDS, 1, rng)
    assert count == 0 and len(masked) == LENGTH and int((masked == MASK).sum()) == math.ceil(298 * 0.3)
    with_inserts = insert_noise(tokens, 5, MASK, 0.0, RANDOM_IDS, rng)
    assert len(with_inserts) == LENGTH + 5 and (with_inserts == MASK).sum() == 5
    assert with_inserts[0] == BOS and with_inserts[-1] == EOS
    assert np.array_equal(with_inserts[with_inserts != MASK], tokens)


def test_sentence_permutation_keeps_every_sentence_and_a_single_one_in_place():
    full_stops = np.array([7, EOS])  # "." and the document break
    sentences = [np.array([10 + k, 20 + k, 7]) for k in range(6)]
    tokens = np.concatenate([[BOS], *sentences, [EOS]])
    bounds = sentence_bounds(tokens, np.isin(tokens, full_stops))
    assert bounds.tolist() == [1, 4, 7, 10, 13, 16, 19]
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(20):
        out = permute_sentences(tokens, bounds, 1.0, rng)
        assert out[0] == BOS and out[-1] == EOS and sorted(out.tolist()) == sorted(tokens.tolist())
        pieces = {tuple(out[i:i + 3]) for i in range(1, 19, 3)}
        assert pieces == {tuple(s) for s in sentences}
        seen.add(tuple(out))
    assert len(seen) > 10
    one = np.array([BOS, 11, 12, 13, EOS])  # no full stop: one sentence
    assert np.array_equal(permute_sentences(one, sentence_bounds(one, np.isin(one, full_stops)), 1.0, rng), one)
    # text after the last full stop is a sentence of its own
    tail = np.array([BOS, 5, 7, 6, 6, EOS])
    assert sentence_bounds(tail, np.isin(tail, full_stops)).tolist() == [1, 3, 5]


def test_rotation_keeps_bos_and_eos_and_full_stops_from_the_vocabulary():
    rng = np.random.default_rng(4)
    tokens = _document(rng)
    out = rotate(tokens, rng)
    assert out[0] == BOS and out[-1] == EOS and sorted(out.tolist()) == sorted(tokens.tolist())
    assert full_stop_ids(["a", " end.", "?", " x", "다.", "。", "...", "e.g"]).tolist() == [1, 2, 4, 5, 6]
