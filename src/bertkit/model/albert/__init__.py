"""ALBERT: factorised embeddings, shared layers, SOP, and its task heads.

The family's public classes; helpers are imported from their modules (config, modeling, ...).
"""

from __future__ import annotations

from bertkit.model.albert.modeling import (
    AlbertConfig, AlbertPreTrainedModel, AlbertForPreTrainingOutput, AlbertModel, AlbertForPreTraining,
    AlbertForMaskedLM, AlbertForSequenceClassification, AlbertForTokenClassification,
    AlbertForQuestionAnswering, AlbertForMultipleChoice,
)

__all__ = [
    "AlbertConfig", "AlbertPreTrainedModel", "AlbertForPreTrainingOutput", "AlbertModel",
    "AlbertForPreTraining", "AlbertForMaskedLM", "AlbertForSequenceClassification",
    "AlbertForTokenClassification", "AlbertForQuestionAnswering", "AlbertForMultipleChoice",
]
