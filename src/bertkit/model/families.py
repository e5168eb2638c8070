"""Model families: one registry entry each (`MODEL_FAMILIES`), declaring what the family can do;
help texts and errors list them from here (`families_that`).

Callers never name a model class or compare model types: they read config.json's
`model_type` (or a model's config) and ask this registry for the family's config class,
its bare encoder, the head class of a task family, its masked-LM model, whether it
generates text, and the input names its models take. Adding a family = its model
module(s) plus one `MODEL_FAMILIES` line; an encoder-decoder or a two-stream model plugs
in the same way.

The contract of a family (Hugging Face semantics throughout):
- `config`: a subclass of bertkit.pretrained_config.PretrainedConfig (its own fields, HF
  names; `model_type`'s default is the family's key) reading and writing HF's config.json
  (`from_pretrained(directory)` / `from_dict(values)` / `save_pretrained`), with
  field-named errors and, optionally, named `presets`;
- every model class: a subclass of bertkit.model.pretrained.PreTrainedModel
  (`from_pretrained` / `save_pretrained` with key-set and shape checks, safetensors,
  weights-only loading of pytorch_model.bin, `loading_info`; its `config_class`,
  `base_model_prefix`, `backbone_prefix`, `optional_prefixes`, init hook);
- `input_names`: the batch entries (HF names) its models take as keyword inputs:
  ("input_ids", "token_type_ids", "attention_mask") for the four encoders here, e.g.
  ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask") for an
  encoder-decoder or ("input_ids", "attention_mask", "perm_mask", "target_mapping") for
  a permutation LM. Every caller passes `model(**model_inputs(model, batch), ...)`:
  targets (labels, ...) and options (output_hidden_states, ...) by keyword on top;
- `backbone`: the bare encoder (`BertModel`, `RobertaModel`, ...; for an encoder-decoder
  its bare model), with `from_pretrained(directory)` loading it from any checkpoint of
  the family (its `loading_info["missing_keys"]` lists what the checkpoint lacked);
- `tasks`: task family ("classification", "tagging", "multiple_choice", "qa") -> head
  class, which holds the encoder as attribute `backbone_attribute` (HF's `bert`,
  `roberta`, `electra`, `albert`) and takes `config` in its constructor; `supports(task)`
  says whether the family has it. A head called as BERT's are (targets by `labels`, the
  loss and the task's scores as `loss` / `logits`, the family's `input_names`) is named
  by its "module:Class" string; one whose call differs is a `TaskHead` naming its target
  keyword, output fields and the input that takes each sequence's last real token (GPT's
  double-heads model: `mc_labels`, `mc_loss`, `mc_logits`, `mc_token_ids`, which
  `model_inputs` derives from the attention mask). Callers ask `head_of_model(model)`,
  never the class;
- `mlm` (a `MaskedLM`, None when the family has none; `can_fill_mask`): `model` loads
  every checkpoint of the family that carries the vocabulary head (its `from_pretrained`
  lists absent head weights in `loading_info["missing_keys"]`, under `head_prefixes`),
  and called on `model_inputs` without labels returns (B, T, V) vocabulary logits as
  `logits` (`prediction_logits` for BERT's pre-training model); `checkpoints` says, for
  error messages, which checkpoints have the head;
- `generator` ("module:Class", None when the family has none; `can_generate`): the model
  whose `generate(input_ids=, attention_mask=, max_new_tokens=, ...)` returns token ids
  (bertkit.model.generation.GenerationMixin), loaded from any checkpoint of the family
  by `bertkit generate` and by `predict` on a model without a task file (T5's
  T5ForConditionalGeneration, GPT's *LMHeadModel: one `generate` serves both shapes);
  None for the encoders.
Class references are "module:Class" strings, imported on first use (the CLI stays fast).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError
from bertkit.interop import prelayernorm

DEFAULT_MODEL_TYPE = "bert"  # config.json files without `model_type` (old BERT checkpoints)
# a task head trained on a frozen encoder's features (bertkit.tasks.feature_tagger) is saved without a config.json:
# this file names its encoder instead
FEATURE_HEAD_FILE = "feature_tagger.json"
ENCODER_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")  # BERT's (HF names)


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
class TaskHead:
    """How a task head is called: its class ("module:Class"), the keyword its targets go by,
    the output fields holding the task loss and the task's scores, and `last_token_input`: the
    keyword by which it takes the position of each sequence's last real token, which
    `model_inputs` derives from the batch's attention mask (None: it takes none). The defaults
    are BERT's heads'; transformers' double-heads GPTs take `mc_labels` and `mc_token_ids`
    (each choice's <extract>) and return `mc_loss` / `mc_logits` beside the LM's `loss` / `logits`."""

    model: str
    labels: str = "labels"
    loss: str = "loss"
    logits: str = "logits"
    last_token_input: str | None = None

    @property
    def class_name(self) -> str:
        return self.model.split(":")[1]


PLAIN_HEAD = TaskHead("")  # a model called as BERT's heads are (a head of no registry entry: a feature tagger)


@dataclass(frozen=True)
class ModelFamily:
    """One family's classes and capabilities (see the module docstring for the contract)."""

    model_type: str
    config: str
    backbone: str
    backbone_attribute: str
    tasks: dict[str, str | TaskHead] = field(default_factory=dict)
    mlm: MaskedLM | None = None
    input_names: tuple[str, ...] = ("input_ids", "attention_mask")
    generator: str | None = None
    # task distillation's student is the teacher's config with fewer `num_hidden_layers`,
    # its layers copied from `encoder.layer.N` (BERT-shaped encoders) or `layers.N` (ModernBERT)
    distillable: bool = True
    # the model reads words as characters (ELMo's `character_ids`), not the tokenizer's sub-word
    # ids: callers build its inputs from words (bertkit.data.words) and get one vector per word
    reads_words: bool = False
    # the family whose package this one's may import (its parts and heads reused: RoBERTa, ELECTRA
    # and ALBERT on BERT); any other import between family packages is an error (tests/test_architecture.py)
    built_on: str | None = None
    # the FinetuneConfig values the family's fine-tuning runs start from (its recipe's `defaults`, which
    # read them from here: written once, and `bertkit finetune --help` shows them without importing torch)
    finetuning_defaults: Mapping[str, Any] = field(default_factory=dict)
    # the model `embed` and `export onnx` load for a text's token states ("module:Class"; None: `backbone`):
    # T5's encoder alone, as sentence-T5 embeds (its bare model needs decoder inputs)
    embedder: str | None = None

    @property
    def task_families(self) -> tuple[str, ...]:
        return tuple(self.tasks)

    def supports(self, task_family: str) -> bool:
        return task_family in self.tasks

    @property
    def can_fill_mask(self) -> bool:
        return self.mlm is not None

    @property
    def can_generate(self) -> bool:
        return self.generator is not None

    @property
    def decoder_only(self) -> bool:
        """A family whose generator continues the text in `input_ids` alone (no encoder inputs:
        GPT-1, GPT-2): it pre-trains with objective clm and fine-tunes by GPT-1's recipe."""
        return self.can_generate and "decoder_input_ids" not in self.input_names

    def generator_class(self, source: str | Path = "the model"):
        """The family's text-generating model class; a one-line error naming `source` when it has none."""
        if self.generator is None:
            raise BertkitError(f"{source}: {self.model_type} models cannot generate text (an encoder); "
                               f"generation needs a model of a generating family ({families_that('generate')})")
        return _resolve(self.generator)

    def config_class(self):
        return _resolve(self.config)

    def backbone_class(self):
        return _resolve(self.backbone)

    def embedder_class(self):
        """The class whose `last_hidden_state` `embed` pools: `embedder`, else the bare model."""
        return _resolve(self.embedder or self.backbone)

    def task_class(self, task_family: str, source: str | Path = "the model"):
        if task_family not in self.tasks:
            hint = "; its layers feed a task frozen: add --features scalar_mix (ner, classify)" if not self.tasks else ""
            raise BertkitError(f"{source}: {self.model_type} models have no {task_family} head in bertkit "
                               f"(available: {', '.join(self.tasks) or 'none'}){hint}")
        return _resolve(self.task_head(task_family).model)

    def task_head(self, task_family: str) -> TaskHead:
        """The head of `task_family` as a `TaskHead` (a plain "module:Class" entry: BERT's call)."""
        head = self.tasks[task_family]
        return head if isinstance(head, TaskHead) else TaskHead(head)

    def _recipes(self):
        """The `recipes` module of the family's package (None: it has none)."""
        package = self.config.split(":")[0].rsplit(".", 1)[0]
        try:
            return importlib.import_module(f"{package}.recipes")
        except ModuleNotFoundError:
            return None

    def pretraining_recipe(self, name: str):
        """The family's pre-training recipe `name` (a bertkit.model.recipes.PretrainingRecipe) from the
        `PRETRAINING` table of its package's `recipes.py`; None when the family registers none by that name."""
        return getattr(self._recipes(), "PRETRAINING", {}).get(name)

    def finetuning_recipe(self):
        """The family's fine-tuning recipe (a bertkit.model.recipes.FinetuningRecipe): its package's
        `recipes.FINETUNING`, the plain recipe when it registers none."""
        from bertkit.model.recipes import PLAIN_FINETUNING

        return getattr(self._recipes(), "FINETUNING", None) or PLAIN_FINETUNING

    def masked_lm(self, source: str | Path = "the model") -> MaskedLM:
        if self.mlm is None:
            hint = ("" if not self.can_generate else
                    f"; a decoder continues text: bertkit generate --model {source}" if self.decoder_only else
                    f"; an encoder-decoder fills its blanks by generating the text: bertkit generate --model {source}")
            raise BertkitError(f"{source}: {self.model_type} models have no masked-LM head in bertkit{hint}")
        return self.mlm


_BERT_HEADS = "bertkit.model.bert.task_heads"
_GPT = "bertkit.model.gpt"
GPT_INPUT_NAMES = ("input_ids", "attention_mask", "position_ids")
# GPT-1's fine-tuning hyper-parameters (Radford et al. 2018, section 4.1), as FinetuneConfig fields: the GPT
# families' recipe (bertkit.model.gpt.finetuning) starts their runs from these
GPT1_FINETUNING_DEFAULTS = {"lr": 6.25e-5, "batch_size": 32, "epochs": 3, "warmup_ratio": 0.002, "lm_coef": 0.5,
                            "classifier_dropout": 0.1}


def _double_heads(name: str) -> TaskHead:
    return TaskHead(f"{_GPT}.modeling:{name}", labels="mc_labels", loss="mc_loss", logits="mc_logits",
                    last_token_input="mc_token_ids")


MODEL_FAMILIES: dict[str, ModelFamily] = {
    "bert": ModelFamily("bert", "bertkit.model.bert.config:BertConfig", "bertkit.model.bert.modeling:BertModel", "bert", {
        "classification": f"{_BERT_HEADS}:BertForSequenceClassification",
        "tagging": f"{_BERT_HEADS}:BertForTokenClassification",
        "multiple_choice": f"{_BERT_HEADS}:BertForMultipleChoice",
        "qa": f"{_BERT_HEADS}:BertForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.bert.modeling:BertForPreTraining", ("cls.predictions.",),
                    "a BertForPreTraining or BertForMaskedLM checkpoint"), input_names=ENCODER_INPUT_NAMES),
    "albert": ModelFamily("albert", "bertkit.model.albert.config:AlbertConfig", "bertkit.model.albert.modeling:AlbertModel", "albert", {
        "classification": "bertkit.model.albert.modeling:AlbertForSequenceClassification",
        "tagging": "bertkit.model.albert.modeling:AlbertForTokenClassification",
        "multiple_choice": "bertkit.model.albert.modeling:AlbertForMultipleChoice",
        "qa": "bertkit.model.albert.modeling:AlbertForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.albert.modeling:AlbertForMaskedLM", ("predictions.",),
                    "an AlbertForPreTraining or AlbertForMaskedLM checkpoint"), input_names=ENCODER_INPUT_NAMES,
        built_on="bert"),
    # disentangled attention (relative positions); BERT's tagging and QA heads (transformers' model_type "deberta-v2")
    "deberta-v2": ModelFamily("deberta-v2", "bertkit.model.deberta.config:DebertaV2Config",
                              "bertkit.model.deberta.modeling:DebertaV2Model", "deberta", {
        "classification": "bertkit.model.deberta.modeling:DebertaV2ForSequenceClassification",
        "tagging": "bertkit.model.deberta.modeling:DebertaV2ForTokenClassification",
        "multiple_choice": "bertkit.model.deberta.modeling:DebertaV2ForMultipleChoice",
        "qa": "bertkit.model.deberta.modeling:DebertaV2ForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.deberta.modeling:DebertaV2ForMaskedLM", ("cls.predictions.", "lm_predictions."),
                    "a DebertaV2ForMaskedLM checkpoint; a v3 discriminator has no MLM head"),
        input_names=ENCODER_INPUT_NAMES, built_on="bert"),
    "roberta": ModelFamily("roberta", "bertkit.model.roberta.config:RobertaConfig", "bertkit.model.roberta.modeling:RobertaModel",
                           "roberta", {
        "classification": "bertkit.model.roberta.modeling:RobertaForSequenceClassification",
        "tagging": "bertkit.model.roberta.modeling:RobertaForTokenClassification",
        "multiple_choice": "bertkit.model.roberta.modeling:RobertaForMultipleChoice",
        "qa": "bertkit.model.roberta.modeling:RobertaForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.roberta.modeling:RobertaForMaskedLM", ("lm_head.",), "a RobertaForMaskedLM checkpoint"),
        # token types as HF's RobertaModel takes them (one type in RoBERTa's checkpoints: then ignored)
        input_names=ENCODER_INPUT_NAMES, built_on="bert"),
    "electra": ModelFamily("electra", "bertkit.model.electra.config:ElectraConfig", "bertkit.model.electra.modeling:ElectraModel",
                           "electra", {
        "classification": "bertkit.model.electra.modeling:ElectraForSequenceClassification",
        "tagging": "bertkit.model.electra.modeling:ElectraForTokenClassification",
        "multiple_choice": "bertkit.model.electra.modeling:ElectraForMultipleChoice",
        "qa": "bertkit.model.electra.modeling:ElectraForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.electra.modeling:ElectraForMaskedLM", ("generator_predictions.", "generator_lm_head."),
                    "a generator (ElectraForMaskedLM) checkpoint; the discriminator (ElectraForPreTraining) has no "
                    "MLM head"), input_names=ENCODER_INPUT_NAMES, built_on="bert"),
    # BERT's layers with block-sparse attention over up to 4,096 positions (transformers' model_type "big_bird")
    "big_bird": ModelFamily("big_bird", "bertkit.model.bigbird.config:BigBirdConfig",
                            "bertkit.model.bigbird.modeling:BigBirdModel", "bert", {
        "classification": "bertkit.model.bigbird.modeling:BigBirdForSequenceClassification",
        "tagging": "bertkit.model.bigbird.modeling:BigBirdForTokenClassification",
        "multiple_choice": "bertkit.model.bigbird.modeling:BigBirdForMultipleChoice",
        "qa": "bertkit.model.bigbird.modeling:BigBirdForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.bigbird.modeling:BigBirdForMaskedLM", ("cls.predictions.",),
                    "a BigBirdForMaskedLM or BigBirdForPreTraining checkpoint"), input_names=ENCODER_INPUT_NAMES,
        built_on="bert"),
    "t5": ModelFamily("t5", "bertkit.model.t5.config:T5Config", "bertkit.model.t5.modeling:T5Model", "transformer", {
        "classification": "bertkit.model.t5.modeling:T5EncoderForSequenceClassification",  # encoder + mean-pooled head
        "text2text": "bertkit.model.t5.modeling:T5ForConditionalGeneration",  # bertkit.tasks.text2text
    },
                      input_names=("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"),
                      generator="bertkit.model.t5.modeling:T5ForConditionalGeneration",
                      distillable=False, embedder="bertkit.model.t5.modeling:T5EncoderModel"),
    "bart": ModelFamily("bart", "bertkit.model.bart.config:BartConfig", "bertkit.model.bart.modeling:BartModel", "model", {
        "classification": "bertkit.model.bart.modeling:BartForSequenceClassification",  # the decoder's last EOS state
        "qa": "bertkit.model.bart.modeling:BartForQuestionAnswering",
        "text2text": "bertkit.model.bart.modeling:BartForConditionalGeneration",
    }, input_names=("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"),
        generator="bertkit.model.bart.modeling:BartForConditionalGeneration", distillable=False),
    "xlnet": ModelFamily("xlnet", "bertkit.model.xlnet.config:XLNetConfig", "bertkit.model.xlnet.modeling:XLNetModel",
                         "transformer", {
        "classification": "bertkit.model.xlnet.modeling:XLNetForSequenceClassification",
        "tagging": "bertkit.model.xlnet.modeling:XLNetForTokenClassification",
        "multiple_choice": "bertkit.model.xlnet.modeling:XLNetForMultipleChoice",
        "qa": "bertkit.model.xlnet.modeling:XLNetForQuestionAnsweringSimple",
    }, input_names=("input_ids", "token_type_ids", "attention_mask", "perm_mask", "target_mapping"), distillable=False),
    # rotary positions, alternating global / sliding-window attention, GeGLU; no token types (transformers' "modernbert")
    "modernbert": ModelFamily("modernbert", "bertkit.model.modernbert.config:ModernBertConfig",
                              "bertkit.model.modernbert.modeling:ModernBertModel", "model", {
        "classification": "bertkit.model.modernbert.modeling:ModernBertForSequenceClassification",
        "tagging": "bertkit.model.modernbert.modeling:ModernBertForTokenClassification",
        "multiple_choice": "bertkit.model.modernbert.modeling:ModernBertForMultipleChoice",
        "qa": "bertkit.model.modernbert.modeling:ModernBertForQuestionAnswering",
    }, mlm=MaskedLM("bertkit.model.modernbert.modeling:ModernBertForMaskedLM", ("head.", "decoder."),
                    "a ModernBertForMaskedLM checkpoint"), input_names=("input_ids", "attention_mask")),
    # decoder-only: token_type_ids are not among the inputs, because GPT looks them up in its token
    # table and encoder batches hold BERT's 0/1 segment ids there
    # multiple choice: transformers' double-heads model (one sequence per choice, the score read
    # at each choice's `mc_token_ids`, GPT-1's <extract>; bertkit.model.gpt.finetuning)
    "gpt2": ModelFamily("gpt2", f"{_GPT}.config:GPT2Config", f"{_GPT}.modeling:GPT2Model", "transformer", {
        "classification": f"{_GPT}.modeling:GPT2ForSequenceClassification",
        "multiple_choice": _double_heads("GPT2DoubleHeadsModel"),
    }, input_names=GPT_INPUT_NAMES, generator=f"{_GPT}.modeling:GPT2LMHeadModel", distillable=False,
        finetuning_defaults=GPT1_FINETUNING_DEFAULTS),
    "openai-gpt": ModelFamily("openai-gpt", f"{_GPT}.config:OpenAIGPTConfig", f"{_GPT}.modeling:OpenAIGPTModel",
                              "transformer", {
        "classification": f"{_GPT}.modeling:OpenAIGPTForSequenceClassification",
        "multiple_choice": _double_heads("OpenAIGPTDoubleHeadsModel"),
    }, input_names=GPT_INPUT_NAMES, generator=f"{_GPT}.modeling:OpenAIGPTLMHeadModel", distillable=False,
        finetuning_defaults=GPT1_FINETUNING_DEFAULTS),
    # a biLM over words' characters: no task heads (its layers feed a task through a scalar mix, `features`)
    "elmo": ModelFamily("elmo", "bertkit.model.elmo.config:ElmoConfig", "bertkit.model.elmo.modeling:ElmoBiLM", "elmo",
                        input_names=("character_ids", "attention_mask"), distillable=False, reads_words=True),
}


CAPABILITIES = {
    "generate": lambda family: family.can_generate,
    "encoder-decoder": lambda family: family.can_generate and not family.decoder_only,
    "decoder": lambda family: family.decoder_only,
    "fill-mask": lambda family: family.can_fill_mask,
}


def families_that(capability: str) -> str:
    """The model types (config.json's `model_type`) with a capability (a CAPABILITIES name or a task
    family, e.g. "text2text"), comma-separated in registry order: for help texts and errors."""
    test = CAPABILITIES.get(capability, lambda family: family.supports(capability))
    return ", ".join(name for name, family in MODEL_FAMILIES.items() if test(family))


def _resolve(reference: str):
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def read_model_type(directory: str | Path) -> str:
    """config.json's `model_type` ("bert" when absent); errors name the file."""
    from bertkit.pretrained_config import read_json_object

    if not Path(directory).is_dir():
        from bertkit.interop.hub_cache import where_models_come_from

        raise BertkitError(where_models_come_from(str(directory)))
    if not (Path(directory) / "config.json").is_file() and (Path(directory) / FEATURE_HEAD_FILE).is_file():
        encoder = read_json_object(Path(directory) / FEATURE_HEAD_FILE).get("encoder")
        raise BertkitError(f"{directory}: a task head on the frozen features of {encoder} ({FEATURE_HEAD_FILE}), "
                           "not a model of its own: predict, evaluate, embed and serve take it; for anything else "
                           "name that encoder")
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


def default_task_class(task_family: str):
    """The head class of `task_family` of the first registered family that has it (a task module's
    model before any checkpoint is read)."""
    for family in MODEL_FAMILIES.values():
        if family.supports(task_family):
            return family.task_class(task_family)
    raise BertkitError(f"no model family has a {task_family} head")


def recipe_fields() -> dict[str, list[str]]:
    """FinetuneConfig field -> the model types whose fine-tuning recipe reads it."""
    fields: dict[str, list[str]] = {}
    for family in MODEL_FAMILIES.values():
        for name in family.finetuning_recipe().fields:
            fields.setdefault(name, []).append(family.model_type)
    return fields


def architecture_task_families() -> dict[str, str]:
    """Head class name (config.json `architectures`) -> task family, over every family."""
    return {family.task_head(task).class_name: task for family in MODEL_FAMILIES.values() for task in family.tasks}


def unwrap_model(model: Any) -> Any:
    """The model inside DDP / FSDP (`module`) and torch.compile (`_orig_mod`) wrappers."""
    while not hasattr(model, "config"):
        inner = getattr(model, "module", None)
        inner = getattr(model, "_orig_mod", None) if inner is None else inner
        if inner is None:
            return model
        model = inner
    return model


def family_of_model(model: Any) -> ModelFamily:
    """The family of a model (its config's `model_type`), through training wrappers."""
    unwrapped = unwrap_model(model)
    config = getattr(unwrapped, "config", None)
    if config is None:
        raise BertkitError(f"{type(unwrapped).__name__} has no config: cannot tell its model family")
    return family_for_config(config)


def model_inputs(model: Any, batch: Mapping[str, Any], device: Any = None) -> dict[str, Any]:
    """The entries of `batch` (a mapping with HF input names) that `model` takes: its
    family's declared `input_names`, those the batch holds, moved to `device` when given;
    for a head with a `last_token_input`, each sequence's last real token (..., ) from the
    batch's attention mask (..., T), left or right padded. `model` may be a model (wrapped or
    not) or a `ModelFamily`."""
    last_token_input = None
    if isinstance(model, ModelFamily):
        names = model.input_names
    else:  # a model may declare its own inputs (a frozen encoder + tagger reads the given words too)
        names = getattr(unwrap_model(model), "input_names", None) or family_of_model(model).input_names
        last_token_input = head_of_model(model).last_token_input
    inputs = {name: batch[name] if device is None else batch[name].to(device)
              for name in names if name in batch and batch[name] is not None}
    if last_token_input is not None and inputs.get("attention_mask") is not None:
        import torch

        mask = inputs["attention_mask"]
        positions = torch.arange(mask.shape[-1], device=mask.device)  # (T,)
        inputs[last_token_input] = (positions * (mask != 0)).argmax(-1)  # the rightmost real token
    return inputs


def head_of_model(model: Any) -> TaskHead:
    """How `model` (wrapped or not) is called as a task head: its family's `TaskHead` entry for
    the model's class, `PLAIN_HEAD` (BERT's call) for a model of no entry (a bare encoder, a
    language model, a feature tagger)."""
    unwrapped = unwrap_model(model)
    config = getattr(unwrapped, "config", None)
    family = MODEL_FAMILIES.get(getattr(config, "model_type", None) or "")
    name = type(unwrapped).__name__
    if family is not None:
        for task in family.tasks:
            head = family.task_head(task)
            if head.class_name == name:
                return head
    return PLAIN_HEAD
