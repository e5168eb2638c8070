"""The model layer: the family contract (`PreTrainedModel`, the `MODEL_FAMILIES` registry),
what families share (attention, embeddings, layers, heads, losses, generation, unpadding,
typed outputs) and one package per family (`bert/`, `roberta/`, `electra/`, `albert/`,
`t5/`, `xlnet/`). Public classes are reached from the top level (`from bertkit import
BertModel`) or their family package (`from bertkit.model.bert import BertModel`).
"""

from bertkit.model.outputs import (
    BertForPreTrainingOutput,
    BertModelOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from bertkit.model.pretrained import PreTrainedModel

__all__ = [
    "PreTrainedModel", "BertModelOutput", "BertForPreTrainingOutput", "SequenceClassifierOutput",
    "TokenClassifierOutput", "QuestionAnsweringModelOutput", "MultipleChoiceModelOutput",
]
