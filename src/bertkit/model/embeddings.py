"""Input representation: token + segment + learned position embeddings, LayerNorm, dropout."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from bertkit.model.dropout import Dropout
from bertkit.model.unpad import Unpadding

if TYPE_CHECKING:  # annotation only
    from bertkit.model.encoder_config import EncoderConfig


class BertEmbeddings(nn.Module):
    """Sum of word, position and token-type embeddings (SPEC section 2).

    ALBERT's factorized embedding (V x E then E x H) fits here as an extra projection
    after the LayerNorm; the encoder only ever sees (B, T, H).
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings), persistent=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        unpadding: Unpadding | None = None,
    ) -> torch.Tensor:
        """input_ids, token_type_ids: (B, T) int64 -> (B, T, H) float.

        position_ids: (B, T) or (T,) int64; None = 0..T-1 (RoBERTa passes its own, offset past padding).
        unpadding: look up the real tokens only and return packed (N, H) rows (bertkit.model.unpad)."""
        seq_len = input_ids.shape[1]
        given = position_ids is not None and position_ids.numel() > 0
        # the check reads the ids on the host: on a CPU only, outside compilation (on a GPU a sync each
        # step, compiled a graph break; there the lookup's own bounds check still stops a bad id)
        checked = given and position_ids.device.type == "cpu" and not torch.compiler.is_compiling()
        last = int(position_ids.max()) if checked else seq_len - 1
        if position_ids is None:
            position_ids = self.position_ids[:seq_len]
        if unpadding is not None:  # (B, T) -> (N,) real tokens: LayerNorm and dropout run on those rows only
            input_ids = unpadding.pack(input_ids)
            position_ids = unpadding.pack(position_ids) if position_ids.dim() == 2 else position_ids[unpadding.position]
            token_type_ids = None if token_type_ids is None else unpadding.pack(token_type_ids)
        if last >= self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {seq_len} (position ids up to {last}) exceeds max_position_embeddings "
                f"{self.position_embeddings.num_embeddings}; truncate the input"
            )
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        if token_type_ids is None:
            embeddings = embeddings + self.token_type_embeddings.weight[0]
        else:
            embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))
