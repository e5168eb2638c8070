"""The model call of decoding, one step at a time, over rows that may come and go: one adapter per model shape.

    steps = model.decode_steps([[13, 8, 1], [27, 1]])   # one row per input (an encoder-decoder: runs the encoder)
    with packed_weights():
        scores = steps.next_logits()     # (N, V) float32: each row's next-token scores
    steps.append(chosen)                 # (N,) long: each row's chosen token
    steps.tokens(0)                      # row 0's tokens so far: the start token or the prompt, then the new ones
    steps.keep([0])                      # the rows that go on, in this order (finished ones leave)
    if steps.can_merge: steps.merge(other)   # another batch's rows join (other stepped at least once)

Both `generate` (bertkit.model.generation: rows run to the end; beams reorder them) and the
server's continuous batching (bertkit.serving.generation: rows join and leave) decode
through these objects, and choose tokens with one step function
(bertkit.model.decoding_step.decode_step). `GenerationMixin.decode_steps` gives every model
meeting `generate`'s contract one: `EncoderDecoderSteps` for an encoder-decoder,
`DecoderOnlySteps` for a decoder-only model.

Both keep one KV cache for the whole batch (`StepRows`): per layer the self-attention
(key, value) first, each (N, heads, length, d), and the rows' tokens (`token_ids` (N, L))
with the self-attention mask over them (`self_mask` (N, L), 1 = a real token, padding on
the left). Rows whose histories differ in length share a step by left-padding the shorter
caches. A masked key gets exactly zero weight, so a row's scores are its unbatched scores
up to summation order — as long as left padding leaves every row's positions as they were:
- an encoder-decoder (`EncoderDecoderSteps`): the encoder runs once at the start; the
  decoder starts from its start token; per layer the cache also holds the cross-attention
  (key, value) over the encoder states, which are right-padded to a common length and
  masked by the encoder attention mask. `can_merge` is the model class's
  `merges_decode_steps`: True when left padding shifts no decoder position — relative
  positions (T5's bucketed bias depends on query - key, which left padding leaves
  unchanged), or absolute ones the model takes per row (`takes_decoder_position_ids`, as
  BART's learned positions: every step then passes `decoder_position_ids` counted from
  each row's first real token). Without it, rows only leave a batch, and new rows wait
  for a fresh one.
- a decoder-only model (`DecoderOnlySteps`): each row's prompt runs at the first step
  (left-padded to the longest), and every step passes position ids counted from each
  row's first real token, so left padding never shifts a position and batches always merge.
Positions count from each row's first real token: the mask's cumulative sum (`positions`),
transformers' rule for a left-padded batch.
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


def padded_rows(rows: list[list[int]], pad_id: int, device: Any = None, left: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) int64 ids padded with pad_id at the end (or the start: `left`), and their (B, S) attention mask."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span] = torch.tensor(row, dtype=torch.long)
        mask[i, span] = 1
    return ids.to(device), mask.to(device)


def right_padded(rows: list[list[int]], pad_id: int, device: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) int64 ids padded at the end with pad_id, and their (B, S) attention mask."""
    return padded_rows(rows, pad_id, device)


def batch_pad_id(config: Any) -> int:
    """The id padding a batch (and, in `generate`, a finished row): the config's pad, else
    its EOS (GPT-2 has no pad token; transformers pads with EOS), else 0."""
    eos = getattr(config, "eos_token_id", None)
    for token in (getattr(config, "pad_token_id", None), eos[0] if isinstance(eos, (list, tuple)) and eos else eos):
        if isinstance(token, int):
            return token
    return 0


class StepRows:
    """What both shapes share: each row's tokens (`token_ids` (N, L) long) and the
    self-attention mask over them (`self_mask` (N, L), 1 = a real token, padding on the
    left), the tokens the next step feeds (`pending` (N, n): the last n columns; all of
    them before the first step or without a cache) and the cache (`past`, None before the
    first step). `generated` (N,): each row's new tokens so far. A subclass makes the model
    call (`forward`) and keeps its other inputs in step with the rows (`select_inputs`,
    `trim_inputs`, `join_inputs`).

    input_padding: the batch's padding is its caller's input (`generate`'s left-padded
    prompts, which transformers' n-gram rule reads as tokens), not alignment made here.
    copies: after the first step each row becomes `copies` consecutive rows (beams,
    returned samples), so the prompt's cache is computed once per input, then copied."""

    can_merge: bool = False

    def __init__(self, model: Any, token_ids: torch.Tensor, self_mask: torch.Tensor, use_cache: bool = True,
                 input_padding: bool = False, copies: int = 1):
        self.model, self.use_cache, self.input_padding, self.copies = model, use_cache, input_padding, copies
        self.token_ids, self.self_mask = token_ids, self_mask
        self.generated = [0] * token_ids.shape[0]
        self.pending_count = token_ids.shape[1]
        self.past = None
        self.padded = bool((self_mask == 0).any())  # once per change of rows, not per step

    @property
    def rows(self) -> int:
        return self.token_ids.shape[0]

    @property
    def pending(self) -> torch.Tensor:
        return self.token_ids[:, -self.pending_count:]

    def tokens(self, row: int, last: int | None = None) -> list[int]:
        """Row `row`'s tokens so far (its `last` ones), without alignment padding."""
        ids, mask = self.token_ids[row], self.self_mask[row]
        if last is not None:
            ids, mask = ids[-last:], mask[-last:]
        return (ids if self.input_padding else ids[mask.bool()]).tolist()

    def forward(self, padded: bool) -> Any:
        """The model on `pending` after `past` -> output with `logits` (N, n or 1, V) and
        `past_key_values`; `padded`: some row has padding (the mask is needed)."""
        raise NotImplementedError

    def positions(self) -> torch.Tensor:
        """(N, n) long: the pending tokens' positions, counted from each row's first real token
        (the mask's cumulative sum), so left padding shifts none."""
        return (self.self_mask.cumsum(dim=1) - 1).masked_fill(self.self_mask == 0, 0)[:, -self.pending_count:]

    def next_logits(self) -> torch.Tensor:
        """(N, V) float32 scores of each row's next token."""
        out = self.forward(self.padded)
        if self.use_cache:
            self.past = out.past_key_values
        logits = out.logits[:, -1].float()
        if self.copies > 1:  # the first step, once per input: now each input's rows
            self._select(torch.arange(self.rows, device=logits.device).repeat_interleave(self.copies))
            logits, self.copies = logits.repeat_interleave(self.copies, dim=0), 1
        return logits

    def append(self, chosen: torch.Tensor) -> None:
        """Record each row's chosen token (N,) long: the next step feeds it."""
        self.token_ids = torch.cat((self.token_ids, chosen.view(-1, 1).to(self.token_ids.device)), dim=1)
        self.self_mask = F.pad(self.self_mask, (0, 1), value=1)
        self.pending_count = 1 if self.use_cache else self.token_ids.shape[1]
        self.generated = [n + 1 for n in self.generated]

    def reorder(self, index: torch.Tensor) -> None:
        """Keep the rows `index` (N,) in that order (beam search). Only the tokens and the
        self-attention cache move: a beam is only ever replaced by a beam of the same input,
        whose mask and cross-attention keys and values (an encoder-decoder's last two) are the same."""
        self.token_ids = self.token_ids.index_select(0, index)
        if self.past is not None:
            self.past = tuple((k.index_select(0, index), v.index_select(0, index), *cross)
                              for k, v, *cross in self.past)

    def _select(self, index: torch.Tensor) -> None:
        self.token_ids = self.token_ids.index_select(0, index)
        self.self_mask = self.self_mask.index_select(0, index)
        if self.past is not None:
            self.past = tuple(tuple(t.index_select(0, index) for t in layer) for layer in self.past)
        self.generated = [self.generated[i] for i in index.tolist()]
        self.select_inputs(index)

    def keep(self, rows: list[int]) -> None:
        """Only `rows` go on, in that order; columns that became padding in every row are dropped."""
        if rows == list(range(self.rows)):
            return
        self._select(torch.tensor(rows, dtype=torch.long, device=self.token_ids.device))
        if not rows:
            return
        left = int((self.self_mask.sum(dim=0) == 0).long().cumprod(dim=0).sum())  # leading all-pad columns
        if left:
            self.token_ids, self.self_mask = self.token_ids[:, left:], self.self_mask[:, left:]
            self.pending_count = min(self.pending_count, self.token_ids.shape[1])
            if self.past is not None:
                self.past = tuple((k[:, :, left:], v[:, :, left:], *rest) for k, v, *rest in self.past)
        self.padded = bool((self.self_mask == 0).any())
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
        self.token_ids = torch.cat((_pad_start(self.token_ids, 1, length), _pad_start(other.token_ids, 1, length)))
        self.generated = self.generated + other.generated
        self.padded = bool((self.self_mask == 0).any())

    # the model inputs besides the tokens (none for a decoder-only model)
    def select_inputs(self, index: torch.Tensor) -> None:
        """Keep the rows `index` (N,) of the other inputs."""

    def trim_inputs(self) -> None:
        """Drop what no kept row uses any more."""

    def join_inputs(self, other: "StepRows") -> None:
        """Before a merge: both sides' other inputs (and the cache parts over them) made alike, then joined."""


class EncoderDecoderSteps(StepRows):
    """Rows of an encoder-decoder being decoded together (see the module docstring): the
    cache per decoder layer is (self_key, self_value, cross_key, cross_value).

    encoder_states (B, S, H) and encoder_mask (B, S): the encoder's output over the inputs;
    every row starts from `start_token_id`."""

    def __init__(self, model: Any, encoder_states: torch.Tensor, encoder_mask: torch.Tensor, start_token_id: int,
                 use_cache: bool = True, copies: int = 1):
        rows = encoder_states.shape[0]
        device = encoder_states.device
        super().__init__(model, torch.full((rows, 1), start_token_id, dtype=torch.long, device=device),
                         torch.ones((rows, 1), dtype=torch.long, device=device), use_cache, copies=copies)
        self.can_merge = bool(getattr(model, "merges_decode_steps", False))
        self.takes_positions = bool(getattr(model, "takes_decoder_position_ids", False))
        self.encoder_states = encoder_states
        self.encoder_mask = encoder_mask

    @classmethod
    def from_ids(cls, model: Any, input_ids: list[list[int]]) -> "EncoderDecoderSteps":
        """The inputs' rows (the encoder runs now), each starting from the config's start token."""
        config = model.config
        start = getattr(config, "decoder_start_token_id", None)
        ids, mask = right_padded(input_ids, batch_pad_id(config), next(model.parameters()).device)
        states = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        return cls(model, states, mask, batch_pad_id(config) if start is None else start)

    def forward(self, padded: bool) -> Any:
        positions = {"decoder_position_ids": self.positions()} if self.takes_positions and padded else {}
        return self.model(encoder_outputs=SimpleNamespace(last_hidden_state=self.encoder_states),
                          attention_mask=self.encoder_mask, decoder_input_ids=self.pending,
                          decoder_attention_mask=self.self_mask if padded else None,
                          past_key_values=self.past, use_cache=self.use_cache, **positions)

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
    prompts (N, P), left-padded, run at the first step; the cache per layer is (key, value)."""

    can_merge = True  # positions come from the mask: left padding shifts none

    @classmethod
    def from_ids(cls, model: Any, input_ids: list[list[int]]) -> "DecoderOnlySteps":
        """The prompts' rows, left-padded to the longest."""
        for i, row in enumerate(input_ids):
            if not row:
                raise ConfigError(f"input_ids: row {i} is an empty prompt; give at least one token")
        ids, mask = padded_rows(input_ids, batch_pad_id(model.config), next(model.parameters()).device, left=True)
        return cls(model, ids, mask)

    def forward(self, padded: bool) -> Any:
        return self.model(input_ids=self.pending, attention_mask=self.self_mask if padded else None,
                          position_ids=self.positions(), past_key_values=self.past, use_cache=self.use_cache,
                          logits_to_keep=1)
