"""The family contract (`PreTrainedModel`), the BERT encoder and the models built directly on it."""

from bertkit.model.bert import BertForPreTraining, BertModel, BertPreTrainedModel
from bertkit.model.outputs import (
    BertForPreTrainingOutput,
    BertModelOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from bertkit.model.pretrained import PreTrainedModel
from bertkit.model.task_heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

__all__ = [
    "PreTrainedModel", "BertModel", "BertForPreTraining", "BertPreTrainedModel", "BertModelOutput",
    "BertForPreTrainingOutput",
    "BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering",
    "BertForMultipleChoice", "SequenceClassifierOutput", "TokenClassifierOutput",
    "QuestionAnsweringModelOutput", "MultipleChoiceModelOutput",
]
