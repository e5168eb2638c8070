"""Multi-head bidirectional self-attention through `F.scaled_dot_product_attention`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.dropout import Dropout, dropout
from bertkit.model.query_rows import QueryRows
from bertkit.model.unpad import Unpadding
from bertkit.model.varlen import packed_attention, use_varlen

if TYPE_CHECKING:  # annotation only
    from bertkit.model.encoder_config import EncoderConfig


class BertSelfAttention(nn.Module):
    """softmax(Q K^T / sqrt(d_head)) V per head, padding keys masked out.

    Attention runs in `F.scaled_dot_product_attention`, except when the probabilities
    are asked for and when training with attention dropout on CPU: there it is computed
    explicitly, because SDPA's CPU fallback for dropout is the same computation plus
    three passes over the (B, heads, T, T) scores for fully masked rows and a slower
    dropout (see bertkit.model.dropout); 7-8% of a BERT-mini training step.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def _project(
        self, hidden_states: torch.Tensor, query_scale: float, unpadding: Unpadding | None = None,
        query_rows: QueryRows | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """(B, T, H) -> query, key, value (B, heads, T, d_head); the query times `query_scale`.

        With `unpadding`, hidden_states are packed (N, H) rows: projected as rows, then
        scattered into (B, heads, T, d_head) with zeros at padding. With `query_rows`,
        queries are projected at its rows only: (B, heads, M_max, d_head)."""
        query_input = hidden_states if query_rows is None else query_rows.select(hidden_states)  # (M, H)
        if query_scale != 1.0 and isinstance(self.query.weight, torch.Tensor):
            # folded into the (H, H) weight: free, unlike scaling the (B, heads, T, T) scores
            bias = None if self.query.bias is None else self.query.bias * query_scale  # BigBird's use_bias=False
            query = F.linear(query_input, self.query.weight * query_scale, bias)
        else:  # also a dynamically quantized Linear (int8 inference), whose weight is packed
            query = self.query(query_input)
            if query_scale != 1.0:
                query = query * query_scale
        projections = (self.key(hidden_states), self.value(hidden_states))  # 2 x (B, T, H) or (N, H)
        if unpadding is not None:
            key, value = (unpadding.pad_heads(x, self.num_heads) for x in projections)
        else:
            batch, seq_len, _ = hidden_states.shape
            key, value = (x.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2) for x in projections)
        if query_rows is not None:
            query = query_rows.to_query_layout(query, self.num_heads)
        elif unpadding is not None:
            query = unpadding.pad_heads(query, self.num_heads)
        else:
            query = query.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        return query, key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool = False,
        unpadding: Unpadding | None = None,
        query_rows: QueryRows | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, T, H); attention_mask: (B, 1, 1, T) bool, True = attend.

        Returns the context (B, T, H) and, on request, the attention probabilities
        (B, heads, T, T) — computed explicitly then, since SDPA does not expose them.
        With `unpadding` (bertkit.model.unpad), hidden_states and the context are packed
        (N, H) rows of the real tokens; attention itself runs padded, masked by
        `attention_mask` as above. With `query_rows` (bertkit.model.query_rows), only those
        positions query: the context is (M, H), one row per read position.
        """
        dropout_p = self.dropout_p if self.training else 0.0
        probs = None
        explicit = output_attentions or (dropout_p > 0.0 and hidden_states.device.type == "cpu")
        if unpadding is not None and query_rows is None and not explicit and use_varlen(hidden_states.device):
            # packed rows straight into the variable-length kernels: no padding anywhere (bertkit.model.varlen)
            projections = (self.query(hidden_states), self.key(hidden_states), self.value(hidden_states))
            return packed_attention(*projections, unpadding.offsets, self.num_heads, dropout_p), None  # (N, H)
        if explicit:
            query, key, value = self._project(hidden_states, 1.0 / math.sqrt(self.head_dim), unpadding, query_rows)
            scores = query @ key.transpose(-1, -2)  # (B, heads, T, T)
            if attention_mask is not None:
                scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
            probs = scores.softmax(dim=-1)
            context = dropout(probs, dropout_p, self.training) @ value
            if not output_attentions:
                probs = None
        else:
            query, key, value = self._project(hidden_states, 1.0, unpadding, query_rows)
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout_p)
        if query_rows is not None:
            return query_rows.from_query_layout(context), probs  # (M, H)
        if unpadding is not None:
            return unpadding.pack_heads(context), probs  # (N, H)
        batch, _, seq_len, _ = context.shape
        context = context.transpose(1, 2).reshape(batch, seq_len, self.num_heads * self.head_dim)  # (B, T, H)
        return context, probs


class BertSublayerOutput(nn.Module):
    """A sub-layer's projection back to H, its dropout and its LayerNorm (HF's BertSelfOutput / BertOutput).

    Holds the modules only: `BertLayer` applies them with the residual, post- or pre-LN.
    """

    def __init__(self, in_features: int, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)


class BertAttention(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSublayerOutput(config.hidden_size, config)
