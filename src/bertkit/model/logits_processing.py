"""The score rules of generation, each a small function on one step's scores.

Every function takes `scores` (N, V) float32 — N hypotheses, V the vocabulary — and
returns new scores with the excluded tokens at -inf. They are vectorized over N: no
Python loop over hypotheses, so a step costs the same few kernels at any batch size.
The rules and their order are transformers' (`generation/logits_process.py`), so
greedy and beam outputs match its `generate`:

  1. `penalize_repetitions` repetition_penalty: tokens already in the hypothesis less likely
  2. `ban_repeated_ngrams`  no_repeat_ngram_size: an n-gram may occur once per hypothesis
  3. `ban_eos`              min_new_tokens: no EOS before that many new tokens
  4. `force_token`          forced_bos_token_id as the first new token, forced_eos_token_id
                            as the last one max_length allows (BART's config sets both)
  then, when sampling only:
  5. `scale_temperature`    scores / temperature
  6. `keep_top_k`           the k best tokens
  7. `keep_top_p`           the smallest set of best tokens whose probability reaches p
"""

from __future__ import annotations

import torch


def penalize_repetitions(scores: torch.Tensor, tokens: torch.Tensor, penalty: float,
                         counted: torch.Tensor | None = None) -> torch.Tensor:
    """Every token that occurs in its hypothesis made less likely (penalty > 1): its score
    divided by `penalty` when positive, multiplied when negative (CTRL's rule, transformers').

    tokens: (N, L) the hypothesis so far, prompt included; counted: (N, L) bool, the
    positions that count (False: the prompt's padding, as transformers skips it)."""
    vocab = scores.shape[-1]
    if counted is not None and not bool(counted.all()):
        tokens = tokens.masked_fill(~counted, vocab)  # a column past the vocabulary, dropped below
        scores = torch.cat((scores, scores.new_zeros(scores.shape[0], 1)), dim=1)
    seen = scores.gather(1, tokens)
    seen = torch.where(seen < 0, seen * penalty, seen / penalty)
    return scores.scatter(1, tokens, seen)[:, :vocab]


def ban_repeated_ngrams(scores: torch.Tensor, tokens: torch.Tensor, n: int,
                        counted: torch.Tensor | None = None) -> torch.Tensor:
    """Ban every token that would complete an n-gram already in its hypothesis.

    tokens: (N, L) the decoder tokens so far (the start token included, as transformers
    counts them); counted: (N, L) bool, the positions that are the row's (False: padding
    that aligns rows of different lengths; None: all). The last n-1 tokens are compared
    with every window of the hypothesis; the token that followed each matching window is banned."""
    length = tokens.shape[1]
    if length < n:  # not one complete n-gram yet
        return scores
    windows = tokens.unfold(1, n, 1)  # (N, L-n+1, n)
    prefix = tokens[:, length - n + 1:]  # (N, n-1); empty for n = 1: every seen token is banned
    matches = (windows[:, :, :-1] == prefix[:, None, :]).all(dim=-1)  # (N, L-n+1)
    if counted is not None:  # a window over padding is no n-gram of the row's
        matches &= counted.unfold(1, n, 1).all(dim=-1)
    # scatter_add, not scatter: a token may follow both a matching and a non-matching window
    hits = torch.zeros_like(scores).scatter_add_(1, windows[:, :, -1], matches.to(scores.dtype))
    return scores.masked_fill(hits > 0, float("-inf"))


def ban_eos(scores: torch.Tensor, eos_token_ids: torch.Tensor) -> torch.Tensor:
    """EOS impossible (min_new_tokens not reached yet). eos_token_ids: (E,) long."""
    scores = scores.clone()
    scores[:, eos_token_ids] = float("-inf")
    return scores


def force_token(scores: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """Only `token_ids` (E,) long possible, at score 0 (transformers' forced BOS / EOS rules)."""
    forced = torch.full_like(scores, float("-inf"))
    forced[:, token_ids] = 0.0
    return forced


def scale_temperature(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sharper (< 1) or flatter (> 1) distribution: scores / temperature."""
    return scores / temperature


def keep_top_k(scores: torch.Tensor, k: int, min_keep: int = 1) -> torch.Tensor:
    """Only the k highest-scoring tokens (ties with the k-th kept too); at least min_keep."""
    k = min(max(k, min_keep), scores.shape[-1])
    kth_best = torch.topk(scores, k, dim=-1).values[:, -1:]  # (N, 1)
    return scores.masked_fill(scores < kth_best, float("-inf"))


def keep_top_p(scores: torch.Tensor, p: float, min_keep: int = 1) -> torch.Tensor:
    """Nucleus: drop the least likely tokens whose probabilities sum to at most 1 - p
    (so the kept ones reach p); the min_keep most likely are always kept."""
    ascending, order = torch.sort(scores, dim=-1)
    mass_below = ascending.softmax(dim=-1).cumsum(dim=-1)  # probability of this token and all less likely ones
    drop_sorted = mass_below <= 1 - p
    drop_sorted[:, -min_keep:] = False
    drop = drop_sorted.scatter(1, order, drop_sorted)
    return scores.masked_fill(drop, float("-inf"))
