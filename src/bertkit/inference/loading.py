"""A checkpoint loaded once for inference: `LoadedModel`, and one loader per use.

Every loader reads the family from config.json's `model_type` through the registry
(bertkit.model.families) and returns a `LoadedModel`: the model, its tokenizer and what
was saved with it. `predict`, `evaluate`, `embed` and `fill_mask` take a directory or a
`LoadedModel`, so a caller answering many requests (a server) loads once.

- `load_finetuned`: a fine-tuned model — bertkit's `best/` (its `bertkit_task.json`,
  the `TaskSpec`, says how it was trained), a Hugging Face `BertFor...` checkpoint (the
  task family from config.json's `architectures`) or a feature-based tagger from
  `bertkit finetune ner --features` (feature_tagger.json names the frozen encoder,
  bertkit.tasks.feature_tagger). It carries the task head, the label names (config
  id2label), the task settings and the task family's program, whose classmethods read,
  encode and score data exactly as in training.
- `load_encoder`: the bare encoder of any checkpoint of a family (`embed`), with a
  sentence-transformers folder's modules.json pipeline (bertkit.inference.sentence_modules).
- `load_masked_lm`: the family's masked-LM model (`fill-mask`); a one-line error when
  the checkpoint has no MLM head.

Placement (`place`): `device=None` puts a fine-tuned model on CUDA when available and
leaves encoders and masked-LM models on the CPU, as predict / embed / fill-mask always
have; `precision` ("fp32", "int8", "bf16": bertkit.inference.precision) converts the
model there, once, and the `LoadedModel` records it. int8 runs on the CPU, so an int8
fine-tuned model stays there. Nothing here imports the training runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from bertkit.errors import BertkitError
from bertkit.inference.outputs import InferenceOutputs
from bertkit.inference.precision import DEFAULT_PRECISION, apply_precision, check_precision, device_for


@dataclass
class LoadedModel:
    """A checkpoint loaded for inference.

    directory: where it came from (None for a model object handed in); spec (a
    `TaskSpec`) and program_cls: a fine-tuned model's task settings and task family
    program; sentence_modules: a sentence-transformers folder's pipeline (embed);
    precision: what `place` converted the model to ("fp32", "int8", "bf16").
    """

    directory: Path | None
    model: Any  # nn.Module
    tokenizer: Any
    spec: Any = None  # TaskSpec
    program_cls: type | None = None
    sentence_modules: Any = None  # SentenceModules
    precision: str = DEFAULT_PRECISION

    @property
    def config(self):
        return self.model.config

    @property
    def id2label(self) -> dict[int, str] | None:
        return self.config.id2label

    @property
    def generates(self) -> bool:
        """A text-generating model loaded without a task program (load_generator) or with a
        text-to-text one: it answers with generated text, not a task head's scores."""
        from bertkit.model.families import family_of_model

        text_task = self.program_cls is None or self.program_cls.generates_text  # a text-to-text best/ too
        return text_task and family_of_model(self.model).can_generate

    @property
    def backbone(self):
        """The bare encoder: the model itself, or the encoder inside a model with heads."""
        return backbone_of(self.model)

    def collate(self, features):
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return self.program_cls.module().collate(features, pad_id)

    def run(self, features, batch_size: int, progress: bool = False) -> InferenceOutputs:
        """The model's outputs for each encoded feature (bertkit.tasks.programs.run_features),
        under inference mode; an encoder generates no sequences."""
        import torch

        from bertkit.tasks.programs import run_features

        self.model.eval()
        with torch.inference_mode():
            logits = run_features(self.model, features, self.collate, batch_size, progress, "predict",
                                  self.program_cls.model_call(self.spec))
        return InferenceOutputs(logits, precision=self.precision)

    def outputs(self, features, batch_size: int, progress: bool = False) -> list:
        """What the task family's metrics read for each feature (its program's `infer`):
        logits, or the generated text of a text-to-text model."""
        import torch

        self.model.eval()
        with torch.inference_mode():
            return self.program_cls.infer(self.model, self.tokenizer, self.spec, features, batch_size, progress)


UNLIMITED_POSITIONS_LENGTH = 512  # the default truncation length of a model with relative positions


def inputs_and_model(inputs: Any, model: Any, function: str, model_types: tuple[type, ...] = ()) -> tuple[Any, Any]:
    """The Python API's one order, `function(inputs, model, ...)` (as `embed` and `fill_mask`; the
    model may be given by keyword): an older `function(model, inputs)` call is recognised by its
    first argument being a model (a loaded one, a path object or an existing folder) and put right."""
    def is_model(value: Any) -> bool:
        return isinstance(value, (LoadedModel, os.PathLike, *model_types)) or (
            isinstance(value, str) and "\n" not in value and Path(value).is_dir())

    if model is None:
        raise BertkitError(f"{function}: no model given; call {function}(inputs, model=DIR)")
    if is_model(inputs) and not is_model(model):
        return model, inputs
    return inputs, model


def backbone_of(model):
    """A model with heads -> its encoder (every family's head model exposes it as `bert`)."""
    if hasattr(model, "bert") and not hasattr(model, "embeddings"):
        return model.bert
    return model


def max_tokens(model) -> int:
    """Tokens the model's position table holds: max_position_embeddings, less RoBERTa's
    offset (its positions start at padding_idx + 1: 512 tokens for 514 positions);
    `UNLIMITED_POSITIONS_LENGTH` for a model without a position table (XLNet)."""
    limit = model.config.position_limit
    if limit is None:
        return UNLIMITED_POSITIONS_LENGTH
    padding_idx = getattr(getattr(backbone_of(model), "embeddings", None), "padding_idx", None)
    return limit - (padding_idx + 1) if padding_idx is not None else limit


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def place(model, device: str | None, precision: str = DEFAULT_PRECISION):
    """The model in eval mode on `device` (None: where it is), converted to `precision`
    (int8: on the CPU, whatever the default device)."""
    import torch

    device = device_for(precision, device)
    if device is not None:
        model.to(torch.device(device))
    model.eval()
    return apply_precision(model, precision)


# ---------------------------------------------------------------------------- loaders


def load_finetuned(directory: str | os.PathLike, device: str | None = None,
                   precision: str = DEFAULT_PRECISION) -> LoadedModel:
    """Model, tokenizer and task settings of a fine-tuned checkpoint directory, in `precision`."""
    from bertkit.model.families import load_config
    from bertkit.tasks.feature_tagger import is_feature_tagger, load_feature_tagger
    from bertkit.tasks.programs import TaskSpec, get_program
    from bertkit.tokenization import Tokenizer

    precision = check_precision(precision)  # before loading: a typo fails fast
    directory = Path(directory)
    device = device or (default_device() if precision != "int8" else None)
    if is_feature_tagger(directory):  # a frozen encoder + BiLSTM (`finetune ner|classify --features`)
        model = place(load_feature_tagger(directory), device, precision)
        spec = TaskSpec.load(directory, model.config)
        program_cls = get_program(spec.family)  # the family's own program reads, infers and scores
    else:
        config = load_config(directory)
        spec = TaskSpec.load(directory, config)
        program_cls = get_program(spec.family)
        model = place(_task_model(directory, config, program_cls), device, precision)
    return LoadedModel(directory, model, Tokenizer.from_pretrained(directory), spec, program_cls, precision=precision)


def is_finetuned(directory: str | os.PathLike) -> bool:
    """Whether `directory` holds a model with a task head `load_finetuned` loads: bertkit's
    `best/` (bertkit_task.json), a feature-based tagger, or a checkpoint whose config.json
    names a task architecture (BertForSequenceClassification, ...)."""
    from bertkit.model.families import architecture_task_families, load_config
    from bertkit.tasks.feature_tagger import is_feature_tagger
    from bertkit.tasks.programs import TASK_FILE

    directory = Path(directory)
    if (directory / TASK_FILE).is_file() or is_feature_tagger(directory):
        return True
    architectures = load_config(directory).extra.get("architectures") or []
    return any(name in architecture_task_families() for name in architectures)


def _task_model(directory: Path, config, program_cls):
    """The family's head model for the task; a one-line error when the head was never trained."""
    from bertkit.model.families import family_for_config
    from bertkit.tasks.san import SanForSequenceClassification, is_san_model

    # MT-DNN's SAN head (`finetune multitask --head san`): its san.json names it
    model_cls = SanForSequenceClassification if is_san_model(directory) else program_cls.model_class(config)
    model = model_cls.from_pretrained(directory, config=config)
    backbone_prefix = f"{family_for_config(config).backbone_attribute}."
    head = [k for k in model.loading_info["missing_keys"] if not k.startswith(backbone_prefix)]
    if head:
        raise BertkitError(f"{directory}: no trained {model_cls.__name__} head ({', '.join(head)} missing); "
                           "fine-tune it first with `bertkit finetune`")
    return model


def load_encoder(directory: str | os.PathLike, device: str | None = None, tokenizer=None,
                 precision: str = DEFAULT_PRECISION) -> LoadedModel:
    """The family's bare encoder (BertModel, RobertaModel, ElectraModel, AlbertModel; its registry
    entry's `embedder` where it names one: T5's encoder alone) from any checkpoint of the family,
    its tokenizer (`tokenizer`: one given instead) and its
    sentence-transformers modules (if any)."""
    from bertkit.inference.sentence_modules import read_sentence_modules
    from bertkit.model.families import family_of
    from bertkit.tokenization import Tokenizer

    from bertkit.tasks.feature_tagger import FeatureTaggerConfig, is_feature_tagger

    precision = check_precision(precision)
    tokenizer_dir = directory
    if is_feature_tagger(directory):  # a head on frozen features: its encoder is the one it names, unchanged
        directory = FeatureTaggerConfig.load(directory).encoder
    modules = read_sentence_modules(directory)  # first: an unsupported pipeline fails before loading
    model = place(family_of(directory).embedder_class().from_pretrained(directory), device, precision)
    tokenizer = tokenizer or Tokenizer.from_pretrained(tokenizer_dir)
    return LoadedModel(Path(directory), model, tokenizer, sentence_modules=modules, precision=precision)


def load_mlm_model(directory: str | os.PathLike):
    """The family's masked-LM model from `directory` (BertForPreTraining, RobertaForMaskedLM,
    AlbertForMaskedLM, ElectraForMaskedLM); a one-line error when the MLM head is absent."""
    from bertkit.model.families import family_of

    mlm = family_of(directory).masked_lm(directory)
    model = mlm.model_class().from_pretrained(directory)
    if any(key.startswith(mlm.head_prefixes) for key in model.loading_info["missing_keys"]):
        heads = ", ".join(f"{prefix}*" for prefix in mlm.head_prefixes)
        raise BertkitError(f"{directory}: checkpoint has no MLM head ({heads} weights missing); fill-mask needs "
                           f"{mlm.checkpoints}{_generator_hint(directory)}")
    return model


def _generator_hint(directory: str | os.PathLike) -> str:
    """An ELECTRA pre-training run keeps its generator (which has the MLM head) in generator/."""
    from bertkit.objectives.electra import GENERATOR_DIR

    generator = Path(directory) / GENERATOR_DIR
    return f" (this run's generator: {generator})" if (generator / "config.json").is_file() else ""


def load_masked_lm(directory: str | os.PathLike, device: str | None = None, tokenizer=None,
                   precision: str = DEFAULT_PRECISION) -> LoadedModel:
    """The masked-LM model of a checkpoint and its tokenizer (`tokenizer`: one already read
    from `directory`, e.g. to check texts before loading the weights)."""
    from bertkit.tokenization import Tokenizer

    precision = check_precision(precision)
    model = place(load_mlm_model(directory), device, precision)
    return LoadedModel(Path(directory), model, tokenizer or Tokenizer.from_pretrained(directory), precision=precision)
