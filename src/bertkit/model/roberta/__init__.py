"""RoBERTa: BERT with RoBERTa's embeddings (positions offset past padding) and LM head.

The family's public classes; helpers are imported from their modules (config, modeling, ...).
"""

from __future__ import annotations

from bertkit.model.roberta.modeling import (
    RobertaConfig, RobertaPreTrainedModel, RobertaModel, RobertaForMaskedLM,
    RobertaForSequenceClassification, RobertaForTokenClassification, RobertaForQuestionAnswering,
    RobertaForMultipleChoice,
)

__all__ = [
    "RobertaConfig", "RobertaPreTrainedModel", "RobertaModel", "RobertaForMaskedLM",
    "RobertaForSequenceClassification", "RobertaForTokenClassification", "RobertaForQuestionAnswering",
    "RobertaForMultipleChoice",
]
