"""DeBERTa-v2/v3: the encoder with disentangled attention, its masked LM and task heads.

The family's public classes; helpers are imported from their modules (config, attention, modeling).
"""

from __future__ import annotations

from bertkit.model.deberta.config import DebertaV2Config
from bertkit.model.deberta.modeling import (
    DebertaV2PreTrainedModel, DebertaV2Model, DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification,
    DebertaV2ForTokenClassification, DebertaV2ForQuestionAnswering, DebertaV2ForMultipleChoice,
)

__all__ = [
    "DebertaV2Config", "DebertaV2PreTrainedModel", "DebertaV2Model", "DebertaV2ForMaskedLM",
    "DebertaV2ForSequenceClassification", "DebertaV2ForTokenClassification", "DebertaV2ForQuestionAnswering",
    "DebertaV2ForMultipleChoice",
]
