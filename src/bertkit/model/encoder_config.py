"""What the shared encoder blocks (attention, embeddings, layers, heads) read from a config: the
fields of BERT's config, by transformers' names. Every encoder family's config has them (its own
or through `attribute_map`), so the shared layer names no family's config class."""

from __future__ import annotations

from typing import Protocol


class EncoderConfig(Protocol):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str
    hidden_dropout_prob: float
    attention_probs_dropout_prob: float
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: int | None
    pre_layer_norm: bool

    @property
    def head_dim(self) -> int: ...
