"""One decoding step, whoever schedules the rows: choose each row's token, record it, say which rows stopped.

    result = decode_step(steps, [RowGroup(settings, generator=g)])   # steps: bertkit.model.decoding
    result.chosen        # (N,) long: the tokens recorded (steps.append)
    result.eos           # (N,) bool: rows whose token is an EOS
    result.stopped       # (N,) bool: rows whose text now holds a stop string (None: no stop strings)

`generate`'s greedy / sampling loop (bertkit.model.generation: rows run to the end, each
finished row filled with the pad token) and the server's continuous batching
(bertkit.serving.generation: rows join and leave between steps) both call `decode_step`;
beam search, which chooses among beams instead, shares `process_scores`. Rows are grouped
by how they choose (`RowGroup`: settings, sampling generator, stop strings); each group's
score rules run once over its rows (bertkit.model.logits_processing, vectorized), the rules
that depend on a row's length (min_new_tokens, forced BOS / EOS) on the rows they apply to.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import torch

from bertkit.errors import ConfigError
from bertkit.model import logits_processing as rules


class StopStrings:
    """`stop_strings`: a row ends when the text of its last tokens comes to contain one of
    them, overlapping the newest token (transformers' StopStringCriteria: a stop string
    already in the prompt does not end anything)."""

    def __init__(self, strings: str | list[str], tokenizer: Any, decode: Any = None):
        strings = [strings] if isinstance(strings, str) else list(strings)
        if not strings or not all(isinstance(s, str) and s for s in strings):
            raise ConfigError(f"stop_strings: must be non-empty strings, got {strings!r}")
        if tokenizer is None or not hasattr(tokenizer, "decode"):
            raise ConfigError("stop_strings: needs tokenizer= (the stop strings are matched in decoded text)")
        self.strings, self.tokenizer = strings, tokenizer
        # the text the stop strings are matched in: `generate`'s decoded text, or the caller's (the
        # server's visible text keeps sentinels, which the plain decode drops)
        self.decode = decode or tokenizer.decode
        self.window = 4 * max(len(s) for s in strings) + 1  # tokens holding any stop string (>= 1 byte a token)

    def completed(self, ids: list[int]) -> bool:
        """Whether the newest of `ids` (a row's last `window` tokens) completes a stop string."""
        before, now = self.decode(ids[:-1]), self.decode(ids)
        return any(s in now[max(0, len(before) - len(s) + 1):] for s in self.strings)


@dataclass(frozen=True)
class RowGroup:
    """Rows that choose alike: `settings` (GenerationSettings), sampling's `generator`
    (None: torch's global RNG), `stops` (StopStrings or None); rows: their indices, None: all."""

    settings: Any
    rows: list[int] | None = None
    generator: torch.Generator | None = None
    stops: StopStrings | None = None


@dataclass
class StepResult:
    chosen: torch.Tensor
    eos: torch.Tensor
    stopped: torch.Tensor | None = None
    logprobs: torch.Tensor | None = None


@functools.lru_cache(maxsize=64)
def _ids_tensor(token_ids: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """(E,) long: token ids (EOS, a forced token), made once per set and device, not per step (read only)."""
    return torch.tensor(token_ids, dtype=torch.long, device=device)


def _rows_where(generated: list[int], test: Callable[[int], bool]) -> list[int] | bool:
    """The rows whose new-token count passes `test`: True (all), False (none) or their indices."""
    hits = [i for i, n in enumerate(generated) if test(n)]
    return True if len(hits) == len(generated) else (hits or False)


def _on_rows(scores: torch.Tensor, rows: list[int] | bool, rule: Callable[[torch.Tensor], torch.Tensor]):
    if rows is True:
        return rule(scores)
    if rows is False:
        return scores
    out = scores.clone()
    out[rows] = rule(scores[rows])
    return out


def process_scores(scores: torch.Tensor, tokens: torch.Tensor, counted: torch.Tensor | None, settings: Any,
                   eos_ids: torch.Tensor, min_keep: int, generated: list[int],
                   ngram_counted: torch.Tensor | None = None) -> torch.Tensor:
    """One step's score rules (bertkit.model.logits_processing) in transformers' order, over
    N rows alike in `settings`. tokens: (N, L) the hypotheses so far, prompt included;
    counted: (N, L) bool, the positions the repetition penalty reads (not padding);
    generated: each row's new tokens so far; ngram_counted: (N, L) bool, the positions
    n-grams may use (None: all); min_keep: tokens the sampling filters keep."""
    if settings.repetition_penalty != 1.0:
        scores = rules.penalize_repetitions(scores, tokens, settings.repetition_penalty, counted)
    if settings.no_repeat_ngram_size:
        scores = rules.ban_repeated_ngrams(scores, tokens, settings.no_repeat_ngram_size, ngram_counted)
    if eos_ids.numel() and settings.min_new_tokens:
        scores = _on_rows(scores, _rows_where(generated, lambda n: n < settings.min_new_tokens),
                          lambda s: rules.ban_eos(s, eos_ids))
    if settings.forced_bos_token_id is not None:
        forced = _ids_tensor((settings.forced_bos_token_id,), scores.device)
        scores = _on_rows(scores, _rows_where(generated, lambda n: n == 0), lambda s: rules.force_token(s, forced))
    if settings.forced_eos_token_ids:
        forced = _ids_tensor(tuple(settings.forced_eos_token_ids), scores.device)
        scores = _on_rows(scores, _rows_where(generated, lambda n: n == settings.max_new_tokens - 1),
                          lambda s: rules.force_token(s, forced))
    if settings.do_sample:
        if settings.temperature != 1.0:
            scores = rules.scale_temperature(scores, settings.temperature)
        if settings.top_k:
            scores = rules.keep_top_k(scores, settings.top_k, min_keep)
        if settings.top_p < 1.0:
            scores = rules.keep_top_p(scores, settings.top_p, min_keep)
    return scores


def decode_step(steps: Any, groups: list[RowGroup], running: torch.Tensor | None = None,
                logprobs: bool = False) -> StepResult:
    """Run the model one step over `steps`' rows, choose each row's token by its group
    (argmax, or a draw when sampling), record the tokens (`steps.append`) and say which rows
    stopped. running: (N,) bool, None: all; a row not running gets its fill token (pad) and
    no stop check. logprobs: also each chosen token's log-probability under the rules."""
    scores = steps.next_logits()
    tokens = steps.token_ids
    ruled = any(g.settings.repetition_penalty != 1.0 or g.settings.no_repeat_ngram_size for g in groups)
    counted = steps.self_mask.bool() if ruled else None  # only the history rules read it
    ngram_counted = counted if steps.padded and not steps.input_padding else None  # alignment padding
    whole = len(groups) == 1 and groups[0].rows is None
    chosen = None if whole else torch.empty(scores.shape[0], dtype=torch.long, device=scores.device)
    eos = None if whole else torch.zeros(scores.shape[0], dtype=torch.bool, device=scores.device)
    picked_logprobs = None if whole or not logprobs else torch.empty(scores.shape[0], device=scores.device)
    for group in groups:
        settings, index = group.settings, group.rows
        eos_ids = _ids_tensor(settings.eos_token_ids, scores.device)
        if index is None:
            own = process_scores(scores, tokens, counted, settings, eos_ids, 1, steps.generated, ngram_counted)
        else:
            rows = torch.tensor(index, dtype=torch.long, device=scores.device)
            own = process_scores(scores[rows], tokens[rows], None if counted is None else counted[rows], settings,
                                 eos_ids, 1, [steps.generated[i] for i in index],
                                 None if ngram_counted is None else ngram_counted[rows])
        if settings.do_sample:
            picks = torch.multinomial(own.softmax(dim=-1), 1, generator=group.generator).squeeze(1)
        else:
            picks = own.argmax(dim=-1)
        if running is not None:
            picks = torch.where(running if index is None else running[rows], picks, settings.fill_token_id)
        ends = torch.isin(picks, eos_ids)
        own_logprobs = own.log_softmax(dim=-1).gather(1, picks[:, None])[:, 0] if logprobs else None
        if index is None:
            chosen, eos, picked_logprobs = picks, ends, own_logprobs
        else:
            chosen[rows], eos[rows] = picks, ends
            if logprobs:
                picked_logprobs[rows] = own_logprobs
    steps.append(chosen)
    return StepResult(chosen, eos, _stopped(steps, groups, running, eos), picked_logprobs)


def _stopped(steps: Any, groups: list[RowGroup], running: torch.Tensor | None, eos: torch.Tensor
             ) -> torch.Tensor | None:
    """(N,) bool: the rows, still running and not ended by EOS, whose newest token completes
    one of their group's stop strings; None when no group has stop strings."""
    if all(group.stops is None for group in groups):
        return None
    live = ~eos if running is None else running & ~eos
    live = live.tolist()
    hits = torch.zeros_like(eos)
    for group in groups:
        if group.stops is not None:
            for row in (range(steps.rows) if group.rows is None else group.rows):
                if live[row] and group.stops.completed(steps.tokens(row, last=group.stops.window)):
                    hits[row] = True
    return hits
