"""XLNet's targets and factorization order (bertkit.data.permutation) against the original's
rules, statistically over 100k+ tokens: spans of 1..5 whole words with P(n) ∝ 1/n, about one
token in 7 a span token (a span of n words in a context of 6n), exactly `goal` targets
after the top-up, never a special token, and a uniformly random order of the targets."""

from __future__ import annotations

import numpy as np
from scipy.stats import binomtest, chisquare

from bertkit.data.permutation import (
    factorization_ranks,
    ngram_probabilities,
    sample_spans,
    sample_targets,
    target_goal,
)


def words_of(lengths: np.ndarray) -> np.ndarray:
    """(T,) word starts for consecutive words of the given token lengths."""
    starts = np.zeros(int(lengths.sum()), dtype=bool)
    starts[np.concatenate([[0], np.cumsum(lengths)[:-1]])] = True
    return starts


def span_words(spans, starts: np.ndarray) -> np.ndarray:
    return np.array([int(starts[begin:end].sum()) for begin, end in spans])


def test_span_lengths_follow_one_over_n_in_words():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 4, size=60_000)  # words of 1-3 tokens: ~120k tokens
    starts = words_of(lengths)
    candidates = np.ones(len(starts), dtype=bool)
    spans = sample_spans(starts, candidates, goal=len(starts), rng=rng)  # a goal never reached: no capping
    for begin, end in spans:
        assert starts[begin] and (end == len(starts) or starts[end])  # whole words
    words = span_words(spans, starts)
    observed = np.bincount(words, minlength=6)[1:]
    assert observed.sum() > 5_000 and words.max() <= 5
    expected = ngram_probabilities(5) * observed.sum()
    assert chisquare(observed, expected).pvalue > 1e-3
    mean_words = (np.arange(1, 6) * ngram_probabilities(5)).sum()
    assert abs(words.mean() - mean_words) < 0.05


def test_one_token_in_seven_is_a_span_token_with_one_token_words():
    """A span of n one-token words takes n + 6n tokens of the walk (the original's mask_alpha=6, mask_beta=1)."""
    rng = np.random.default_rng(4)
    starts = np.ones(140_000, dtype=bool)
    spans = sample_spans(starts, starts, goal=len(starts), rng=rng)
    covered = sum(end - begin for begin, end in spans)
    assert abs(covered / len(starts) - 1 / 7) < 0.003


def test_spans_never_cross_a_special_token_and_respect_the_goal():
    rng = np.random.default_rng(1)
    for _ in range(300):
        lengths = rng.integers(1, 3, size=80)
        starts = words_of(lengths)
        candidates = rng.random(len(starts)) > 0.05  # a few special tokens scattered about
        starts[1:] |= ~candidates[:-1]  # a word begins after a special token
        goal = int(rng.integers(1, 40))
        spans = sample_spans(starts, candidates, goal, rng)
        assert sum(end - begin for begin, end in spans) <= goal
        for begin, end in spans:
            assert candidates[begin:end].all() and starts[begin]
            assert end == len(starts) or starts[end] or not candidates[end]


def test_exactly_the_goal_and_about_a_sixth_of_the_tokens_over_100k_tokens():
    """128-token sequences `A <sep> B <sep> <cls>`: num_predict = round(128 / 6) = 21 targets each."""
    rng = np.random.default_rng(2)
    total_tokens = total_targets = 0
    span_tokens = 0
    for _ in range(800):
        starts = words_of(rng.integers(1, 4, size=128))[:128]
        candidates = np.ones(128, dtype=bool)
        sep = int(rng.integers(20, 100))
        candidates[[sep, 126, 127]] = False  # <sep> inside, <sep> <cls> at the end
        starts[[sep, sep + 1, 126, 127]] = True
        goal = target_goal(128, target_goal(128, 21, 128, 125), 128, int(candidates.sum()))
        assert goal == 21
        targets = sample_targets(starts, candidates, goal, rng)
        assert targets.sum() == 21 and not targets[~candidates].any()
        span_tokens += sum(end - begin for begin, end in sample_spans(starts, candidates, goal, rng))
        total_tokens += 128
        total_targets += int(targets.sum())
    assert total_tokens > 100_000
    assert total_targets / total_tokens == 21 / 128  # round(L / 6) / L, about 1/6
    # the spans give most targets (words of 1-3 tokens fill the goal fast), the top-up the rest
    assert 0.08 < span_tokens / total_tokens <= total_targets / total_tokens


def test_a_short_sequence_gets_its_share():
    assert target_goal(128, 21, 128, 125) == 21
    assert target_goal(64, 21, 128, 61) == 11  # 10.5 rounded half up
    assert target_goal(5, 21, 128, 2) == 1  # at least one
    assert target_goal(128, 21, 128, 7) == 7  # at most the candidates


def test_the_order_of_the_targets_is_uniform():
    """Each of the 3! orders of three targets comes up with probability 1/6; non-targets rank 0."""
    rng = np.random.default_rng(3)
    targets = np.array([False, True, False, True, True, False])
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(6_000):
        ranks = factorization_ranks(targets, rng)
        assert (ranks[~targets] == 0).all() and sorted(ranks[targets]) == [1, 2, 3]
        key = tuple(ranks[targets])
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    assert chisquare(list(counts.values())).pvalue > 1e-3
    first = sum(v for k, v in counts.items() if k[0] == 1)
    assert binomtest(first, 6_000, 1 / 3).pvalue > 1e-3


def test_the_same_generator_state_gives_the_same_targets():
    starts = words_of(np.full(100, 1))
    candidates = np.ones(100, dtype=bool)
    a = sample_targets(starts, candidates, 17, np.random.default_rng([5, 1, 9]))
    b = sample_targets(starts, candidates, 17, np.random.default_rng([5, 1, 9]))
    c = sample_targets(starts, candidates, 17, np.random.default_rng([5, 2, 9]))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
