"""Model families (BERT, RoBERTa, ELECTRA, ALBERT): one registry entry each.

The task layer (fine-tuning, evaluation, `predict`, `fill-mask`) never names a model
class: it reads config.json's `model_type` and asks this registry for the family's
config class, its bare encoder, the head class of a task family and its masked-LM model.
Adding a family = its model module plus one `MODEL_FAMILIES` line.

Contract of an entry's classes (Hugging Face semantics throughout):
- `config`: a `BertConfig` subclass whose `model_type` default is the family's key, with
  `from_pretrained(directory)` / `from_dict(values)` reading HF's config.json;
- `backbone`: the bare encoder (`BertModel`, `RobertaModel`, ...), with
  `from_pretrained(directory)` loading it from any checkpoint of the family (its
  `loading_info["missing_keys"]` lists what the checkpoint lacked);
- `tasks`: task family ("classification", "tagging", "multiple_choice", "qa") -> head
  class, which holds the encoder as attribute `backbone_attribute` (HF's `bert`,
  `roberta`, `electra`, `albert`) and takes `config` in its constructor;
- `mlm` (a `MaskedLM`, None when the family has none): `model` loads every checkpoint of
  the family that carries the vocabulary head (its `from_pretrained` lists absent head
  weights in `loading_info["missing_keys"]`, under `head_prefixes`), and its
  `forward(input_ids, token_type_ids, attention_mask)` without labels returns (B, T, V)
  vocabulary logits as `logits` (`prediction_logits` for BERT's pre-training model);
  `checkpoints` says, for error messages, which checkpoints have the head.
Class references are "module:Class" strings, imported on first use (the CLI stays fast).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.interop import prelayernorm

DEFAULT_MODEL_TYPE = "bert"  # config.json files without `model_type` (old BERT checkpoints)


@dataclass(frozen=True)
class MaskedLM:
    """A family's masked-LM model (fill-mask): class, its vocabulary head's state-dict key
    prefixes, and the checkpoints that carry that head (for error messages)."""

    model: str
    head_prefixes: tuple[str, ...]
    checkpoints: str

    def model_class(self):
        return _resolve(self.model)


@dataclass(frozen=True)
class ModelFamily:
    model_type: str
    config: str
    backbone: str
    backbone_attribute: str
    tasks: dict[str, str] = field(default_factory=dict)
    mlm: MaskedLM | None = None

    def config_class(self):
        return _resolve(self.config)

    def backbone_class(self):
        return _resolve(self.backbone)

    def task_class(self, task_family: str, source: str | Path = "the model"):
        if task_family not in self.tasks:
            raise BertkitError(f"{source}: {self.model_type} models have no {task_family} head in bertkit "
                               f"(available: {', '.join(self.tasks) or 'none'})")
        return _resolve(self.tasks[task_family])

    def masked_lm(self, source: str | Path = "the model") -> MaskedLM:
        if self.mlm is None:
            raise BertkitError(f"{source}: {self.model_type} models have no masked-LM head in bertkit")
        return self.mlm


_BERT_HEADS = "bertkit.model.task_heads"

MODEL_FAMILIES: dict[str, ModelFamily] = {
    "bert": ModelFamily("bert", "bertkit.config:BertConfig", "bertkit.model.bert:BertModel", "bert", {
        "classification": f"{_BERT_HEADS}:BertForSequenceClassification",
        "tagging": f"{_BERT_HEADS}:BertForTokenClassification",
        "multiple_choice": f"{_BERT_HEADS}:BertForMultipleChoice",
        "qa": f"{_BERT_HEADS}:BertForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.bert:BertForPreTraining", ("cls.predictions.",),
                    "a BertForPreTraining or BertForMaskedLM checkpoint")),
    "albert": ModelFamily("albert", "bertkit.model.albert:AlbertConfig", "bertkit.model.albert:AlbertModel", "albert", {
        "classification": "bertkit.model.albert:AlbertForSequenceClassification",
        "tagging": "bertkit.model.albert:AlbertForTokenClassification",
        "multiple_choice": "bertkit.model.albert:AlbertForMultipleChoice",
        "qa": "bertkit.model.albert:AlbertForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.albert:AlbertForMaskedLM", ("predictions.",),
                    "an AlbertForPreTraining or AlbertForMaskedLM checkpoint")),
    "roberta": ModelFamily("roberta", "bertkit.model.roberta:RobertaConfig", "bertkit.model.roberta:RobertaModel",
                           "roberta", {
        "classification": "bertkit.model.roberta:RobertaForSequenceClassification",
        "tagging": "bertkit.model.roberta:RobertaForTokenClassification",
        "multiple_choice": "bertkit.model.roberta:RobertaForMultipleChoice",
        "qa": "bertkit.model.roberta:RobertaForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.roberta:RobertaForMaskedLM", ("lm_head.",), "a RobertaForMaskedLM checkpoint")),
    "electra": ModelFamily("electra", "bertkit.model.electra:ElectraConfig", "bertkit.model.electra:ElectraModel",
                           "electra", {
        "classification": "bertkit.model.electra:ElectraForSequenceClassification",
        "tagging": "bertkit.model.electra:ElectraForTokenClassification",
        "multiple_choice": "bertkit.model.electra:ElectraForMultipleChoice",
        "qa": "bertkit.model.electra:ElectraForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.electra:ElectraForMaskedLM", ("generator_predictions.", "generator_lm_head."),
                    "a generator (ElectraForMaskedLM) checkpoint; the discriminator (ElectraForPreTraining) has no "
                    "MLM head")),
}


def _resolve(reference: str):
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def read_model_type(directory: str | Path) -> str:
    """config.json's `model_type` ("bert" when absent); errors name the file."""
    from bertkit.config import read_json_object

    if not Path(directory).is_dir():
        raise BertkitError(f"{directory}: no such model directory")
    values = read_json_object(Path(directory) / "config.json")
    if prelayernorm.is_hf_config(values):  # a pre-LN BERT or RoBERTa in transformers' layout
        return prelayernorm.native_model_type(values)
    return str(values.get("model_type") or DEFAULT_MODEL_TYPE)


def get_model_family(model_type: str, source: str | Path = "config") -> ModelFamily:
    if model_type not in MODEL_FAMILIES:
        raise BertkitError(f"{source}: model_type {model_type!r} is not supported "
                           f"(supported: {', '.join(MODEL_FAMILIES)})")
    return MODEL_FAMILIES[model_type]


def family_of(directory: str | Path) -> ModelFamily:
    """The family of the checkpoint at `directory`."""
    return get_model_family(read_model_type(directory), Path(directory) / "config.json")


def load_config(directory: str | Path):
    """The checkpoint's config, as its family's config class."""
    return family_of(directory).config_class().from_pretrained(directory)


def family_for_config(config) -> ModelFamily:
    return get_model_family(getattr(config, "model_type", DEFAULT_MODEL_TYPE))


def task_model_class(config, task_family: str, source: str | Path = "the model"):
    """The head class of `task_family` for a config's model family (e.g. RobertaForSequenceClassification)."""
    return family_for_config(config).task_class(task_family, source)


def architecture_task_families() -> dict[str, str]:
    """Head class name (config.json `architectures`) -> task family, over every family."""
    return {reference.split(":")[1]: task for family in MODEL_FAMILIES.values()
            for task, reference in family.tasks.items()}
