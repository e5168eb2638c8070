"""BERT: the encoder (`BertModel`), pre-training (`BertForPreTraining`), its config and task heads.

The family's public classes; helpers are imported from their modules (config, modeling, ...).
"""

from __future__ import annotations

from bertkit.model.bert.config import (
    BertConfig,
)
from bertkit.model.bert.modeling import (
    BertPreTrainedModel, BertModel, BertForPreTraining,
)
from bertkit.model.bert.task_heads import (
    BertTaskModel, BertForSequenceClassification, BertForTokenClassification, BertForQuestionAnswering,
    BertForMultipleChoice,
)

__all__ = [
    "BertConfig", "BertPreTrainedModel", "BertModel", "BertForPreTraining", "BertTaskModel",
    "BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering",
    "BertForMultipleChoice",
]
