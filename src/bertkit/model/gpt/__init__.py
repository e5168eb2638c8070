"""GPT-2 and GPT-1 (OpenAI GPT): the decoder-only family, its heads and generation.

The family's public classes; helpers are imported from their modules (config, layers, modeling).
"""

from __future__ import annotations

from bertkit.model.gpt.config import GPT2Config, OpenAIGPTConfig
from bertkit.model.gpt.modeling import (
    BaseModelOutputWithPast, CausalLMOutputWithPast, GPT2DoubleHeadsModel, GPT2DoubleHeadsModelOutput,
    GPT2ForSequenceClassification, GPT2LMHeadModel, GPT2Model, GPT2PreTrainedModel, OpenAIGPTDoubleHeadsModel,
    OpenAIGPTForSequenceClassification, OpenAIGPTLMHeadModel, OpenAIGPTModel, OpenAIGPTPreTrainedModel,
    SequenceClassifierOutputWithPast,
)

__all__ = [
    "GPT2Config", "OpenAIGPTConfig", "BaseModelOutputWithPast", "CausalLMOutputWithPast", "GPT2DoubleHeadsModelOutput",
    "SequenceClassifierOutputWithPast", "GPT2PreTrainedModel", "GPT2Model", "GPT2LMHeadModel", "GPT2DoubleHeadsModel",
    "GPT2ForSequenceClassification", "OpenAIGPTPreTrainedModel", "OpenAIGPTModel", "OpenAIGPTLMHeadModel",
    "OpenAIGPTDoubleHeadsModel", "OpenAIGPTForSequenceClassification",
]
