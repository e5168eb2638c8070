"""A tiny deterministic encoder-decoder with `generate`'s model contract
(bertkit.model.generation), for testing the decoding algorithms apart from T5.

Encoder: token embeddings. Decoder position t: tanh(2 emb(y_t) + mean_{j<=t} emb(y_j) +
masked mean of the encoder states) @ W. The self cache holds the embeddings of the
tokens so far, the cross cache the encoder mean, in the agreed layout
(self_key, self_value, cross_key, cross_value), each (N, 1, length, D). Each next token
depends on the whole prefix and on the input, so a cache row in the wrong place, a
wrongly reordered beam or a padding leak changes the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn

from bertkit.model.generation import GenerationMixin


@dataclass
class ToyEncoderOutput:
    last_hidden_state: torch.Tensor


@dataclass
class ToyOutput:
    logits: torch.Tensor
    past_key_values: tuple | None = None
    encoder_last_hidden_state: torch.Tensor | None = None


class ToySeq2Seq(nn.Module, GenerationMixin):
    def __init__(self, vocab_size: int = 12, dim: int = 8, seed: int = 0, scale: float = 2.0):
        super().__init__()
        self.config = SimpleNamespace(decoder_start_token_id=0, eos_token_id=1, pad_token_id=0,
                                      vocab_size=vocab_size)
        g = torch.Generator().manual_seed(seed)
        self.embed = nn.Parameter(torch.randn(vocab_size, dim, generator=g))
        self.out = nn.Parameter(torch.randn(dim, vocab_size, generator=g) * scale)
        self.calls = []  # (decoder tokens given, cache length) per forward, to check cache use

    def get_encoder(self):
        return lambda input_ids, attention_mask=None: ToyEncoderOutput(self.embed[input_ids])

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                encoder_outputs=None, past_key_values=None, use_cache=None, labels=None):
        if encoder_outputs is None:
            encoder_outputs = self.get_encoder()(input_ids, attention_mask)
        states = encoder_outputs.last_hidden_state  # (N, S, D)
        if attention_mask is None:
            attention_mask = torch.ones(states.shape[:2])
        past_length = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        self.calls.append((decoder_input_ids.shape[1], past_length))
        if past_key_values is None:
            weights = attention_mask.to(states.dtype)[:, :, None]
            cross = ((states * weights).sum(1) / weights.sum(1))[:, None, None, :]  # (N, 1, 1, D)
            previous = states.new_zeros(states.shape[0], 1, 0, states.shape[2])
        else:
            previous, _, cross, _ = past_key_values[0]
        counts = torch.arange(past_length + 1, past_length + 1 + decoder_input_ids.shape[1], dtype=states.dtype)
        new = self.embed[decoder_input_ids][:, None]  # (N, 1, T, D)
        keys = torch.cat((previous, new), dim=2)
        means = keys.cumsum(dim=2)[:, 0, past_length:] / counts[None, :, None]  # (N, T, D)
        hidden = torch.tanh(2 * new[:, 0] + means + cross[:, 0])
        logits = hidden @ self.out
        past = ((keys, keys, cross, cross),) if use_cache else None
        return ToyOutput(logits, past, states)
