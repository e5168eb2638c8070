"""The BERT encoder and the models built directly on it."""

from bertkit.model.bert import BertForPreTraining, BertModel, BertPreTrainedModel
from bertkit.model.outputs import BertForPreTrainingOutput, BertModelOutput

__all__ = ["BertModel", "BertForPreTraining", "BertPreTrainedModel", "BertModelOutput", "BertForPreTrainingOutput"]
