"""XLNet's partial prediction for one example: which tokens to predict, in which order, who sees whom.

Pure numpy with an explicit `np.random.Generator` (bertkit.data.masking.example_rng), after
the original pre-processing (zihangdai/xlnet `data_utils.py`: `_sample_mask`, `_local_perm`).

Targets (`sample_targets`). A goal of `goal` tokens. Walking left to right from `cursor`
0: draw n in 1..max_gram with P(n) ∝ 1/n (capped at what is left of the goal), a context
of `n * context_ratio` tokens split at random into a left part l and a right part r; the
span begins at the first word start at or after cursor + l and covers n whole words
(never across a special token); the cursor moves to the span's end + r. A span longer
than what is left of the goal is cut to the whole words that fit (skipped if its first
word does not). So about one token in (1 + context_ratio) is a span token; then single
tokens drawn uniformly among the rest of the candidates top the count up to the goal.
One deliberate difference: the original's n-gram loop tests the span's *first* piece
for a word start at every step (`seg[beg]`), so its spans are n tokens from a word
start; here they are n whole words, as its comments and the paper describe.

Order (`factorization_ranks`). A factorization order z in which every non-target comes
first and the targets follow in a random order. The non-targets are never predicted, so
among themselves the order does not matter: they form one block at rank 0 that sees
itself whole (bidirectional context, as the original gives them all rank -1); the
targets get the ranks 1..m of a random permutation. (The original also puts <sep> and
<cls> among the targets' ranks without predicting them; here they are context at rank 0.)

The masks follow from the ranks (bertkit.objectives.xlnet `permutation_mask`), in transformers'
`perm_mask` convention, 1 = i may NOT attend to j:
    perm_mask[i, j] = is_target[j] and rank[j] >= rank[i]
so every position sees the non-targets and the targets strictly earlier in the order;
a target does not see itself (the query stream g_i knows only its position); the model
adds the diagonal back for the content stream h_i (which sees x_i), as XLNet does.
"""

from __future__ import annotations

import numpy as np

CONTEXT_RATIO = 6.0  # the original's mask_alpha / mask_beta: a span of n words in a context of 6n tokens


def ngram_probabilities(max_gram: int) -> np.ndarray:
    """(max_gram,) P(n) ∝ 1/n for n = 1..max_gram."""
    weights = 1.0 / np.arange(1, max_gram + 1)
    return weights / weights.sum()


def target_goal(num_tokens: int, num_predict: int, max_seq_length: int, num_candidates: int) -> int:
    """Targets for a sequence of `num_tokens`: num_predict for a full-length one, in proportion
    for a shorter one (rounded half up), at least 1 and at most the candidates."""
    goal = (2 * num_predict * num_tokens + max_seq_length) // (2 * max_seq_length)
    return min(max(goal, 1), num_candidates)


def sample_targets(
    word_starts: np.ndarray,
    candidates: np.ndarray,
    goal: int,
    rng: np.random.Generator,
    max_gram: int = 5,
    context_ratio: float = CONTEXT_RATIO,
) -> np.ndarray:
    """(T,) bool targets: `goal` of the `candidates` positions (see the module docstring):
    the spans of `sample_spans`, then single tokens drawn uniformly among the other candidates.

    word_starts: (T,) bool, True where a word begins (a special token's neighbour included);
    candidates: (T,) bool, the positions that may be predicted (not <sep>, <cls>, padding).
    """
    targets = np.zeros(len(candidates), dtype=bool)
    goal = min(goal, int(candidates.sum()))
    for begin, end in sample_spans(word_starts, candidates, goal, rng, max_gram, context_ratio):
        targets[begin:end] = True
    missing = goal - int(targets.sum())
    if missing > 0:
        free = np.flatnonzero(candidates & ~targets)
        targets[rng.choice(free, size=missing, replace=False)] = True
    return targets


def sample_spans(
    word_starts: np.ndarray,
    candidates: np.ndarray,
    goal: int,
    rng: np.random.Generator,
    max_gram: int = 5,
    context_ratio: float = CONTEXT_RATIO,
) -> list[tuple[int, int]]:
    """The n-gram spans [begin, end) of whole words, left to right, at most `goal` tokens in all."""
    seq_len = len(candidates)
    starts = word_starts & candidates
    probabilities = ngram_probabilities(max_gram)
    spans: list[tuple[int, int]] = []
    count, cursor = 0, 0
    while cursor < seq_len and count < goal:
        n = min(int(rng.choice(max_gram, p=probabilities)) + 1, goal - count)
        context = int(n * context_ratio)
        left = int(rng.integers(context)) if context > 0 else 0
        begin = cursor + left
        while begin < seq_len and not starts[begin]:
            begin += 1
        if begin >= seq_len:
            break
        end, words, fitting_end = begin + 1, 1, None  # fitting_end: the last word boundary within the goal
        while end < seq_len and candidates[end]:
            if starts[end]:
                if end - begin <= goal - count:
                    fitting_end = end
                words += 1
                if words > n:
                    break
            end += 1
        if end - begin <= goal - count:
            fitting_end = end
        if fitting_end is not None:
            spans.append((begin, fitting_end))
            count += fitting_end - begin
        cursor = end + context - left
    return spans


def factorization_ranks(targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(T,) int64 rank in the factorization order: 0 for every non-target, the targets 1..m in random order."""
    ranks = np.zeros(len(targets), dtype=np.int64)
    positions = np.flatnonzero(targets)
    ranks[positions] = rng.permutation(len(positions)) + 1
    return ranks
