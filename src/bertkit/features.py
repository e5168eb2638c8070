"""The feature-based approach: contextual features from a frozen encoder's hidden states.

A choice of layers — the BERT paper's Table 7 variants — combined into one vector per
token (`select_layers`) and a pooling over tokens (`pool_tokens`). `bertkit.embed`
(bertkit.inference.embedding) and the feature-based tagger (bertkit.tasks.feature_tagger)
both build their features here, so a tagger sees exactly what `embed` returns.
"""

from __future__ import annotations

from typing import Sequence

import torch

from bertkit.errors import BertkitError
from bertkit.feature_choices import LAYER_CHOICES, POOLING_CHOICES
from bertkit.model.layers import mean_over_tokens


def select_layers(
    hidden_states: Sequence[torch.Tensor], layers: str, layer_weights: Sequence[float] | None = None
) -> torch.Tensor:
    """Combine the L+1 hidden states (embeddings first), each (B, T, H), into (B, T, D).

    D = 4H for "concat_last_four", H otherwise. "weighted_sum" uses `layer_weights`
    (one per hidden state, L+1 values) or uniform weights.
    """
    if layers == "last":
        return hidden_states[-1]
    if layers == "second_to_last":
        return hidden_states[-2]
    if layers == "embeddings":
        return hidden_states[0]
    if layers in ("sum_last_four", "concat_last_four"):
        if len(hidden_states) < 5:
            raise BertkitError(f"layers={layers!r} needs a model with at least 4 layers")
        last_four = hidden_states[-4:]
        return torch.stack(last_four).sum(0) if layers == "sum_last_four" else torch.cat(last_four, dim=-1)
    if layers == "weighted_sum":
        count = len(hidden_states)
        weights = torch.full((count,), 1.0 / count) if layer_weights is None else torch.tensor(layer_weights, dtype=torch.float32)
        if weights.numel() != count:
            raise BertkitError(f"layer_weights: expected {count} values (embeddings + each layer), got {weights.numel()}")
        return torch.einsum("l,lbth->bth", weights.to(hidden_states[0]), torch.stack(hidden_states))
    raise BertkitError(f"layers: unknown choice {layers!r}; choose one of {', '.join(LAYER_CHOICES)}")


def pool_tokens(
    features: torch.Tensor, attention_mask: torch.Tensor, pooling: str, cls_positions: torch.Tensor | None = None
) -> torch.Tensor:
    """(B, T, D) token features -> (B, D): "cls" = the classification token (`cls_positions`
    (B,): [CLS] at 0 for BERT, <cls> at the end for XLNet; position 0 when None), "mean" =
    over real tokens."""
    if pooling == "cls":
        if cls_positions is None:
            return features[:, 0]
        return features[torch.arange(features.shape[0], device=features.device), cls_positions.to(features.device)]
    if pooling == "mean":
        return mean_over_tokens(features, attention_mask)
    raise BertkitError(f"pooling: unknown choice {pooling!r}; choose one of {', '.join(POOLING_CHOICES)}")


def classification_positions(input_ids: torch.Tensor, cls_token_id: int | None) -> torch.Tensor:
    """(B, T) ids -> (B,) the position of each row's first classification token (0 when the
    row has none or the tokenizer defines none)."""
    if cls_token_id is None:
        return torch.zeros(input_ids.shape[0], dtype=torch.long, device=input_ids.device)
    found = input_ids == cls_token_id
    return torch.where(found.any(1), found.to(torch.int8).argmax(1), 0)
