"""Transformer encoder layers (post-LN as in BERT, or pre-LN) and the layer stack."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.attention import BertAttention, BertSublayerOutput
from bertkit.model.query_rows import QueryRows
from bertkit.model.unpad import Unpadding

if TYPE_CHECKING:  # annotation only
    from bertkit.model.encoder_config import EncoderConfig

ACTIVATIONS = {
    "gelu": F.gelu,  # exact x * Phi(x)
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


class BertIntermediate(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACTIVATIONS[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(hidden_states))  # (B, T, 4H)


class BertLayer(nn.Module):
    """Self-attention + FFN, each with dropout and a residual connection.

    Post-LN (BERT): x = LN(x + drop(attn(x))); x = LN(x + drop(ffn(x))).
    Pre-LN:         x = x + drop(attn(LN(x))); x = x + drop(ffn(LN(x))).
    Both variants use the same modules (and so the same HF state-dict keys): in pre-LN
    mode `attention.output.LayerNorm` normalizes the attention input and
    `output.LayerNorm` the FFN input.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.pre_layer_norm = config.pre_layer_norm
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertSublayerOutput(config.intermediate_size, config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool = False,
        unpadding: Unpadding | None = None,
        query_rows: QueryRows | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, T, H) -> (B, T, H), attention probs (B, heads, T, T) or None.

        With `unpadding`, hidden_states are packed (N, H) rows of the real tokens and so is
        the result: everything but attention is row-wise (bertkit.model.unpad). With
        `query_rows`, the result is (M, H): the layer at those positions only
        (bertkit.model.query_rows)."""
        attn_out, ffn_out = self.attention.output, self.output
        residual = hidden_states if query_rows is None else query_rows.select(hidden_states)  # (M, H)
        if self.pre_layer_norm:
            context, probs = self.attention.self(
                attn_out.LayerNorm(hidden_states), attention_mask, output_attentions, unpadding, query_rows
            )
            hidden_states = residual + attn_out.dropout(attn_out.dense(context))
            ffn = ffn_out.dense(self.intermediate(ffn_out.LayerNorm(hidden_states)))
            return hidden_states + ffn_out.dropout(ffn), probs
        context, probs = self.attention.self(hidden_states, attention_mask, output_attentions, unpadding, query_rows)
        hidden_states = attn_out.LayerNorm(residual + attn_out.dropout(attn_out.dense(context)))
        ffn = ffn_out.dense(self.intermediate(hidden_states))
        return ffn_out.LayerNorm(hidden_states + ffn_out.dropout(ffn)), probs


class BertEncoder(nn.Module):
    """A stack of `BertLayer`s (plus a final LayerNorm in pre-LN mode).

    ALBERT's cross-layer sharing fits here: one layer applied `num_hidden_layers` times.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.final_layer_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        unpadding: Unpadding | None = None,
        query_rows: QueryRows | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]:
        """Returns last (B, T, H), all hidden states (embeddings + each layer) and attentions.

        In pre-LN mode the last entry of `hidden_states` is after the final LayerNorm.
        With `unpadding`, the input and every returned hidden state are packed (N, H) rows.
        With `query_rows`, the last layer runs at those positions only and `last` is (M, H)
        (not with output_hidden_states).
        """
        all_hidden = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for index, layer in enumerate(self.layer):
            last_rows = query_rows if index == len(self.layer) - 1 else None
            if unpadding is None and last_rows is None:
                hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)
            else:
                hidden_states, probs = layer(hidden_states, attention_mask, output_attentions, unpadding=unpadding,
                                             query_rows=last_rows)
            if self.final_layer_norm is not None and index == len(self.layer) - 1:
                hidden_states = self.final_layer_norm(hidden_states)
            if all_hidden is not None:
                all_hidden.append(hidden_states)
            if all_attentions is not None:
                all_attentions.append(probs)
        return (
            hidden_states,
            tuple(all_hidden) if all_hidden is not None else None,
            tuple(all_attentions) if all_attentions is not None else None,
        )


def mean_over_tokens(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T, H) states -> (B, H): their mean over the real tokens (mask 1; all when None)."""
    if attention_mask is None:
        return hidden.mean(1)
    weights = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
