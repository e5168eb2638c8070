"""Multi-head bidirectional self-attention through `F.scaled_dot_product_attention`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.config import BertConfig


class BertSelfAttention(nn.Module):
    """softmax(Q K^T / sqrt(d_head)) V per head, padding keys masked out."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B, heads, T, d_head)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, output_attentions: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, T, H); attention_mask: (B, 1, 1, T) bool, True = attend.

        Returns the context (B, T, H) and, on request, the attention probabilities
        (B, heads, T, T) — computed explicitly then, since SDPA does not expose them.
        """
        query = self._split_heads(self.query(hidden_states))
        key = self._split_heads(self.key(hidden_states))
        value = self._split_heads(self.value(hidden_states))
        dropout_p = self.dropout_p if self.training else 0.0
        probs = None
        if output_attentions:
            scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)  # (B, heads, T, T)
            if attention_mask is not None:
                scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
            probs = scores.softmax(dim=-1)
            context = F.dropout(probs, dropout_p, self.training) @ value
        else:
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout_p)
        batch, _, seq_len, _ = context.shape
        context = context.transpose(1, 2).reshape(batch, seq_len, self.num_heads * self.head_dim)  # (B, T, H)
        return context, probs


class BertSublayerOutput(nn.Module):
    """A sub-layer's projection back to H, its dropout and its LayerNorm (HF's BertSelfOutput / BertOutput).

    Holds the modules only: `BertLayer` applies them with the residual, post- or pre-LN.
    """

    def __init__(self, in_features: int, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSublayerOutput(config.hidden_size, config)
