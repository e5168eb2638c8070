"""ELECTRA: the discriminator, the MLM generator and their task heads.

The family's public classes; helpers are imported from their modules (config, modeling, ...).
"""

from __future__ import annotations

from bertkit.model.electra.modeling import (
    ElectraConfig, ElectraPreTrainedModel, ElectraModel, ElectraForPreTrainingOutput,
    ElectraForPreTraining, ElectraForMaskedLM, ElectraForSequenceClassification,
    ElectraForTokenClassification, ElectraForQuestionAnswering, ElectraForMultipleChoice,
)

__all__ = [
    "ElectraConfig", "ElectraPreTrainedModel", "ElectraModel", "ElectraForPreTrainingOutput",
    "ElectraForPreTraining", "ElectraForMaskedLM", "ElectraForSequenceClassification",
    "ElectraForTokenClassification", "ElectraForQuestionAnswering", "ElectraForMultipleChoice",
]
