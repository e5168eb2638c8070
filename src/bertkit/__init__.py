"""bertkit: a complete, fast, practical BERT system.

The public API mirrors Hugging Face names: `BertConfig`, `BertModel`,
`BertForPreTraining`, `Tokenizer` with `from_pretrained` / `save_pretrained`.
Heavy modules are imported lazily so `bertkit --help` stays fast.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "BertConfig": "bertkit.model.bert",
    "PretrainedConfig": "bertkit.pretrained_config",
    "PreTrainedModel": "bertkit.model",
    "BertModel": "bertkit.model.bert",
    "BertForPreTraining": "bertkit.model.bert",
    "BertModelOutput": "bertkit.model",
    "BertForPreTrainingOutput": "bertkit.model",
    "BertForSequenceClassification": "bertkit.model.bert",
    "BertForTokenClassification": "bertkit.model.bert",
    "BertForQuestionAnswering": "bertkit.model.bert",
    "BertForMultipleChoice": "bertkit.model.bert",
    "SequenceClassifierOutput": "bertkit.model",
    "TokenClassifierOutput": "bertkit.model",
    "QuestionAnsweringModelOutput": "bertkit.model",
    "MultipleChoiceModelOutput": "bertkit.model",
    "Tokenizer": "bertkit.tokenization",
    "embed": "bertkit.inference.embedding",
    "fill_mask": "bertkit.inference.masked_lm",
    "finetune": "bertkit.finetuning",
    "FinetuneConfig": "bertkit.finetuning",
    "predict": "bertkit.inference.prediction",
    "Predictor": "bertkit.inference.prediction",
    "evaluate": "bertkit.inference.evaluation",
    "generate": "bertkit.inference.generation",
    "BertkitError": "bertkit.errors",
    "export_onnx": "bertkit.inference.onnx_export",
    "RobertaConfig": "bertkit.model.roberta",
    "RobertaModel": "bertkit.model.roberta",
    "RobertaForMaskedLM": "bertkit.model.roberta",
    "RobertaForSequenceClassification": "bertkit.model.roberta",
    "RobertaForTokenClassification": "bertkit.model.roberta",
    "RobertaForQuestionAnswering": "bertkit.model.roberta",
    "RobertaForMultipleChoice": "bertkit.model.roberta",
    "BigBirdConfig": "bertkit.model.bigbird",
    "BigBirdModel": "bertkit.model.bigbird",
    "BigBirdForMaskedLM": "bertkit.model.bigbird",
    "BigBirdForSequenceClassification": "bertkit.model.bigbird",
    "BigBirdForTokenClassification": "bertkit.model.bigbird",
    "BigBirdForQuestionAnswering": "bertkit.model.bigbird",
    "BigBirdForMultipleChoice": "bertkit.model.bigbird",
    "ElectraConfig": "bertkit.model.electra",
    "ElectraModel": "bertkit.model.electra",
    "ElectraForPreTraining": "bertkit.model.electra",
    "ElectraForMaskedLM": "bertkit.model.electra",
    "ElectraForSequenceClassification": "bertkit.model.electra",
    "ElectraForTokenClassification": "bertkit.model.electra",
    "ElectraForQuestionAnswering": "bertkit.model.electra",
    "ElectraForMultipleChoice": "bertkit.model.electra",
    "AlbertConfig": "bertkit.model.albert",
    "AlbertModel": "bertkit.model.albert",
    "AlbertForPreTraining": "bertkit.model.albert",
    "AlbertForMaskedLM": "bertkit.model.albert",
    "AlbertForSequenceClassification": "bertkit.model.albert",
    "AlbertForTokenClassification": "bertkit.model.albert",
    "AlbertForQuestionAnswering": "bertkit.model.albert",
    "AlbertForMultipleChoice": "bertkit.model.albert",
    "BartConfig": "bertkit.model.bart",
    "BartModel": "bertkit.model.bart",
    "BartForConditionalGeneration": "bertkit.model.bart",
    "BartForSequenceClassification": "bertkit.model.bart",
    "BartForQuestionAnswering": "bertkit.model.bart",
    "T5Config": "bertkit.model.t5",
    "T5Model": "bertkit.model.t5",
    "DebertaV2Config": "bertkit.model.deberta",
    "DebertaV2Model": "bertkit.model.deberta",
    "DebertaV2ForMaskedLM": "bertkit.model.deberta",
    "DebertaV2ForSequenceClassification": "bertkit.model.deberta",
    "DebertaV2ForTokenClassification": "bertkit.model.deberta",
    "DebertaV2ForQuestionAnswering": "bertkit.model.deberta",
    "DebertaV2ForMultipleChoice": "bertkit.model.deberta",
    "T5ForConditionalGeneration": "bertkit.model.t5",
    "T5EncoderModel": "bertkit.model.t5",
    "T5EncoderForSequenceClassification": "bertkit.model.t5",
    "XLNetConfig": "bertkit.model.xlnet",
    "XLNetModel": "bertkit.model.xlnet",
    "XLNetLMHeadModel": "bertkit.model.xlnet",
    "XLNetForSequenceClassification": "bertkit.model.xlnet",
    "XLNetForTokenClassification": "bertkit.model.xlnet",
    "XLNetForQuestionAnsweringSimple": "bertkit.model.xlnet",
    "XLNetForMultipleChoice": "bertkit.model.xlnet",
    "GPT2Config": "bertkit.model.gpt",
    "GPT2Model": "bertkit.model.gpt",
    "GPT2LMHeadModel": "bertkit.model.gpt",
    "GPT2DoubleHeadsModel": "bertkit.model.gpt",
    "GPT2ForSequenceClassification": "bertkit.model.gpt",
    "OpenAIGPTConfig": "bertkit.model.gpt",
    "OpenAIGPTModel": "bertkit.model.gpt",
    "OpenAIGPTLMHeadModel": "bertkit.model.gpt",
    "OpenAIGPTDoubleHeadsModel": "bertkit.model.gpt",
    "OpenAIGPTForSequenceClassification": "bertkit.model.gpt",
    "ElmoConfig": "bertkit.model.elmo",
    "ElmoBiLM": "bertkit.model.elmo",
    "ScalarMix": "bertkit.model.scalar_mix",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bertkit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
