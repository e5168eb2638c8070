"""BigBird (KoBigBird): BERT's encoder with block-sparse attention for inputs of thousands of tokens.

The family's public classes; helpers are imported from their modules (config, attention, modeling).
"""

from __future__ import annotations

from bertkit.model.bigbird.config import BigBirdConfig
from bertkit.model.bigbird.modeling import (
    BigBirdForMaskedLM, BigBirdForMultipleChoice, BigBirdForQuestionAnswering, BigBirdForSequenceClassification,
    BigBirdForTokenClassification, BigBirdModel, BigBirdPreTrainedModel,
)

__all__ = [
    "BigBirdConfig", "BigBirdPreTrainedModel", "BigBirdModel", "BigBirdForMaskedLM",
    "BigBirdForSequenceClassification", "BigBirdForTokenClassification", "BigBirdForQuestionAnswering",
    "BigBirdForMultipleChoice",
]
