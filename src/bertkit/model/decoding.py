"""Decoding one step at a time over a batch whose rows come and go (a server's continuous batching).

    steps = model.decode_steps([[13, 8, 1], [27, 1]])   # one row per input (an encoder-decoder: runs the encoder)
    with packed_weights():
        scores = steps.next_logits()     # (N, V) float32: each row's next-token scores
    steps.append(chosen)                 # (N,) long: each row's chosen token
    steps.tokens(0)                      # row 0's tokens so far: the start token or the prompt, then the new ones
    steps.keep([0])                      # the rows that go on, in this order (finished ones leave)
    if steps.can_merge: steps.merge(other)   # another batch's rows join (other stepped at least once)

The contract of a family's generating model: `decode_steps(input_ids: list[list[int]])`
returns an object with the methods above. `bertkit.model.generation.GenerationMixin` gives
every model meeting its `generate` contract one: `EncoderDecoderSteps` for an
encoder-decoder, `DecoderOnlySteps` for a decoder-only model. The per-step logits rules
(bertkit.model.logits_processing) are the caller's, per row.

Both keep one KV cache for the whole batch (`StepRows`): per layer the self-attention
(key, value) first, each (N, heads, length, d), and rows whose histories differ in length
share a step by left-padding the shorter caches, masked by an attention mask over cache +
new tokens. A masked key gets exactly zero weight, so a row's scores are its unbatched
scores up to summation order — as long as left padding leaves every row's positions as
they were:
- an encoder-decoder (`EncoderDecoderSteps`): the encoder runs once at the start; the
  decoder starts from its start token; per layer the cache also holds the cross-attention
  (key, value) over the encoder states, which are right-padded to a common length and
  masked by the encoder attention mask. `can_merge` is the model class's
  `merges_decode_steps`: True when left padding shifts no decoder position — relative
  positions (T5's bucketed bias depends on query - key, which left padding leaves
  unchanged), or absolute ones the model takes per row (`takes_decoder_position_ids`, as
  BART's learned positions: every step then passes `decoder_position_ids` counted from
  each row's first real token, the self-attention mask's cumulative sum). Without it,
  rows only leave a batch, and new rows wait for a fresh one.
- a decoder-only model (`DecoderOnlySteps`): each row's prompt runs at the first step
  (left-padded to the longest, as `generate` pads a batch), and every step passes position
  ids counted from each row's first real token (the attention mask's cumulative sum, as
  `generate`), so left padding never shifts a position and batches always merge.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from bertkit.errors import ConfigError


def _pad_start(t: torch.Tensor, dim_from_end: int, size: int) -> torch.Tensor:
    """`t` zero-padded at the start of a dimension (counted from the end) to `size`."""
    return F.pad(t, [0, 0] * (dim_from_end - 1) + [size - t.shape[-dim_from_end], 0])


def _pad_end(t: torch.Tensor, dim_from_end: int, size: int) -> torch.Tensor:
    return F.pad(t, [0, 0] * (dim_from_end - 1) + [0, size - t.shape[-dim_from_end]])


def right_padded(rows: list[list[int]], pad_id: int, device: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) int64 ids padded at the end with pad_id, and their (B, S) attention mask."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, :len(row)] = 1
    return ids.to(device), mask.to(device)


class StepRows:
    """What both shapes share: each row's tokens (`history`), the tokens the next step feeds
    (`pending` (N, n)), the self-attention mask over cache + pending (`self_mask` (N, L), 1 =
    a real token, padding on the left) and the cache (`past`, None before the first step).
    A subclass makes the model call (`forward`) and keeps its other inputs in step with the
    rows (`select_inputs`, `trim_inputs`, `join_inputs`)."""

    can_merge: bool = False

    def __init__(self, model: Any, history: list[list[int]], pending: torch.Tensor, self_mask: torch.Tensor):
        self.model = model
        self.history = history
        self.pending = pending
        self.self_mask = self_mask
        self.past = None

    @property
    def rows(self) -> int:
        return len(self.history)

    def tokens(self, row: int) -> list[int]:
        return self.history[row]

    def forward(self, padded: bool) -> Any:
        """The model on `pending` after `past` -> output with `logits` (N, n or 1, V) and
        `past_key_values`; `padded`: some row has padding (the mask is needed)."""
        raise NotImplementedError

    def positions(self) -> torch.Tensor:
        """(N, n) long: the pending tokens' positions, counted from each row's first real token
        (the mask's cumulative sum), so left padding shifts none."""
        count = self.pending.shape[1]
        return (self.self_mask.cumsum(dim=1) - 1).masked_fill(self.self_mask == 0, 0)[:, -count:]

    def next_logits(self) -> torch.Tensor:
        """(N, V) float32 scores of each row's next token."""
        out = self.forward(bool((self.self_mask == 0).any()))
        self.past = out.past_key_values
        return out.logits[:, -1].float()

    def append(self, chosen: torch.Tensor) -> None:
        self.pending = chosen.view(-1, 1).to(self.pending.device)
        self.self_mask = F.pad(self.self_mask, (0, 1), value=1)
        for row, token in zip(self.history, chosen.tolist()):
            row.append(token)

    def keep(self, rows: list[int]) -> None:
        """Only `rows` go on, in that order; columns that became padding in every row are dropped."""
        if rows == list(range(self.rows)):
            return
        index = torch.tensor(rows, dtype=torch.long, device=self.pending.device)
        self.history = [self.history[i] for i in rows]
        self.pending = self.pending.index_select(0, index)
        self.self_mask = self.self_mask.index_select(0, index)
        if self.past is not None:
            self.past = tuple(tuple(t.index_select(0, index) for t in layer) for layer in self.past)
        self.select_inputs(index)
        if not rows:
            return
        left = int((self.self_mask.sum(dim=0) == 0).long().cumprod(dim=0).sum())  # leading all-pad columns
        if left:
            self.self_mask = self.self_mask[:, left:]
            if self.past is None:  # before the first step the mask covers the pending prompt itself
                self.pending = self.pending[:, left:]
            else:
                self.past = tuple((k[:, :, left:], v[:, :, left:], *rest) for k, v, *rest in self.past)
        self.trim_inputs()

    def merge(self, other: "StepRows") -> None:
        """`other`'s rows join after this batch's (both stepped at least once; `other` is used up)."""
        if not self.can_merge:
            raise ValueError("this model's decode steps cannot merge batches "
                             "(left padding would shift its decoder positions)")
        if self.past is None or other.past is None:
            raise ValueError("merge: both batches must have run a step")
        self.join_inputs(other)
        length = max(self.self_mask.shape[1], other.self_mask.shape[1])  # cache + the one pending token

        def cache(steps: StepRows):
            return [(_pad_start(k, 2, length - 1), _pad_start(v, 2, length - 1), *rest) for k, v, *rest in steps.past]

        self.past = tuple(tuple(torch.cat(pair) for pair in zip(a, b)) for a, b in zip(cache(self), cache(other)))
        self.self_mask = torch.cat((_pad_start(self.self_mask, 1, length), _pad_start(other.self_mask, 1, length)))
        self.pending = torch.cat((self.pending, other.pending))
        self.history = self.history + other.history

    # the model inputs besides the tokens (none for a decoder-only model)
    def select_inputs(self, index: torch.Tensor) -> None:
        """Keep the rows `index` (N,) of the other inputs."""

    def trim_inputs(self) -> None:
        """Drop what no kept row uses any more."""

    def join_inputs(self, other: "StepRows") -> None:
        """Before a merge: both sides' other inputs (and the cache parts over them) made alike, then joined."""


class EncoderDecoderSteps(StepRows):
    """Rows of an encoder-decoder being decoded together (see the module docstring): the
    cache per decoder layer is (self_key, self_value, cross_key, cross_value)."""

    def __init__(self, model: Any, input_ids: list[list[int]]):
        config = model.config
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        start = getattr(config, "decoder_start_token_id", None)
        start = pad if start is None else start
        device = next(model.parameters()).device
        ids, mask = right_padded(input_ids, pad, device)
        super().__init__(model, [[start] for _ in input_ids],
                         torch.full((len(input_ids), 1), start, dtype=torch.long, device=device),
                         torch.ones((len(input_ids), 1), dtype=torch.long, device=device))
        self.can_merge = bool(getattr(model, "merges_decode_steps", False))
        self.takes_positions = bool(getattr(model, "takes_decoder_position_ids", False))
        self.encoder_states = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        self.encoder_mask = mask

    def forward(self, padded: bool) -> Any:
        positions = {"decoder_position_ids": self.positions()} if self.takes_positions and padded else {}
        return self.model(encoder_outputs=SimpleNamespace(last_hidden_state=self.encoder_states),
                          attention_mask=self.encoder_mask, decoder_input_ids=self.pending,
                          decoder_attention_mask=self.self_mask if padded else None,
                          past_key_values=self.past, use_cache=True, **positions)

    def select_inputs(self, index: torch.Tensor) -> None:
        self.encoder_states = self.encoder_states.index_select(0, index)
        self.encoder_mask = self.encoder_mask.index_select(0, index)

    def trim_inputs(self) -> None:
        width = int(self.encoder_mask.sum(dim=1).max())  # encoder columns some row still uses
        if width == self.encoder_mask.shape[1]:
            return
        self.encoder_states, self.encoder_mask = self.encoder_states[:, :width], self.encoder_mask[:, :width]
        if self.past is not None:
            self.past = tuple((k, v, ck[:, :, :width], cv[:, :, :width], *rest) for k, v, ck, cv, *rest in self.past)

    def join_inputs(self, other: "EncoderDecoderSteps") -> None:
        width = max(self.encoder_mask.shape[1], other.encoder_mask.shape[1])
        for steps in (self, other):
            steps.past = tuple((k, v, _pad_end(ck, 2, width), _pad_end(cv, 2, width), *rest)
                               for k, v, ck, cv, *rest in steps.past)
        self.encoder_states = torch.cat((_pad_end(self.encoder_states, 2, width),
                                         _pad_end(other.encoder_states, 2, width)))
        self.encoder_mask = torch.cat((_pad_end(self.encoder_mask, 1, width), _pad_end(other.encoder_mask, 1, width)))


class DecoderOnlySteps(StepRows):
    """Rows of a decoder-only model being decoded together (see the module docstring): the
    prompts, left-padded, run at the first step; the cache per layer is (key, value)."""

    can_merge = True  # positions come from the mask: left padding shifts none

    def __init__(self, model: Any, input_ids: list[list[int]]):
        for i, row in enumerate(input_ids):
            if not row:
                raise ConfigError(f"input_ids: row {i} is an empty prompt; give at least one token")
        pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0  # masked: any id will do
        device = next(model.parameters()).device
        width = max(len(ids) for ids in input_ids)
        ids = torch.full((len(input_ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(input_ids), width), dtype=torch.long)
        for i, row in enumerate(input_ids):
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row):] = 1
        super().__init__(model, [list(row) for row in input_ids], ids.to(device), mask.to(device))

    def forward(self, padded: bool) -> Any:
        return self.model(input_ids=self.pending, attention_mask=self.self_mask if padded else None,
                          position_ids=self.positions(), past_key_values=self.past, use_cache=True, logits_to_keep=1)
