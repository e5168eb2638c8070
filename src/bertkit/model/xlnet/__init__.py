"""XLNet: two-stream relative attention, the permutation LM and its task heads.

The family's public classes; helpers are imported from their modules (config, modeling, ...).
"""

from __future__ import annotations

from bertkit.model.xlnet.config import (
    XLNetConfig,
)
from bertkit.model.xlnet.modeling import (
    XLNetModelOutput, XLNetLMHeadModelOutput, XLNetForSequenceClassificationOutput,
    XLNetForQuestionAnsweringSimpleOutput, XLNetPreTrainedModel, XLNetModel, XLNetLMHeadModel,
    XLNetForSequenceClassification, XLNetForTokenClassification, XLNetForQuestionAnsweringSimple,
    XLNetForMultipleChoice,
)

__all__ = [
    "XLNetConfig", "XLNetModelOutput", "XLNetLMHeadModelOutput", "XLNetForSequenceClassificationOutput",
    "XLNetForQuestionAnsweringSimpleOutput", "XLNetPreTrainedModel", "XLNetModel", "XLNetLMHeadModel",
    "XLNetForSequenceClassification", "XLNetForTokenClassification", "XLNetForQuestionAnsweringSimple",
    "XLNetForMultipleChoice",
]
