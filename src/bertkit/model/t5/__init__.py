"""T5: the encoder-decoder with relative position buckets, generation and its classifier.

The family's public classes; helpers are imported from their modules (config, modeling, ...).
"""

from __future__ import annotations

from bertkit.model.t5.modeling import (
    T5Config, Seq2SeqModelOutput, Seq2SeqLMOutput, T5PreTrainedModel, T5Model,
    T5ForConditionalGeneration, T5EncoderModel, T5EncoderForSequenceClassification,
)

__all__ = [
    "T5Config", "Seq2SeqModelOutput", "Seq2SeqLMOutput", "T5PreTrainedModel", "T5Model",
    "T5ForConditionalGeneration", "T5EncoderModel", "T5EncoderForSequenceClassification",
]
