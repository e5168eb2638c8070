"""BART: the denoising encoder-decoder (post-LN, GELU, learned positions with fairseq's offset).

The family's public classes; helpers are imported from their modules (config, layers, modeling).
"""

from __future__ import annotations

from bertkit.model.bart.config import BartConfig
from bertkit.model.bart.modeling import (
    BartForConditionalGeneration,
    BartForQuestionAnswering,
    BartForSequenceClassification,
    BartModel,
    BartPreTrainedModel,
)

__all__ = ["BartConfig", "BartPreTrainedModel", "BartModel", "BartForConditionalGeneration",
           "BartForSequenceClassification", "BartForQuestionAnswering"]
