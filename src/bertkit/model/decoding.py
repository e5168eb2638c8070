"""Decoding one step at a time over a batch whose rows come and go (a server's continuous batching).

    steps = model.decode_steps([[13, 8, 1], [27, 1]])   # one row per input: runs the encoder
    with packed_weights():
        scores = steps.next_logits()     # (N, V) float32: each row's next-token scores
    steps.append(chosen)                 # (N,) long: each row's chosen token
    steps.tokens(0)                      # row 0's decoder tokens so far (start token included)
    steps.keep([0])                      # the rows that go on, in this order (finished ones leave)
    if steps.can_merge: steps.merge(other)   # another batch's rows join (other stepped at least once)

The contract of a family's generating model: `decode_steps(input_ids: list[list[int]])`
returns an object with the methods above. `bertkit.model.generation.GenerationMixin` gives
every encoder-decoder meeting its contract `EncoderDecoderSteps` (below); a decoder-only
family gives its own (its rows' prompts and caches differ in length from the start). The
per-step logits rules (bertkit.model.logits_processing) are the caller's, per row.

`EncoderDecoderSteps` keeps one KV cache for the whole batch: per decoder layer
(self_key, self_value, cross_key, cross_value), each (N, heads, length, d_kv). Rows whose
decoder histories differ in length share a step by left-padding the shorter self-attention
caches, masked by a decoder attention mask; encoder states of different lengths are
right-padded and masked by the encoder attention mask. A masked key gets exactly zero
weight, so a row's scores are its unbatched scores up to summation order — but only when
the decoder's positions are relative (T5's bucketed bias depends on query - key, which
left padding leaves unchanged). A model with absolute decoder positions (BART) would see
shifted positions, so `can_merge` is the model class's `merges_decode_steps` (False by
default): without it, rows only leave a batch, and new rows wait for a fresh one.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F


class EncoderDecoderSteps:
    """Rows of an encoder-decoder being decoded together (see the module docstring)."""

    def __init__(self, model: Any, input_ids: list[list[int]]):
        config = model.config
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        start = getattr(config, "decoder_start_token_id", None)
        self.model = model
        self.can_merge = bool(getattr(model, "merges_decode_steps", False))
        device = next(model.parameters()).device
        width = max(len(ids) for ids in input_ids)
        ids = torch.full((len(input_ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(input_ids), width), dtype=torch.long)
        for i, row in enumerate(input_ids):
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, :len(row)] = 1
        ids, mask = ids.to(device), mask.to(device)
        self.encoder_states = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        self.encoder_mask = mask
        start = pad if start is None else start
        self.history = [[start] for _ in input_ids]
        self.pending = torch.full((len(input_ids), 1), start, dtype=torch.long, device=device)
        self.self_mask = torch.ones((len(input_ids), 1), dtype=torch.long, device=device)
        self.past = None

    @property
    def rows(self) -> int:
        return len(self.history)

    def tokens(self, row: int) -> list[int]:
        return self.history[row]

    def next_logits(self) -> torch.Tensor:
        """(N, V) float32 scores of each row's next token."""
        padded = bool((self.self_mask == 0).any())
        out = self.model(encoder_outputs=SimpleNamespace(last_hidden_state=self.encoder_states),
                         attention_mask=self.encoder_mask, decoder_input_ids=self.pending,
                         decoder_attention_mask=self.self_mask if padded else None,
                         past_key_values=self.past, use_cache=True)
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
        self.encoder_states = self.encoder_states.index_select(0, index)
        self.encoder_mask = self.encoder_mask.index_select(0, index)
        if self.past is not None:
            self.past = tuple(tuple(t.index_select(0, index) for t in layer) for layer in self.past)
        if not rows:
            return
        left = int((self.self_mask.sum(dim=0) == 0).long().cumprod(dim=0).sum())  # leading all-pad columns
        width = int(self.encoder_mask.sum(dim=1).max())  # encoder columns some row still uses
        self.self_mask = self.self_mask[:, left:]
        self.encoder_states, self.encoder_mask = self.encoder_states[:, :width], self.encoder_mask[:, :width]
        if self.past is not None:
            self.past = tuple((k[:, :, left:], v[:, :, left:], ck[:, :, :width], cv[:, :, :width], *rest)
                              for k, v, ck, cv, *rest in self.past)

    def merge(self, other: "EncoderDecoderSteps") -> None:
        """`other`'s rows join after this batch's (both stepped at least once)."""
        if not self.can_merge:
            raise ValueError("this model's decode steps cannot merge batches (absolute decoder positions)")
        if self.past is None or other.past is None:
            raise ValueError("merge: both batches must have run a step")
        length = max(self.self_mask.shape[1], other.self_mask.shape[1])
        width = max(self.encoder_mask.shape[1], other.encoder_mask.shape[1])

        def left(t, dim_from_end, size):  # pad at the start of a dimension counted from the end
            pad = [0, 0] * (dim_from_end - 1) + [size - t.shape[-dim_from_end], 0]
            return F.pad(t, pad)

        def right(t, dim_from_end, size):
            pad = [0, 0] * (dim_from_end - 1) + [0, size - t.shape[-dim_from_end]]
            return F.pad(t, pad)

        def cache(steps):
            return [(left(k, 2, length - 1), left(v, 2, length - 1), right(ck, 2, width), right(cv, 2, width), *rest)
                    for k, v, ck, cv, *rest in steps.past]

        self.past = tuple(tuple(torch.cat(pair) for pair in zip(a, b)) for a, b in zip(cache(self), cache(other)))
        self.self_mask = torch.cat((left(self.self_mask, 1, length), left(other.self_mask, 1, length)))
        self.encoder_states = torch.cat((right(self.encoder_states, 2, width), right(other.encoder_states, 2, width)))
        self.encoder_mask = torch.cat((right(self.encoder_mask, 1, width), right(other.encoder_mask, 1, width)))
        self.pending = torch.cat((self.pending, other.pending))
        self.history = self.history + other.history
