"""ModernBERT: a pre-LN encoder with rotary positions, alternating global / sliding-window attention,
GeGLU and no biases (transformers' ModernBert classes, checkpoints both ways).

The family's public classes; helpers are imported from their modules (config, modeling).
"""

from __future__ import annotations

from bertkit.model.modernbert.config import ModernBertConfig
from bertkit.model.modernbert.modeling import (
    ModernBertForMaskedLM, ModernBertForMultipleChoice, ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification, ModernBertForTokenClassification, ModernBertModel, ModernBertPreTrainedModel,
)

__all__ = [
    "ModernBertConfig", "ModernBertPreTrainedModel", "ModernBertModel", "ModernBertForMaskedLM",
    "ModernBertForSequenceClassification", "ModernBertForTokenClassification", "ModernBertForQuestionAnswering",
    "ModernBertForMultipleChoice",
]
