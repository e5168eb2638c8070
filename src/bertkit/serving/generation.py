"""Generation served with continuous batching: `DecodeLoop`, run by the batching worker.

Each generation request is one `GenerationJob` (its prompt's token ids and its `generate`
settings, both as the model's `resolve_decoding` gives them for that prompt alone, seed, stop
strings, and `emit`: a thread-safe function that hands an event to the waiting coroutine).
The worker thread (bertkit.serving.batching) admits queued requests between decoding steps
— `admit` starts their rows together (the model's `decode_steps`, bertkit.model.decoding:
an encoder-decoder's encoder, a decoder-only model's prompts left-padded) and runs their
first decoding step, then their rows join the running batch — and calls `step` while any
row runs: the join-and-leave schedule of the step `generate`'s greedy/sampling loop runs
(bertkit.model.decoding_step.decode_step: one model call for every running row, each
group of rows alike in settings ruled and chosen together, stop strings checked), so a
request's text is `bertkit generate`'s for the same settings. A row leaves when it ends
(EOS, max_new_tokens, a stop string) or its client went away (`cancelled`): its slot is
free at the next step.

The decoding steps run inside `packed_weights()` (bertkit.model.packed_linear: oneDNN's
packed copies of the weights, made on second use) with one cache kept for the server's
life, since a served model's weights never change: a batch that starts after the last one
emptied (every request of a lone client) does not pack the weights again. Encoders run
outside it (`plain_weights`), as in `generate`, and so do other tasks' batches between
steps.

Admission (`room`): the running rows' cost (prompt tokens + max_new_tokens each) stays
within max_batch_tokens and their count within max_batch_requests. A model whose decode
steps cannot merge rows of different lengths (an encoder-decoder with absolute decoder
positions it does not take per row; T5 and BART merge) admits new requests only when no
row runs — requests that arrive together still share every step.

Events: {"type": "token", "token": {"id", "text", "logprob", "special"}} per new token
(not a forced BOS, BART's first token: as transformers' and TGI's streams, neither emitted
nor counted in generated_tokens), then {"type": "end", "generated_text", "finish_reason" ("length", "eos_token",
"stop_sequence"), "generated_tokens", "tokens", "seed", "input_length"}, or
{"type": "error", "error": exception}.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bertkit.inference.generation import generated_text, visible_text
from bertkit.inference.loading import LoadedModel
from bertkit.model.decoding_step import RowGroup, StopStrings, decode_step
from bertkit.model.generation import GenerationSettings
from bertkit.model.packed_linear import packed_weights, plain_weights

log = logging.getLogger("bertkit.serve")


@dataclass
class GenerationJob:
    """One request's generation (see the module docstring)."""

    input_ids: list[int]
    settings: GenerationSettings
    emit: Callable[[dict], None]
    seed: int | None = None
    stop: tuple[str, ...] = ()
    cancelled: bool = False

    @property
    def cost(self) -> int:
        return len(self.input_ids) + self.settings.max_new_tokens


@dataclass
class _Row:
    job: GenerationJob
    generator: torch.Generator | None
    stops: StopStrings | None
    choice: GenerationSettings  # job.settings.choice: rows alike in it are ruled together
    new: list[int] = field(default_factory=list)
    tokens: list[dict] = field(default_factory=list)
    text: str = ""


class DecodeLoop:
    """The running generation batch of one served generator (worker thread only)."""

    def __init__(self, loaded: LoadedModel, max_batch_tokens: int, max_batch_requests: int):
        self.loaded = loaded
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_requests = max_batch_requests
        self.steps = None
        self.rows: list[_Row] = []
        self._packed: dict = {}  # the decoding steps' packed weights, kept between batches
        self._stops: dict[tuple[str, ...], StopStrings] = {}  # one per set of stop strings: rows share a group

    def _visible(self, ids: list[int]) -> str:
        """The text stop strings are matched in: the response's (sentinels kept, as before the engine)."""
        return visible_text(self.loaded, ids, strip=False)

    @property
    def active(self) -> bool:
        return bool(self.rows)

    def room(self) -> tuple[int, int]:
        """(tokens, requests) that may still join the running batch."""
        if self.rows and not (self.steps is not None and self.steps.can_merge):
            return 0, 0
        used = sum(row.job.cost for row in self.rows)
        return self.max_batch_tokens - used, self.max_batch_requests - len(self.rows)

    # ------------------------------------------------------------------ admission

    def admit(self, jobs: list) -> list[None]:
        """The batcher's runner for "generate": start these requests (Job.items[0]: a GenerationJob)."""
        requests = [job.items[0] for job in jobs]
        try:
            self._start(requests)
        except Exception as exc:  # noqa: BLE001 - these requests fail; the running ones go on
            log.error("generation failed to start: %s", exc)
            for request in requests:
                request.emit({"type": "error", "error": exc})
        return [None] * len(jobs)

    def _start(self, requests: list[GenerationJob]) -> None:
        requests = [request for request in requests if not request.cancelled]  # left while queued
        if not requests:
            return
        model = self.loaded.model
        model.eval()
        with torch.inference_mode():
            with plain_weights():
                steps = model.decode_steps([request.input_ids for request in requests])
            rows = [self._row(request) for request in requests]
            with packed_weights(self._packed):
                self._advance(steps, rows)
        if rows:
            if self.steps is None:
                self.steps = steps
            else:
                self.steps.merge(steps)
            self.rows += rows

    def _row(self, request: GenerationJob) -> _Row:
        device = next(self.loaded.model.parameters()).device
        generator = None if request.seed is None else torch.Generator(device).manual_seed(request.seed)
        stops = None
        if request.stop:
            stops = self._stops.setdefault(request.stop, StopStrings(list(request.stop), self.loaded.tokenizer,
                                                                          self._visible))
        return _Row(request, generator, stops, request.settings.choice)

    # ------------------------------------------------------------------ decoding

    def step(self) -> None:
        """One decoding step for every running row; ended and abandoned rows leave."""
        with torch.inference_mode():
            self._drop([i for i, row in enumerate(self.rows) if row.job.cancelled], self.steps, self.rows)
            if self.rows:
                with packed_weights(self._packed):
                    self._advance(self.steps, self.rows)
            if not self.rows:
                self.steps = None

    def fail(self, error: BaseException) -> None:
        """A step failed (a bug): every running request gets the error; the batch is dropped."""
        log.error("generation step failed: %s", error)
        for row in self.rows:
            row.job.emit({"type": "error", "error": error})
        self.rows, self.steps = [], None

    def _advance(self, steps, rows: list[_Row]) -> None:
        """Run one step of `steps` (its rows: `rows`), emit, and drop the rows that ended."""
        result = decode_step(steps, _groups(rows), logprobs=True)
        stopped = [False] * len(rows) if result.stopped is None else result.stopped.tolist()
        ended = []
        for i, (row, token, logprob, eos, stop) in enumerate(zip(rows, result.chosen.tolist(),
                                                                 result.logprobs.tolist(), result.eos.tolist(), stopped)):
            self._take(row, token, logprob)
            at_length = len(row.new) >= row.job.settings.max_new_tokens
            # BART's forced EOS fills the last allowed position: the answer ran out of length, as TGI says
            forced_end = eos and at_length and bool(row.job.settings.forced_eos_token_ids)
            reason = "length" if forced_end else "eos_token" if eos else "stop_sequence" if stop else \
                "length" if at_length else None
            if reason is not None:
                self._finish(row, reason)
                ended.append(i)
        self._drop(ended, steps, rows)

    def _take(self, row: _Row, token: int, logprob: float) -> None:
        """Record one token and emit it (not a forced BOS: see the module docstring)."""
        row.new.append(token)
        if len(row.new) == 1 and row.job.settings.forced_bos_token_id is not None:
            return
        special = token in row.job.settings.eos_token_ids or token in self.loaded.tokenizer.all_special_ids
        text = generated_text(self.loaded, row.new)
        piece = text[len(row.text):] if text.startswith(row.text) else text
        row.text = text
        entry = {"id": token, "text": "" if special and not piece else piece, "logprob": logprob, "special": special}
        row.tokens.append(entry)
        row.job.emit({"type": "token", "token": entry})

    def _finish(self, row: _Row, reason: str) -> None:
        row.job.emit({"type": "end", "generated_text": row.text, "finish_reason": reason,
                      "generated_tokens": len(row.tokens), "tokens": row.tokens, "seed": row.job.seed,
                      "input_length": len(row.job.input_ids)})

    @staticmethod
    def _drop(indices: list[int], steps, rows: list[_Row]) -> None:
        if not indices:
            return
        gone = set(indices)
        keep = [i for i in range(len(rows)) if i not in gone]
        steps.keep(keep)
        rows[:] = [rows[i] for i in keep]


def _groups(rows: list[_Row]) -> list[RowGroup]:
    """The rows grouped by how they choose (settings, a sampling row's generator, stop
    strings): each group's rules run once over its rows."""
    by_choice: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        generator = row.generator if row.job.settings.do_sample else None
        by_choice.setdefault((row.choice, generator, row.stops), []).append(i)
    whole = len(by_choice) == 1
    return [RowGroup(settings, None if whole else index, generator, stops)
            for (settings, generator, stops), index in by_choice.items()]
