"""Typed model outputs (HF-style: attribute access, `out["name"]`, and `to_tuple()`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


class ModelOutput:
    def __getitem__(self, key: str | int):
        if isinstance(key, str):
            return getattr(self, key)
        return self.to_tuple()[key]

    def to_tuple(self) -> tuple:
        """The non-None fields in declaration order (as HF's ModelOutput)."""
        return tuple(v for v in (getattr(self, f.name) for f in dataclasses.fields(self)) if v is not None)


@dataclass
class BertModelOutput(ModelOutput):
    """last_hidden_state (B, T, H); pooler_output (B, H) or None when the model has no
    pooler; hidden_states: L+1 tensors (B, T, H), the embeddings first; attentions: L
    tensors (B, heads, T, T). Hidden states at padding positions are not meaningful:
    zeros on the unpadded encoder path (bertkit.model.unpad)."""

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class BertForPreTrainingOutput(ModelOutput):
    """loss: MLM (+ NSP when `next_sentence_label` is given), scalar.

    prediction_logits: (B, T, V) when no `labels` are given; with `labels` only the
    labelled positions are projected onto the vocabulary, giving (N, V) for the N
    positions with label != -100 in row-major order (see `masked_positions`).
    seq_relationship_logits: (B, 2), index 0 = IsNext, 1 = NotNext.
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    masked_positions: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class SequenceClassifierOutput(ModelOutput):
    """loss: scalar (CE, MSE or BCE by problem type); logits: (B, num_labels) float."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class TokenClassifierOutput(ModelOutput):
    """loss: scalar CE over positions with label != -100; logits: (B, T, num_labels)
    (not meaningful at padding positions)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class QuestionAnsweringModelOutput(ModelOutput):
    """loss: scalar, mean of the start and end CE; start_logits, end_logits: (B, T),
    `finfo.min` at padding positions."""

    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class MultipleChoiceModelOutput(ModelOutput):
    """loss: scalar CE over the choices; logits: (B, C) one score per choice.
    hidden_states / attentions are those of the flattened (B * C, T) batch."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class MaskedLMOutput(ModelOutput):
    """loss: mean CE over the labelled positions; logits: (B, T, V) without `labels`, else
    (N, V) at the N positions with label != -100 (row-major, see `masked_positions` (N, 2))."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    masked_positions: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
