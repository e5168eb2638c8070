"""T5's span corruption as pure functions: the noise mask's rates and span lengths (statistically,
over 100k+ tokens), the exact reconstruction of the text from inputs + targets, and the raw
chunk length against a direct re-implementation of T5's `random_spans_helper`."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from scipy import stats

from bertkit.objectives.t5 import (
    input_and_target_lengths,
    noise_counts,
    random_segmentation,
    random_spans_noise_mask,
    span_corrupt,
)

SENTINELS = np.arange(999, 899, -1)  # <extra_id_k> = 999 - k: from the top of a 1000-token vocabulary down
EOS = 1


def runs(mask: np.ndarray) -> list[tuple[bool, int]]:
    """(value, length) of each maximal run of `mask`, in order."""
    edges = np.flatnonzero(np.diff(mask.astype(np.int8))) + 1
    return [(bool(part[0]), len(part)) for part in np.split(mask, edges)]


def t5_random_spans_helper(inputs_length, noise_density, mean_noise_span_length,
                           extra_tokens_per_span_inputs=1, extra_tokens_per_span_targets=1):
    """T5's t5/data/preprocessors.py `random_spans_helper`, re-implemented line by line."""

    def _tokens_length_to_inputs_length_targets_length(tokens_length):
        num_noise_tokens = int(round(tokens_length * noise_density))
        num_nonnoise_tokens = tokens_length - num_noise_tokens
        num_noise_spans = int(round(num_noise_tokens / mean_noise_span_length))
        return (num_nonnoise_tokens + num_noise_spans * extra_tokens_per_span_inputs + 1,
                num_noise_tokens + num_noise_spans * extra_tokens_per_span_targets + 1)

    tokens_length = inputs_length - 1
    while _tokens_length_to_inputs_length_targets_length(tokens_length + 1)[0] <= inputs_length:
        tokens_length += 1
    inputs_length, targets_length = _tokens_length_to_inputs_length_targets_length(tokens_length)
    if noise_density == 0.5 and targets_length > inputs_length:
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


def test_128_positions_read_141_raw_tokens_and_29_targets():
    assert input_and_target_lengths(128, 0.15, 3.0) == (141, 29)
    assert input_and_target_lengths(512, 0.15, 3.0) == (568, 114)


@pytest.mark.parametrize("max_seq_length", [32, 64, 100, 128, 256, 384, 512, 1024])
@pytest.mark.parametrize("density, mean", [(0.15, 3.0), (0.3, 8.0), (0.5, 3.0)])
def test_lengths_equal_t5s_helper_and_fill_the_input_exactly(max_seq_length, density, mean):
    raw, targets = input_and_target_lengths(max_seq_length, density, mean)
    assert (raw, targets) == t5_random_spans_helper(max_seq_length, density, mean)
    mask = random_spans_noise_mask(raw, density, mean, np.random.default_rng(0))
    inputs, labels = span_corrupt(np.arange(2, raw + 2), mask, np.arange(5000, 4000, -1), EOS)
    assert len(labels) == targets
    if not (density == 0.5 and len(inputs) < max_seq_length):  # T5's 0.5 tweak gives up one input position
        assert len(inputs) == max_seq_length


def test_noise_counts_fixed_per_sequence_with_t5s_floors():
    assert noise_counts(141, 0.15, 3.0) == (21, 7)
    assert noise_counts(2, 0.15, 3.0) == (1, 1)  # at least one noise token and one span
    assert noise_counts(10, 0.95, 3.0) == (9, 3)  # at least one non-noise token
    rng = np.random.default_rng(3)
    for length in (1, 2, 5, 141, 300):
        mask = random_spans_noise_mask(length, 0.15, 3.0, rng)
        assert mask.shape == (length,) and mask.dtype == bool
        if length >= 2:
            noise, spans = noise_counts(length, 0.15, 3.0)
            assert mask.sum() == noise and sum(value for value, _ in runs(mask)) == spans


def test_spans_alternate_starting_with_non_noise_and_ending_in_noise():
    rng = np.random.default_rng(0)
    for length in range(20, 400, 7):
        parts = runs(random_spans_noise_mask(length, 0.15, 3.0, rng))
        assert [value for value, _ in parts] == [False, True] * (len(parts) // 2)


def test_density_and_mean_span_length_over_many_tokens():
    """Sequences of varied lengths, 200k+ tokens: the noise share is 0.15 and the mean noise span 3
    (both to within rounding, whose errors average out), and the span lengths follow the
    distribution of a uniform random composition: chi-square at the 0.1% level."""
    rng = np.random.default_rng(1234)
    lengths = rng.integers(60, 400, size=1000)
    noise_spans, nonnoise_spans, noise = [], [], 0
    for length in lengths:
        mask = random_spans_noise_mask(int(length), 0.15, 3.0, rng)
        noise += int(mask.sum())
        for value, size in runs(mask):
            (noise_spans if value else nonnoise_spans).append(size)
    assert lengths.sum() > 200_000
    assert abs(noise / lengths.sum() - 0.15) < 0.002
    assert abs(np.mean(noise_spans) - 3.0) < 0.05


@pytest.mark.parametrize("items, segments", [(21, 7), (120, 7), (30, 3)])
def test_segment_lengths_follow_the_uniform_composition(items, segments):
    """Cutting `items` into `segments` at uniformly chosen distinct cut points: a given segment has
    length k with probability C(items - k - 1, segments - 2) / C(items - 1, segments - 1)."""
    rng = np.random.default_rng(items * 1000 + segments)
    draws = 150_000 // items
    counts = np.bincount(np.concatenate([random_segmentation(items, segments, rng) for _ in range(draws)]),
                         minlength=items - segments + 2)[1:]
    assert counts.sum() == draws * segments
    expected = np.array([comb(items - k - 1, segments - 2) / comb(items - 1, segments - 1)
                         for k in range(1, items - segments + 2)]) * draws * segments
    assert expected.sum() == pytest.approx(draws * segments)
    keep = expected >= 5  # pool the sparse tail into one bin
    observed, wanted = counts[keep], expected[keep]
    if not keep.all():
        observed, wanted = np.append(observed, counts[~keep].sum()), np.append(wanted, expected[~keep].sum())
    assert stats.chisquare(observed, wanted).pvalue > 1e-3


def reconstruct(inputs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The text back from a corrupted pair: each input sentinel replaced by the tokens after it in the labels."""
    assert inputs[-1] == EOS and labels[-1] == EOS
    spans: dict[int, list[int]] = {}
    current = None
    for token in labels[:-1].tolist():
        if token in SENTINELS:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    out = []
    for token in inputs[:-1].tolist():
        out.extend(spans.pop(token) if token in SENTINELS else [token])
    assert not spans
    return np.array(out)


def test_inputs_and_targets_reconstruct_the_text_exactly():
    rng = np.random.default_rng(7)
    for length in [*range(2, 40), 141, 300, 568]:
        tokens = rng.integers(2, 800, size=length)
        mask = random_spans_noise_mask(length, 0.15, 3.0, rng)
        inputs, labels = span_corrupt(tokens, mask, SENTINELS, EOS)
        np.testing.assert_array_equal(reconstruct(inputs, labels), tokens)
        num_spans = sum(value for value, _ in runs(mask))
        assert inputs.dtype == labels.dtype == np.int64
        assert list(inputs[np.isin(inputs, SENTINELS)]) == list(SENTINELS[:num_spans])  # <extra_id_0> first
        assert list(labels[np.isin(labels, SENTINELS)]) == list(SENTINELS[:num_spans])


def test_a_worked_example():
    """The docs' example: positions 2-3 and 7 of ten tokens are noise."""
    tokens = np.arange(10, 20)
    mask = np.zeros(10, dtype=bool)
    mask[[2, 3, 7]] = True
    inputs, labels = span_corrupt(tokens, mask, SENTINELS, EOS)
    assert inputs.tolist() == [10, 11, 999, 14, 15, 16, 998, 18, 19, EOS]
    assert labels.tolist() == [999, 12, 13, 998, 17, 997, EOS]
