"""DeBERTa's disentangled self-attention (He et al., 2021, sec. 3.1; v2/v3's log buckets and shared key).

A token is a content vector H_i and a relative position delta(i, j); the attention score sums

    content-to-content   Q^c_i . K^c_j
    content-to-position  Q^c_i . K^r_{delta(i, j)}          ("c2p")
    position-to-content  K^c_j . Q^r_{delta(j, i)}          ("p2c")

over d_head, scaled by 1 / sqrt(d_head * (1 + number of position terms)). delta(i, j) = i - j,
clamped into [-k, k) and shifted to a row of the (2k, H) relative embedding table; with
`position_buckets` the distances past k/2 are log-bucketed first (v2), so a table of 2 x 256 rows
covers any length. The positions are projected by the layer's own query/key projections
(`share_att_key`, v2/v3) or by `pos_query_proj` / `pos_key_proj`.

Attribute names are transformers' (`query_proj`, `key_proj`, `value_proj`, `pos_key_proj`,
`pos_query_proj`), so its checkpoints load as they are.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.dropout import Dropout, dropout

if TYPE_CHECKING:  # annotation only
    from bertkit.model.deberta.config import DebertaV2Config


def log_bucket_positions(relative: torch.Tensor, buckets: int, max_position: int) -> torch.Tensor:
    """Relative distances (any shape, int64) -> bucketed distances (int64): |d| <= buckets/2 kept,
    larger ones mapped log-linearly so that max_position lands near `buckets`, the sign kept."""
    mid = buckets // 2
    distance = relative.abs()
    near = distance <= mid
    # the log of a distance under mid is never used; clamp it away from 0 and below mid
    far = distance.clamp(min=mid).to(torch.float32)
    ratio = torch.log(torch.tensor((max_position - 1) / mid, dtype=torch.float32, device=relative.device))  # float32, as published
    log_position = torch.ceil(torch.log(far / mid) / ratio * (mid - 1)) + mid
    return torch.where(near, relative, (log_position * relative.sign()).to(relative.dtype))


def relative_positions(length: int, config: DebertaV2Config, device: torch.device) -> torch.Tensor:
    """(T, T) int64 delta(i, j) = i - j, log-bucketed when the config has `position_buckets`."""
    positions = torch.arange(length, device=device)
    relative = positions[:, None] - positions[None, :]  # (T, T)
    if config.position_buckets > 0:
        limit = config.max_relative_positions if config.max_relative_positions >= 1 else config.max_position_embeddings
        relative = log_bucket_positions(relative, config.position_buckets, limit)
    return relative


class DisentangledSelfAttention(nn.Module):
    """Content and relative-position attention (see the module docstring)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        hidden = config.hidden_size
        self.query_proj = nn.Linear(hidden, hidden)
        self.key_proj = nn.Linear(hidden, hidden)
        self.value_proj = nn.Linear(hidden, hidden)
        self.terms = config.position_terms
        self.span = config.relative_span
        self.share_att_key = config.share_att_key
        if self.terms:
            self.pos_dropout = Dropout(config.hidden_dropout_prob)
            if not self.share_att_key:
                if "c2p" in self.terms:
                    self.pos_key_proj = nn.Linear(hidden, hidden)
                if "p2c" in self.terms:
                    self.pos_query_proj = nn.Linear(hidden, hidden)
        self.dropout_p = config.attention_probs_dropout_prob
        self.scale = 1.0 / math.sqrt(self.head_dim * (1 + len(self.terms)))

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(..., T, H) -> (..., heads, T, d_head)."""
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    def position_bias(self, query: torch.Tensor, key: torch.Tensor, relative: torch.Tensor,
                      rel_embeddings: torch.Tensor) -> torch.Tensor:
        """The c2p and p2c scores (B, heads, T, T), unscaled. query, key: (B, heads, T, d_head);
        relative: (T, T) delta(i, j); rel_embeddings: (2k, H) the relative embedding table."""
        table = self.pos_dropout(rel_embeddings[: 2 * self.span])  # (2k, H)
        batch, heads, length, _ = query.shape
        index_shape = (batch, heads, length, length)
        bias = 0
        if "c2p" in self.terms:
            pos_key = self._heads(self.key_proj(table) if self.share_att_key else self.pos_key_proj(table))  # (heads, 2k, d)
            c2p = query @ pos_key.transpose(-1, -2)  # (B, heads, T, 2k): every query against every distance
            index = (relative + self.span).clamp(0, 2 * self.span - 1)  # (T, T) row of delta(i, j)
            bias = bias + c2p.gather(-1, index.expand(index_shape))
        if "p2c" in self.terms:
            pos_query = self._heads(self.query_proj(table) if self.share_att_key else self.pos_query_proj(table))
            p2c = key @ pos_query.transpose(-1, -2)  # (B, heads, T, 2k): every key against every distance
            index = (self.span - relative).clamp(0, 2 * self.span - 1)  # (T, T): [j, i] the row of delta(i, j)
            bias = bias + p2c.gather(-1, index.expand(index_shape)).transpose(-1, -2)  # [i, j] = K_j . Q^r_{d(i,j)}
        return bias

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_keep: torch.Tensor | None,
        relative: torch.Tensor | None = None,
        rel_embeddings: torch.Tensor | None = None,
        output_attentions: bool = False,
        query_states: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, T, H) the keys' and values' states (and the queries' unless `query_states`
        (B, T, H) is given: the enhanced mask decoder's); key_keep: (B, 1, 1, T) bool, True = a real key
        (None: no padding); relative (T, T) and rel_embeddings (2k, H) when the config has position terms.
        Returns the context (B, T, H) and, on request, the attention probabilities (B, heads, T, T)."""
        queries = hidden_states if query_states is None else query_states
        query = self._heads(self.query_proj(queries))  # (B, heads, T, d)
        key, value = (self._heads(proj(hidden_states)) for proj in (self.key_proj, self.value_proj))
        bias = None
        if self.terms:
            bias = self.position_bias(query, key, relative, rel_embeddings) * self.scale  # (B, heads, T, T)
        if key_keep is not None:
            keep_bias = torch.zeros(key_keep.shape, dtype=query.dtype, device=query.device)
            keep_bias = keep_bias.masked_fill(~key_keep, torch.finfo(query.dtype).min)  # (B, 1, 1, T)
            bias = keep_bias if bias is None else bias + keep_bias
        dropout_p = self.dropout_p if self.training else 0.0
        probs = None
        if output_attentions or (dropout_p > 0.0 and hidden_states.device.type == "cpu"):  # see BertSelfAttention
            scores = (query @ key.transpose(-1, -2)) * self.scale  # (B, heads, T, T)
            if bias is not None:
                scores = scores + bias
            probs = scores.softmax(dim=-1)
            context = dropout(probs, dropout_p, self.training) @ value
            probs = probs if output_attentions else None
        else:
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, dropout_p=dropout_p,
                                                     scale=self.scale)
        return context.transpose(1, 2).flatten(2), probs  # (B, T, H)
