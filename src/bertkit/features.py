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

    D = 4H for "concat_last_four", H otherwise. "weighted_sum" / "scalar_mix" use `layer_weights`
    (one per hidden state, L+1 values) or uniform weights; "average" is the mean of all;
    "all" keeps every layer: (B, T, L+1, H).
    """
    if layers in ("last", "top"):
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
    if layers == "average":
        return torch.stack(tuple(hidden_states)).mean(0)
    if layers == "all":
        return torch.stack(tuple(hidden_states), dim=2)  # (B, T, L+1, H)
    if layers in ("weighted_sum", "scalar_mix"):
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
        if features.dim() == 4:  # every layer kept ("all"): (B, T, L+1, H) -> (B, L+1, H)
            return torch.stack([mean_over_tokens(f, attention_mask) for f in features.unbind(2)], dim=1)
        return mean_over_tokens(features, attention_mask)
    raise BertkitError(f"pooling: unknown choice {pooling!r}; choose one of {', '.join(POOLING_CHOICES)}")


def classification_positions(input_ids: torch.Tensor, cls_token_id: int | None) -> torch.Tensor:
    """(B, T) ids -> (B,) the position of each row's first classification token (0 when the
    row has none or the tokenizer defines none)."""
    if cls_token_id is None:
        return torch.zeros(input_ids.shape[0], dtype=torch.long, device=input_ids.device)
    found = input_ids == cls_token_id
    return torch.where(found.any(1), found.to(torch.int8).argmax(1), 0)


# ---- a word-level model (ELMo) as a token encoder ------------------------------------------------
class WordLevelEncoder(torch.nn.Module):
    """A model that reads words (its family's `reads_words`: ELMo) called like a token encoder:
    (input_ids, attention_mask[, word_ids]) (B, T) -> hidden states (B, T, H) per layer, each
    token carrying its word's vector (special tokens and padding 0). Words are the tokenizer's
    (bertkit.data.words), or the given words of a tagging window (`word_ids`), so the feature
    path, the tagger and `embed` read the same words. `config`: the model's."""

    input_names = ("input_ids", "attention_mask", "word_ids")  # what `model_inputs` hands it

    def __init__(self, model: torch.nn.Module, tokenizer):
        from bertkit.data.words import TokenWords

        super().__init__()
        self.model = model
        self.words = TokenWords(tokenizer)
        self.config = model.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                word_ids: torch.Tensor | None = None, output_hidden_states: bool = True, **unused):
        from bertkit.model.outputs import BertModelOutput

        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        sentences, positions = [], []
        for row in range(input_ids.shape[0]):
            real = attention_mask[row].bool().cpu().numpy()
            ids = input_ids[row].cpu().numpy()[real]
            given = None if word_ids is None else word_ids[row].cpu().numpy()[real]
            words, index = self.words.grouped_words(ids, given)
            sentences.append(words or [self.words.tokenizer.unk_token or "?"])  # a row without words: one stand-in
            full = torch.full((input_ids.shape[1],), -1, dtype=torch.long)
            full[torch.from_numpy(real)] = torch.from_numpy(index)
            positions.append(full)
        layers, _ = self.model.embed_words(sentences)  # (B, L + 1, W, H)
        index = torch.stack(positions).to(layers.device)  # (B, T)
        gathered = layers.gather(2, index.clamp_min(0)[:, None, :, None].expand(-1, layers.shape[1], -1,
                                                                                layers.shape[-1]))  # (B, L + 1, T, H)
        gathered = gathered * (index >= 0)[:, None, :, None].to(gathered.dtype)
        hidden = tuple(gathered.unbind(1))
        return BertModelOutput(last_hidden_state=hidden[-1], hidden_states=hidden)


def load_feature_encoder(directory, config, tokenizer) -> torch.nn.Module:
    """The frozen encoder of the feature path: the family's bare model from `directory` (with
    `config`), a word-reading one wrapped as a token encoder (`WordLevelEncoder`)."""
    from bertkit.model.families import family_for_config

    family = family_for_config(config)
    model = family.backbone_class().from_pretrained(directory, config=config)
    return WordLevelEncoder(model, tokenizer) if family.reads_words else model
