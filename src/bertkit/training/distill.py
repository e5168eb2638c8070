"""Knowledge distillation on the shared loop: a small student mimics a larger teacher.

Two modes, each a `TrainingProgram` for bertkit.training.loop (no second loop):

- General distillation (DistilBERT) on pre-training data (a `bertkit data build`
  directory), `GeneralDistillation`: the objective's dynamic masking, then
      loss = alpha_soft * T^2 KL(softmax(t/T) || softmax(s/T))   at the masked positions
           + alpha_hard * CE(student MLM logits, original tokens)  at the masked positions
           + alpha_cos  * (1 - cos(h_student, h_teacher))          over the real tokens (last layer)
           + alpha_hidden    * TinyBERT hidden-state MSE (embeddings and every mapped layer)
           + alpha_attention * TinyBERT attention-map MSE (every mapped layer),
  each term divided by its *global* count (masked tokens or real tokens) as the loop
  requires. Defaults are DistilBERT's: T = 2, alpha_soft 5, alpha_hard 2, alpha_cos 1;
  the TinyBERT terms are off (0). `soft_loss="ce"` uses the cross-entropy against the
  teacher's distribution instead of the KL (same gradient; the value adds the teacher's
  entropy).
- Task distillation (Hinton et al.) on a fine-tuning task's training data, for every
  task family: `SoftTargets` mixed into the family's program (`DISTILL_PROGRAMS`:
  `TaskDistillation` over `ClassificationProgram`, `TaggingDistillation`,
  `QuestionAnsweringDistillation`, `MultipleChoiceDistillation`), so data, the hard
  loss, metrics, dev evaluation, best/ and the saved layout are the fine-tuning task
  layer's. loss = alpha_hard * the task loss on the gold labels + alpha_soft * T^2 KL on
  the teacher's logits, per item the task loss counts:
      classification   the K logits per sequence (regression: squared error to the
                       teacher's prediction)
      tagging (NER)    the K tag logits per labelled token (a word's first sub-token;
                       ignore-index positions excluded), averaged over labelled tokens
      QA (SQuAD)       (KL(start) + KL(end)) / 2 per window, each over the window's real
                       positions (padding, finfo.min in bertkit's QA logits, excluded)
      multiple choice  the C choices' scores per question
  Each family's `soft_loss_sum` hook picks the student's logits; the rest is shared.

Student. The teacher's config with `student_layers` layers (default half the teacher's)
and optional `student.*` overrides. Student layer i starts from teacher layer
floor(i * L / N): every other layer when N = L / 2 (0, 2, 4, ... as DistilBERT's
"every other layer"), evenly spaced otherwise; embeddings, pooler and heads are copied
too. A narrower student (student.hidden_size) cannot copy weights and starts from
BERT's initialisation; its hidden states meet the teacher's through a learned linear
projection (TinyBERT's W_h), trained with the student and saved beside it as
`distill_projection.safetensors` (so --resume continues it). The intermediate losses map
student hidden state m (0 = embeddings) to teacher hidden state m * L / N and student
layer j's attention to teacher layer (j + 1) * L / N - 1 (TinyBERT's uniform mapping,
the last layers matched).

Teacher. A bertkit or Hugging Face checkpoint, run in eval mode under
`torch.inference_mode` (its outputs are cloned into ordinary tensors before they meet
the student's graph): general distillation takes BERT (model_type "bert"; the student is
a `BertForPreTraining`; any other model_type is refused in one line naming the teacher),
task distillation every model family (BERT, RoBERTa, ELECTRA, ALBERT: the student is the
teacher's head class). General distillation needs the teacher's MLM head for the soft
targets: a checkpoint without one (a bare `BertModel` such as all-MiniLM-L6-v2) is
refused unless `alpha_soft=0`, in which case the student learns from the hidden-state
losses and the hard MLM loss (its MLM head starting fresh). `cache_teacher` stores in
float32 under `OUTPUT/teacher-cache/` (or `cache_dir`) the teacher's outputs of every
training example and epoch (general: one file each under a key hashing the teacher's
weights, the data's recipe, the masking, the seed and what is stored) or its logits of
the whole training set (task: one .npz aligned with the training features, keyed by
teacher weights, training file and encoding; per-position logits of tagging and QA
stored ragged, each window at its own length), so a resumed or repeated run reuses them
and computes the same losses. A task teacher must hold a fine-tuned head of the task's
family whose label map covers the data (one-line error naming the teacher otherwise).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertkit.atomic import atomic_path, write_text_atomic
from bertkit.errors import BertkitError, ConfigError
from bertkit.finetuning import FinetuneConfig
from bertkit.objectives.base import MaskedLMObjective, mlm_metrics, mlm_statistics, sequence_counts
from bertkit.model.bert import IGNORE_INDEX
from bertkit.tasks.programs import (
    ClassificationProgram,
    MultipleChoiceProgram,
    QuestionAnsweringProgram,
    TaggingProgram,
    run_features,
)
from bertkit.training.config import (
    EVAL_SEED,
    TrainingConfig,
    apply_overrides,
    check_choice,
    parse_value,
    to_json,
)
from bertkit.training.resume import RUN_CONFIG_FILE, absolute_paths

SOFT_LOSSES = ("kl", "ce")
CACHE_DIR = "teacher-cache"
PROJECTION_FILE = "distill_projection.safetensors"
GENERAL_PATH_FIELDS = ("data", "output_dir", "teacher", "cache_dir")  # stored absolute in run_config.json


# ---------------------------------------------------------------------------- losses


def soft_target_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
                     kind: str = "kl", mask: torch.Tensor | None = None) -> torch.Tensor:
    """Summed over rows: T^2 * KL(softmax(t / T) || softmax(s / T)), or T^2 * the
    cross-entropy -sum p_t log p_s (kind "ce"). Logits (N, K), computed in float32;
    the T^2 keeps the gradient's scale independent of T (Hinton et al.).

    mask: (N, K) bool, True where an entry takes part (QA: the real positions of a
    window). The others get probability 0 on both sides: they are set to finfo.min
    after the division by T, so logits that are finfo.min already (bertkit's QA padding,
    -inf once divided by T < 1) or garbage give no inf - inf and no NaN, in the value or
    the gradient."""
    student = student_logits.float() / temperature  # (N, K)
    teacher = teacher_logits.float() / temperature
    if mask is not None:
        lowest = torch.finfo(torch.float32).min
        student = student.masked_fill(~mask, lowest)
        teacher = teacher.masked_fill(~mask, lowest)
    log_student = F.log_softmax(student, dim=-1)  # (N, K)
    log_teacher = F.log_softmax(teacher, dim=-1)
    probs = log_teacher.exp()
    if kind == "kl":
        per_row = (probs * (log_teacher - log_student)).sum(-1)  # (N,)
    else:
        per_row = -(probs * log_student).sum(-1)
    return per_row.sum() * temperature**2


def cosine_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real tokens of 1 - cos(h_s, h_t) (DistilBERT). Hidden (B, T, H); mask (B, T) 1 = real."""
    cos = F.cosine_similarity(student.float(), teacher.float(), dim=-1)  # (B, T)
    return ((1.0 - cos) * mask).sum()


def hidden_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real tokens of the mean squared difference over H (TinyBERT). (B, T, H), mask (B, T)."""
    return ((student.float() - teacher.float()) ** 2).mean(-1).mul(mask).sum()


def attention_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real query tokens of the squared difference of attention rows, summed
    over keys and averaged over heads (TinyBERT's attention loss on probabilities).
    Attention (B, heads, T, T); mask (B, T)."""
    per_query = ((student.float() - teacher.float()) ** 2).sum(-1).mean(1)  # (B, T)
    return (per_query * mask).sum()


# ---------------------------------------------------------------------------- the student


def student_layer_sources(teacher_layers: int, student_layers: int) -> list[int]:
    """Teacher layer (0-based) each student layer starts from: floor(i * L / N) — every
    other layer (0, 2, 4, ...) when N = L / 2, evenly spaced otherwise."""
    return [(i * teacher_layers) // student_layers for i in range(student_layers)]


def hidden_layer_map(teacher_layers: int, student_layers: int) -> list[tuple[int, int]]:
    """(student, teacher) indices into `hidden_states` (0 = embeddings) for the hidden-state
    loss: m -> m * L / N, so the embeddings and the last layers meet."""
    return [(m, (m * teacher_layers) // student_layers) for m in range(student_layers + 1)]


def attention_layer_map(teacher_layers: int, student_layers: int) -> list[tuple[int, int]]:
    """(student, teacher) layer indices (0-based) for the attention loss: j -> (j + 1) L / N - 1."""
    return [(j, ((j + 1) * teacher_layers) // student_layers - 1) for j in range(student_layers)]


def student_config(teacher_config, num_layers: int | None, overrides: dict[str, Any], teacher_dir: str | Path):
    """The teacher's config with `num_layers` layers (None: half, at least 1) and `overrides`
    (BertConfig fields); raises naming the field when the student would be deeper or wider
    than the teacher, or have another vocabulary."""
    where = f"{teacher_dir}/config.json"
    teacher_depth = teacher_config.num_hidden_layers
    layers = num_layers if num_layers is not None else max(1, teacher_depth // 2)
    if layers < 1:
        raise ConfigError(f"field 'student_layers' must be at least 1, got {layers}")
    if layers > teacher_depth:
        raise ConfigError(f"field 'student_layers' ({layers}): the student is deeper than the teacher "
                          f"({teacher_depth} layers in {where})")
    values = {**teacher_config.to_dict(), "num_hidden_layers": layers, **overrides}
    values.pop("architectures", None)
    config = type(teacher_config).from_dict(values, source="student.*")
    if config.hidden_size > teacher_config.hidden_size:
        raise ConfigError(f"field 'student.hidden_size' ({config.hidden_size}): the student is wider than the "
                          f"teacher (hidden_size {teacher_config.hidden_size} in {where})")
    if config.num_hidden_layers > teacher_depth:
        raise ConfigError(f"field 'student.num_hidden_layers' ({config.num_hidden_layers}): the student is deeper "
                          f"than the teacher ({teacher_depth} layers in {where})")
    if config.vocab_size != teacher_config.vocab_size:
        raise ConfigError(f"field 'student.vocab_size' ({config.vocab_size}) must equal the teacher's vocab_size "
                          f"({teacher_config.vocab_size} in {where}): soft targets are over the teacher's vocabulary")
    return config


_LAYER_KEY = re.compile(r"(^|\.)encoder\.layer\.(\d+)\.")


def init_student_from_teacher(student: nn.Module, teacher: nn.Module, sources: list[int]) -> list[str]:
    """Copy the teacher's weights into `student` (student layer i <- teacher layer
    sources[i]; every other key by name, where the shapes agree). Returns the student
    keys left at their initialisation (not copied, or never trained in the teacher)."""
    teacher_state = teacher.state_dict()
    untrained = set(getattr(teacher, "loading_info", {}).get("missing_keys", []))
    own = student.state_dict()
    loaded, fresh = {}, []
    for key, value in own.items():
        match = _LAYER_KEY.search(key)
        source = key
        if match is not None:
            source = f"{key[:match.start()]}{match[1]}encoder.layer.{sources[int(match[2])]}.{key[match.end():]}"
        if source in teacher_state and tuple(teacher_state[source].shape) == tuple(value.shape):
            loaded[key] = teacher_state[source]
            if source in untrained:
                fresh.append(key)
        else:
            fresh.append(key)
    student.load_state_dict(loaded, strict=False)
    return sorted(fresh)


def weights_digest(directory: str | Path) -> str:
    """sha256 of a checkpoint's weight file (what the teacher computes depends on)."""
    from bertkit.interop.hf import PYTORCH_NAME, SAFETENSORS_NAME

    directory = Path(directory)
    path = directory / SAFETENSORS_NAME if (directory / SAFETENSORS_NAME).exists() else directory / PYTORCH_NAME
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:20]


# ---------------------------------------------------------------------------- configuration


@dataclass
class StudentFields:
    """What both modes share: the student's shape, the soft targets and the teacher cache."""

    teacher: str = ""
    student_layers: int | None = None  # None: half the teacher's layers
    student: dict = field(default_factory=dict)  # BertConfig overrides: --set student.hidden_size=256
    temperature: float = 2.0
    soft_loss: str = "kl"  # kl | ce
    alpha_soft: float = 5.0
    alpha_hard: float = 2.0
    cache_teacher: bool = False
    cache_dir: str | None = None  # with cache_teacher: where the cache lives (default OUTPUT/teacher-cache)

    def teacher_cache_root(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else Path(self.output_dir) / CACHE_DIR

    def check_student_fields(self) -> None:
        check_choice("soft_loss", self.soft_loss, SOFT_LOSSES)
        if not self.temperature > 0:
            raise ConfigError(f"field 'temperature' must be positive, got {self.temperature}")
        for name in self.loss_weights():
            if getattr(self, name) < 0:
                raise ConfigError(f"field {name!r} must be >= 0, got {getattr(self, name)}")
        if not any(getattr(self, name) > 0 for name in self.loss_weights()):
            raise ConfigError(f"at least one of {', '.join(self.loss_weights())} must be positive")

    def loss_weights(self) -> tuple[str, ...]:
        return ("alpha_soft", "alpha_hard")


@dataclass
class DistillConfig(TrainingConfig, StudentFields):
    """General distillation: the loop's fields plus teacher, data, student, loss weights, masking."""

    data: str = ""
    output_dir: str = ""
    alpha_cos: float = 1.0
    alpha_hidden: float = 0.0  # TinyBERT hidden-state MSE (off by default)
    alpha_attention: float = 0.0  # TinyBERT attention-map MSE (off by default)
    masking: str = "token"
    mlm_probability: float = 0.15
    max_predictions_per_seq: int | None = None
    eval_seed: int = EVAL_SEED  # the held-out masks' seed, independent of `seed`

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_student_fields()
        check_choice("masking", self.masking, ("token", "whole_word", "span"))

    def loss_weights(self) -> tuple[str, ...]:
        return ("alpha_soft", "alpha_hard", "alpha_cos", "alpha_hidden", "alpha_attention")

    def training_fields(self) -> TrainingConfig:
        names = {f.name for f in dataclasses.fields(TrainingConfig)}
        return TrainingConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in names})


@dataclass
class TaskDistillConfig(FinetuneConfig, StudentFields):
    """Task distillation: fine-tuning's fields (family, data, recipe; `init_from` is the
    teacher) plus the student and the soft targets. Hinton's mix: alpha_soft 1, alpha_hard
    1, T 2. Every family (classification, tagging, qa, multiple_choice) but the
    feature-based tagger."""

    alpha_soft: float = 1.0
    alpha_hard: float = 1.0
    lr: float = 1e-4  # a shallower student starts further from its optimum than a fine-tuned copy

    def __post_init__(self) -> None:
        if self.teacher:
            self.init_from = self.teacher  # prepare() reads the data against the teacher's checkpoint
        self.teacher = self.init_from
        super().__post_init__()
        self.check_student_fields()
        if self.features is not None:
            raise ConfigError("field 'features': task distillation trains a whole student from the teacher's "
                              "logits, not a feature-based tagger")
        if self.reinit_head:
            raise ConfigError("field 'reinit_head': the teacher's head is what the student learns from")


def build_config(cls, values: dict[str, Any], overrides: dict[str, str], source: str = "config"):
    """`cls` (DistillConfig or TaskDistillConfig) from defaults <- `values` <- `--set`
    overrides; `student.X` keys go to `student`, `model.X` keys (task mode) to `model`."""
    grouped: dict[str, dict[str, Any]] = {"student": {}, "model": {}}
    plain = {}
    for key, value in overrides.items():
        prefix, dot, name = key.partition(".")
        if dot and prefix in grouped and (prefix == "student" or cls is TaskDistillConfig):
            grouped[prefix][name] = parse_value(value, Any)
        else:
            plain[key] = value
    base = apply_overrides(cls(), values, source=source)
    config = apply_overrides(base, plain)
    for name, extra in grouped.items():
        if extra:
            config = dataclasses.replace(config, **{name: {**getattr(config, name), **extra}})
    required = [("teacher", "--teacher DIR"), ("output_dir", "--output-dir DIR")]
    required.append(("data", "--data DIR") if cls is DistillConfig else ("train", "--train FILE or --data DIR"))
    for name, flag in required:
        if not getattr(config, name):
            raise ConfigError(f"field {name!r} is required ({flag})")
    return config


# ---------------------------------------------------------------------------- teacher loading


GENERAL_TEACHER_TYPES = ("bert",)  # model_type values general distillation takes (its student: BertForPreTraining)


def check_general_teacher(directory: str | Path) -> None:
    """Raises in one line naming `directory` unless its config.json's model_type is one
    general distillation takes (an ELECTRA or RoBERTa checkpoint would otherwise fail on
    a config field BERT lacks)."""
    from bertkit.model.families import MODEL_FAMILIES, read_model_type

    model_type = read_model_type(directory)
    if model_type not in GENERAL_TEACHER_TYPES:
        raise BertkitError(f"{directory}: general distillation takes a teacher of model_type "
                           f"{' or '.join(map(repr, GENERAL_TEACHER_TYPES))}, got {model_type!r}; task distillation "
                           f"(--task) takes {', '.join(MODEL_FAMILIES)} teachers fine-tuned on the task")


def load_teacher(cls, directory: str | Path, **kwargs) -> nn.Module:
    """`cls.from_pretrained(directory)` in eval mode with gradients off."""
    teacher = cls.from_pretrained(directory, **kwargs)
    teacher.eval()
    teacher.requires_grad_(False)
    return teacher


def _teacher_device(teacher: nn.Module, device: torch.device) -> nn.Module:
    if next(teacher.parameters()).device != device:
        teacher.to(device)
    return teacher


# ---------------------------------------------------------------------------- general distillation


class DistillationModel(nn.Module):
    """What general distillation trains: the student and, when its hidden size differs
    from the teacher's and a hidden-state loss is on, a projection H_s -> H_t (W_h)."""

    def __init__(self, student: nn.Module, teacher_hidden_size: int | None = None):
        super().__init__()
        self.student = student
        self.projection = None
        if teacher_hidden_size is not None and teacher_hidden_size != student.config.hidden_size:
            self.projection = nn.Linear(student.config.hidden_size, teacher_hidden_size)
            nn.init.normal_(self.projection.weight, 0.0, student.config.initializer_range)
            nn.init.zeros_(self.projection.bias)

    def forward(self, input_ids, token_type_ids, attention_mask, labels, output_hidden_states=False,
                output_attentions=False):
        """The student's BertForPreTrainingOutput and its hidden states (L+1 of (B, T, H_t),
        projected when widths differ; None unless asked for)."""
        out = self.student(input_ids, token_type_ids, attention_mask, labels=labels,
                           output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        hidden = out.hidden_states
        if hidden is not None and self.projection is not None:
            hidden = tuple(self.projection(h) for h in hidden)
        return out, hidden


class TeacherCache:
    """Teacher outputs per (epoch, training example), one safetensors file each, under a
    folder named by a key of everything they depend on."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, epoch: int, index: int) -> Path:
        return self.directory / f"epoch-{epoch:04d}" / f"{index:09d}.safetensors"

    def load(self, epoch: int, index: int) -> dict[str, torch.Tensor] | None:
        from safetensors.torch import load_file

        path = self.path(epoch, index)
        if not path.is_file():
            return None
        try:
            return load_file(path)
        except Exception:  # a torn file (killed mid-write cannot happen: writes are atomic) is recomputed
            return None

    def save(self, epoch: int, index: int, tensors: dict[str, torch.Tensor]) -> None:
        from safetensors.torch import save_file

        path = self.path(epoch, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))


class GeneralDistillation(MaskedLMObjective):
    """DistilBERT / TinyBERT distillation on a built pre-training data directory."""

    name = "distill"
    data_formats = ("nsp", "packed", "sop")
    progress_keys = ("mlm_accuracy", "soft_loss")
    plot_panels = [
        ("Loss", ["loss", "eval_loss"]),
        ("Soft-target loss", ["soft_loss", "eval_soft_loss"]),
        ("MLM accuracy", ["mlm_accuracy", "eval_mlm_accuracy"]),
    ]

    def __init__(self, model: DistillationModel, teacher: nn.Module, train, eval_data, masking, config: DistillConfig,
                 cache: TeacherCache | None = None):
        super().__init__(model, train, eval_data, masking, config.seed, config.eval_seed)
        self.teacher = teacher
        self.config = config
        self.cache = cache
        teacher_layers = teacher.config.num_hidden_layers
        student_layers = model.student.config.num_hidden_layers
        self.hidden_map = hidden_layer_map(teacher_layers, student_layers) if config.alpha_hidden > 0 else []
        self.attention_map = attention_layer_map(teacher_layers, student_layers) if config.alpha_attention > 0 else []
        self.want_hidden = config.alpha_cos > 0 or config.alpha_hidden > 0

    # ---- data: the example's identity travels with it (the cache's key) ----------
    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        example = super().train_example(index, epoch)
        example["example_index"], example["epoch"] = index, epoch
        return example

    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        state = model.state_dict() if state_dict is None else state_dict
        student = {k.removeprefix("student."): v for k, v in state.items() if k.startswith("student.")}
        model.student.save_pretrained(directory, state_dict=student)
        self.tokenizer.save_pretrained(directory)
        projection = {k.removeprefix("projection."): v for k, v in state.items() if k.startswith("projection.")}
        if projection:
            from safetensors.torch import save_file

            with atomic_path(Path(directory) / PROJECTION_FILE) as tmp:
                save_file({k: v.detach().contiguous().cpu() for k, v in projection.items()}, str(tmp))

    # ---- the teacher ------------------------------------------------------------
    def _run_teacher(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Teacher outputs for a batch: logits (N, V) at the masked positions, the last
        hidden state and the mapped hidden states / attention maps, as ordinary tensors."""
        teacher = _teacher_device(self.teacher, batch["input_ids"].device)
        with torch.inference_mode():
            out = teacher.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                               output_hidden_states=bool(self.hidden_map),
                               output_attentions=bool(self.attention_map))
            result: dict[str, Any] = {}
            if self.config.alpha_soft > 0:
                labels = batch["labels"]
                positions = (labels != -100).nonzero(as_tuple=False)  # (N, 2), row-major as the student's
                result["logits"] = teacher.mlm_logits(out.last_hidden_state[positions[:, 0], positions[:, 1]])
            if self.config.alpha_cos > 0:
                result["last"] = out.last_hidden_state
            if self.hidden_map:
                result["hidden"] = [out.hidden_states[t] for _, t in self.hidden_map]
            if self.attention_map:
                result["attentions"] = [out.attentions[t] for _, t in self.attention_map]
        return {k: [t.clone() for t in v] if isinstance(v, list) else v.clone() for k, v in result.items()}

    def teacher_outputs(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        if self.cache is None or "example_index" not in batch:
            return self._run_teacher(batch)
        indices, epochs = batch["example_index"].tolist(), batch["epoch"].tolist()
        rows = [self.cache.load(e, i) for e, i in zip(epochs, indices, strict=True)]
        if any(row is None for row in rows):
            outputs = self._run_teacher(batch)
            for b, (e, i) in enumerate(zip(epochs, indices, strict=True)):
                self.cache.save(e, i, self._row(outputs, batch, b))
            return outputs
        device = batch["input_ids"].device
        return self._assemble([{k: v.to(device) for k, v in row.items()} for row in rows], batch)

    def _row(self, outputs: dict[str, Any], batch: dict[str, torch.Tensor], b: int) -> dict[str, torch.Tensor]:
        """Row b of a batch's teacher outputs, cut to its real length."""
        length = int(batch["attention_mask"][b].sum())
        row = {}
        if "logits" in outputs:
            masked = batch["labels"] != -100  # (B, T)
            start = int(masked[:b].sum())
            row["logits"] = outputs["logits"][start : start + int(masked[b].sum())]
        if "last" in outputs:
            row["last"] = outputs["last"][b, :length]
        for k, hidden in enumerate(outputs.get("hidden", [])):
            row[f"hidden.{k}"] = hidden[b, :length]
        for k, attention in enumerate(outputs.get("attentions", [])):
            row[f"attention.{k}"] = attention[b, :, :length, :length]
        return row

    def _assemble(self, rows: list[dict[str, torch.Tensor]], batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Cached rows -> the batch's teacher outputs, zero-padded to its width T."""
        width = batch["input_ids"].shape[1]

        def pad(key: str) -> torch.Tensor:
            first = rows[0][key]
            if first.ndim == 2:  # (T_i, H) -> (B, T, H)
                out = first.new_zeros(len(rows), width, first.shape[1])
                for b, row in enumerate(rows):
                    out[b, : row[key].shape[0]] = row[key]
                return out
            out = first.new_zeros(len(rows), first.shape[0], width, width)  # (B, heads, T, T)
            for b, row in enumerate(rows):
                n = row[key].shape[1]
                out[b, :, :n, :n] = row[key]
            return out

        result: dict[str, Any] = {}
        if self.config.alpha_soft > 0:
            result["logits"] = torch.cat([row["logits"] for row in rows])
        if self.config.alpha_cos > 0:
            result["last"] = pad("last")
        if self.hidden_map:
            result["hidden"] = [pad(f"hidden.{k}") for k in range(len(self.hidden_map))]
        if self.attention_map:
            result["attentions"] = [pad(f"attention.{k}") for k in range(len(self.attention_map))]
        return result

    # ---- loss ---------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"mlm": sequence_counts(batch["labels"]), "tokens": float(batch["attention_mask"].sum())}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        labels, mask = batch["labels"], batch["attention_mask"]
        out, hidden = model(batch["input_ids"], batch["token_type_ids"], mask, labels=labels,
                            output_hidden_states=self.want_hidden, output_attentions=bool(self.attention_map))
        teacher = self.teacher_outputs(batch)
        masked, tokens = max(totals["mlm"], 1.0), max(totals["tokens"], 1.0)
        mask = mask.to(torch.float32)
        stats = mlm_statistics(out.prediction_logits, labels, out.loss)
        stats["token_count"] = float(mask.sum())
        # out.loss: this micro-batch's mean over its masked positions -> its share of the global mean
        loss = cfg.alpha_hard * out.loss * (stats["mlm_count"] / masked)
        terms: dict[str, torch.Tensor] = {}
        if cfg.alpha_soft > 0:
            terms["soft"] = soft_target_loss(out.prediction_logits, teacher["logits"], cfg.temperature,
                                             cfg.soft_loss)
        if cfg.alpha_cos > 0:
            terms["cos"] = cosine_loss(hidden[-1], teacher["last"], mask)
        if self.hidden_map:
            terms["hidden"] = sum(hidden_mse(hidden[s], t, mask)
                                  for (s, _), t in zip(self.hidden_map, teacher["hidden"], strict=True))
        if self.attention_map:
            terms["attention"] = sum(attention_mse(out.attentions[s], t, mask)
                                     for (s, _), t in zip(self.attention_map, teacher["attentions"], strict=True))
        for name, value in terms.items():
            total = masked if name == "soft" else tokens
            loss = loss + getattr(cfg, f"alpha_{name}") * value / total
            stats[f"{name}_loss_sum"] = float(value.detach())
        return loss, stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = mlm_metrics(stats)
        if not metrics:
            return {}
        cfg = self.config
        total = cfg.alpha_hard * metrics["mlm_loss"]
        for name in ("soft", "cos", "hidden", "attention"):
            if f"{name}_loss_sum" in stats:
                count = stats["mlm_count"] if name == "soft" else stats.get("token_count", 0.0)
                metrics[f"{name}_loss"] = stats[f"{name}_loss_sum"] / max(count, 1.0)
                total += getattr(cfg, f"alpha_{name}") * metrics[f"{name}_loss"]
        metrics["loss"] = total
        return metrics


def _open_data(config: DistillConfig):
    from bertkit.data.dataset import PretrainingDataset

    train = PretrainingDataset.open(config.data, "train")
    try:
        eval_data = PretrainingDataset.open(config.data, "eval")
    except BertkitError:
        eval_data = None
    return train, eval_data


def check_teacher_vocabulary(teacher_dir: str | Path, teacher_config, train) -> None:
    """The teacher must speak the data's vocabulary: same size and, when the teacher folder
    has a tokenizer, the same tokenizer fingerprint."""
    from bertkit.data.dataset import tokenizer_fingerprint
    from bertkit.tokenization import Tokenizer

    info = train.info
    if teacher_config.vocab_size != info.vocab_size:
        raise BertkitError(f"{train.directory}: built with a tokenizer of {info.vocab_size} tokens, but the teacher "
                           f"at {teacher_dir} has vocab_size {teacher_config.vocab_size}; rebuild the data with the "
                           "teacher's tokenizer")
    try:
        tokenizer = Tokenizer.from_pretrained(teacher_dir)
    except BertkitError:
        return  # weights only: the vocabulary size is all there is to check
    if tokenizer_fingerprint(tokenizer) != info.tokenizer_fingerprint:
        raise BertkitError(f"{train.directory}: built with another tokenizer than the teacher's at {teacher_dir} "
                           "(same size, different vocabulary or normalisation); rebuild the data with the teacher's "
                           "tokenizer")


def prepare_general(config: DistillConfig, checkpoint: Path | None = None):
    """Teacher, student and program for `config`, every check made before training.
    `checkpoint`: resume the student (and projection) from it. Returns (program, model, fresh keys)."""
    from bertkit.data.masking import MaskingConfig
    from bertkit.model import BertForPreTraining

    check_general_teacher(config.teacher)
    train, eval_data = _open_data(config)
    teacher = load_teacher(BertForPreTraining, config.teacher)
    check_teacher_vocabulary(config.teacher, teacher.config, train)
    if teacher.config.max_position_embeddings < train.info.max_seq_length:
        raise BertkitError(f"{config.data}: max_seq_length {train.info.max_seq_length} exceeds the teacher's "
                           f"max_position_embeddings {teacher.config.max_position_embeddings}")
    no_mlm_head = any(k.startswith("cls.predictions.") for k in teacher.loading_info["missing_keys"])
    if no_mlm_head and config.alpha_soft > 0:
        raise BertkitError(f"{config.teacher}: the teacher has no MLM head (cls.predictions), so there are no soft "
                           "targets; use a BertForPreTraining / BertForMaskedLM checkpoint, or distil from hidden "
                           "states only with --set alpha_soft=0")
    s_config = student_config(teacher.config, config.student_layers, config.student, config.teacher)
    if config.alpha_attention > 0 and s_config.num_attention_heads != teacher.config.num_attention_heads:
        raise ConfigError(f"field 'alpha_attention': the attention loss compares heads one to one, but the student "
                          f"has {s_config.num_attention_heads} heads and the teacher {teacher.config.num_attention_heads}")
    torch.manual_seed(config.seed)
    if checkpoint is not None:
        student = BertForPreTraining.from_pretrained(checkpoint)
        fresh: list[str] = []
    else:
        student = BertForPreTraining(s_config)
        fresh = init_student_from_teacher(
            student, teacher, student_layer_sources(teacher.config.num_hidden_layers, s_config.num_hidden_layers))
    student.train()
    wants_hidden = config.alpha_cos > 0 or config.alpha_hidden > 0
    model = DistillationModel(student, teacher.config.hidden_size if wants_hidden else None)
    if checkpoint is not None and model.projection is not None:
        from safetensors.torch import load_file

        path = checkpoint / PROJECTION_FILE
        if not path.is_file():
            raise BertkitError(f"{checkpoint}: no {PROJECTION_FILE} (the hidden-state projection) to resume from")
        model.projection.load_state_dict(load_file(path))
    cache = None
    if config.cache_teacher:
        cache = TeacherCache(config.teacher_cache_root() / general_cache_key(config, teacher, train))
    masking = MaskingConfig(mlm_probability=config.mlm_probability, strategy=config.masking,
                            max_predictions_per_seq=config.max_predictions_per_seq)
    program = GeneralDistillation(model, teacher, train, eval_data, masking, config, cache)
    return program, model, fresh


def general_cache_key(config: DistillConfig, teacher: nn.Module, train) -> str:
    """What the teacher's outputs for (epoch, example) depend on: its weights and config,
    the data, the masking and seed, and which outputs are stored."""
    info = dataclasses.asdict(train.info)
    s_layers = config.student_layers or max(1, teacher.config.num_hidden_layers // 2)
    stored = {"logits": config.alpha_soft > 0, "last": config.alpha_cos > 0,
              "hidden": hidden_layer_map(teacher.config.num_hidden_layers, s_layers) if config.alpha_hidden > 0 else [],
              "attention": attention_layer_map(teacher.config.num_hidden_layers, s_layers)
              if config.alpha_attention > 0 else []}
    return _digest({"teacher": weights_digest(config.teacher), "teacher_config": teacher.config.to_dict(),
                    "data": info, "masking": [config.masking, config.mlm_probability, config.max_predictions_per_seq],
                    "seed": config.seed, "stored": stored})


def distill_general(config: DistillConfig, *, overwrite: bool = False, on_start=None):
    """Run general distillation (`bertkit distill --data DIR`); returns the loop's TrainResult.
    `on_start(config)` runs once every check has passed, just before the first step."""
    from bertkit.training import checkpoints as ckpt

    ckpt.refuse_existing_run(Path(config.output_dir), overwrite)
    return _run_general(absolute_paths(config, GENERAL_PATH_FIELDS), None, on_start)


def resume_general_distillation(output_dir: str | Path, values: dict[str, Any] | None = None,
                                overrides: dict[str, str] | None = None, *, notify=None):
    """Continue the general distillation in `output_dir` from its newest readable
    checkpoint; `values` and `overrides` must match the saved run except where
    bertkit.training.resume allows a change (as `bertkit pretrain --resume`)."""
    from bertkit.training.resume import resume_run

    resumption = resume_run(output_dir, lambda v, o, source: build_config(DistillConfig, v, o, source=source),
                            values or {}, overrides or {}, GENERAL_PATH_FIELDS)
    return _run_general(resumption.config, resumption, None, notify)


def _run_general(config: DistillConfig, resumption, on_start, notify=None):
    from bertkit.training.distributed import setup, teardown
    from bertkit.training.loop import Trainer

    output_dir = Path(config.output_dir)
    checkpoint = resumption.checkpoint if resumption is not None else None
    program, model, fresh = prepare_general(config, checkpoint)
    ctx = setup()
    try:
        trainer = Trainer(program, config.training_fields(), output_dir, ctx)
        if ctx.is_main:
            output_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(output_dir / RUN_CONFIG_FILE, to_json(config))
            for line in resumption.notes() if resumption is not None and notify is not None else []:
                notify(line)  # after every check, so an error stays one line
            if on_start is not None:
                on_start(config)
        started = time.perf_counter()
        result = trainer.train(model, resume_from=checkpoint)
        if ctx.is_main:
            _write_general_report(config, program, model, fresh, result, time.perf_counter() - started, resumption)
        return result
    finally:
        teardown()


def _describe_student(teacher_config, student_config_, teacher_dir: str, fresh: list[str]) -> dict[str, Any]:
    sources = student_layer_sources(teacher_config.num_hidden_layers, student_config_.num_hidden_layers)
    copied = student_config_.hidden_size == teacher_config.hidden_size
    return {
        "teacher": f"{teacher_dir} ({teacher_config.num_hidden_layers} layers, hidden {teacher_config.hidden_size})",
        "student": f"{student_config_.num_hidden_layers} layers, hidden {student_config_.hidden_size}, "
                   f"{student_config_.num_attention_heads} heads",
        "student layers from teacher layers": ", ".join(map(str, sources)) if copied
        else "none (other width: BERT initialisation)",
        "initialised fresh": ", ".join(fresh[:8]) + (" ..." if len(fresh) > 8 else "") if fresh else "nothing",
    }


def _write_general_report(config: DistillConfig, program, model, fresh, result, seconds: float,
                          resumption=None) -> Path:
    from bertkit.training.reporting import plot_curves, write_report

    output_dir = Path(config.output_dir)
    plots = plot_curves(result.records, output_dir, program.plot_panels)
    final = {}
    details = program.evaluation_details()
    for record in result.records:
        final.update({k: v for k, v in record.items() if k != "step" and k not in details})
    student = model.student
    weights = {name: getattr(config, name) for name in config.loss_weights()}
    sections = [
        ("Distillation", {**_describe_student(program.teacher.config, student.config, config.teacher, fresh),
                          "temperature": config.temperature, "soft loss": config.soft_loss,
                          "loss weights": ", ".join(f"{k.removeprefix('alpha_')} {v:g}" for k, v in weights.items()),
                          "hidden projection": "yes (W_h, saved as " + PROJECTION_FILE + ")"
                          if model.projection is not None else "no (same width)",
                          "teacher cache": str(program.cache.directory) if program.cache is not None else "off"}),
        ("Run", {"steps": result.step, "global batch": config.batch_size, "lr (peak), warm-up":
                 f"{config.lr:g}, {config.describe_warmup()}", "masking": f"{config.masking}, {config.mlm_probability:.0%}",
                 "seed": config.seed, "held-out masks": program.describe_eval_masks(),
                 **({"resumed from": resumption.report_entry()} if resumption is not None else {}),
                 "data": f"{config.data} ({program.train.info.num_instances} instances)",
                 "wall time (s)": round(seconds, 1), "training tokens/s": round(result.tokens_per_second, 1)}),
        ("Final metrics", final or "no metrics logged"),
        ("Files", "`final/` (the student: HF BertForPreTraining layout + tokenizer), `checkpoint-*`, `metrics.jsonl`, "
                  f"`{RUN_CONFIG_FILE}`"),
    ]
    return write_report(output_dir, f"Distillation run: {output_dir.name}", sections, plots)


# ---------------------------------------------------------------------------- task distillation


class _Recorder:
    """Calls the model and keeps its output: a family's own `compute_loss` gives the hard
    loss and its statistics, and the output it computed meets the teacher's logits."""

    def __init__(self, model):
        self.model = model
        self.output = None

    def __call__(self, *args, **kwargs):
        self.output = self.model(*args, **kwargs)
        return self.output


class SoftTargets:
    """Task distillation over a task program (mixed in before it): the family's data,
    hard loss, metrics, dev evaluation and saved layout, plus the teacher's logits of
    every training feature as soft targets.

    teacher_logits: per training feature, what `run_features` gives the teacher: (K,)
    sequence classification, (C,) multiple choice, (T_i, K) tagging, (T_i, 2) QA start /
    end (`per_position`: padded with zeros to the batch's T, never read there). A
    family's `soft_loss_sum(out, batch)` picks the student's logits that meet them and
    returns T^2 KL (or the `soft_loss` kind) summed over the items the task loss counts
    (`loss_counts`: sequences, labelled tokens, windows, questions), so
        loss = alpha_hard * task loss + alpha_soft * soft_loss_sum / global item count.
    """

    per_position = False
    soft_targets = ""  # what the soft targets are, for the report

    def __init__(self, *args, teacher_logits, config: TaskDistillConfig, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher_logits = [np.asarray(x, dtype=np.float32) for x in teacher_logits]
        if len(self.teacher_logits) != len(self.train_features):
            raise ValueError(f"{len(self.teacher_logits)} teacher logits for {len(self.train_features)} features")
        self.config = config

    @property
    def progress_keys(self):
        return (*super().progress_keys, "soft_loss")

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        return {**super().train_example(index, epoch), "teacher_logits": self.teacher_logits[index]}

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if "teacher_logits" not in examples[0]:  # evaluation
            return super().collate(examples)
        batch = super().collate([{k: v for k, v in ex.items() if k != "teacher_logits"} for ex in examples])
        logits = [ex["teacher_logits"] for ex in examples]
        if self.per_position:
            padded = np.zeros((len(logits), batch["input_ids"].shape[-1], logits[0].shape[-1]), dtype=np.float32)
            for row, value in enumerate(logits):
                padded[row, : len(value)] = value
            batch["teacher_logits"] = torch.from_numpy(padded)  # (B, T, K)
        else:
            batch["teacher_logits"] = torch.from_numpy(np.stack(logits))  # (B, K) or (B, C)
        return batch

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        seen = _Recorder(model)
        hard, stats = super().compute_loss(seen, batch, totals)  # task loss * count / global count
        soft = self.soft_loss_sum(seen.output, batch)
        loss = self.config.alpha_hard * hard + self.config.alpha_soft * soft / max(totals["task"], 1.0)
        return loss, {**stats, "soft_loss_sum": float(soft.detach())}

    def soft_loss_sum(self, out, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def kl(self, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`soft_target_loss` at the run's temperature and kind, summed over rows."""
        return soft_target_loss(student, teacher, self.config.temperature, self.config.soft_loss, mask)

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = super().summarize(stats)
        if metrics and "soft_loss_sum" in stats:
            metrics["soft_loss"] = stats["soft_loss_sum"] / stats["task_count"]  # per item
        return metrics


class TaskDistillation(SoftTargets, ClassificationProgram):
    """Sequence classification: KL on the K logits (MSE to the teacher's prediction for regression)."""

    soft_targets = "T^2 KL on the logits per sequence (regression: squared error to the teacher's prediction)"

    def soft_loss_sum(self, out, batch):
        teacher = batch["teacher_logits"]  # (B, K)
        if self.spec.regression:
            return ((out.logits.float() - teacher.float()) ** 2).sum()
        return self.kl(out.logits, teacher)


class TaggingDistillation(SoftTargets, TaggingProgram):
    """Token tagging: KL on the K tag logits at each labelled token (a word's first sub-token)."""

    per_position = True
    soft_targets = "T^2 KL on the tag logits per labelled token (first sub-token of each word)"

    def soft_loss_sum(self, out, batch):
        labelled = batch["labels"] != IGNORE_INDEX  # (B, T)
        return self.kl(out.logits[labelled], batch["teacher_logits"][labelled])  # (N, K) each


class QuestionAnsweringDistillation(SoftTargets, QuestionAnsweringProgram):
    """Extractive QA: KL of the start and of the end distribution over a window's real
    positions (padding excluded), averaged as the QA loss is: (start + end) / 2."""

    per_position = True
    soft_targets = "T^2 (KL(start) + KL(end)) / 2 per window, over its real positions"

    def soft_loss_sum(self, out, batch):
        real = batch["attention_mask"].bool()  # (B, T)
        teacher = batch["teacher_logits"]  # (B, T, 2)
        return (self.kl(out.start_logits, teacher[..., 0], real) + self.kl(out.end_logits, teacher[..., 1], real)) / 2


class MultipleChoiceDistillation(SoftTargets, MultipleChoiceProgram):
    """Multiple choice: KL on the C choices' scores."""

    soft_targets = "T^2 KL on the choices' scores per question"

    def soft_loss_sum(self, out, batch):
        return self.kl(out.logits, batch["teacher_logits"])  # (B, C)


DISTILL_PROGRAMS: dict[str, type[SoftTargets]] = {
    cls.family: cls
    for cls in (TaskDistillation, TaggingDistillation, QuestionAnsweringDistillation, MultipleChoiceDistillation)
}


def teacher_task_logits(teacher: nn.Module, features: list[dict[str, Any]], collate, batch_size: int,
                        progress: bool = False) -> list[np.ndarray]:
    """The teacher's logits of every feature (`run_features`: (K,), (C,), (T_i, K) or
    (T_i, 2)) as float32, under inference_mode."""
    with torch.inference_mode():
        outputs = run_features(teacher, features, collate, batch_size, progress, "teacher")
    return [np.asarray(x, dtype=np.float32) for x in outputs]


def save_teacher_logits(path: Path, logits: list[np.ndarray]) -> None:
    """An .npz aligned with the features: `logits` (N, ...) when every feature's array has
    the same shape, else `values` (sum of the T_i, ...) and `lengths` (N,) (ragged: tagging
    and QA windows of their own lengths). Written atomically."""
    if len({x.shape for x in logits}) <= 1:
        arrays = {"logits": np.stack(logits) if logits else np.zeros((0,), np.float32)}
    else:
        arrays = {"values": np.concatenate(logits), "lengths": np.asarray([len(x) for x in logits], dtype=np.int64)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)


def load_teacher_logits(path: Path) -> list[np.ndarray]:
    """The per-feature arrays of `save_teacher_logits`."""
    with np.load(path, allow_pickle=False) as data:
        if "logits" in data:
            return list(data["logits"])
        return np.split(data["values"], np.cumsum(data["lengths"])[:-1])


def _task_cache_path(config: TaskDistillConfig, spec) -> Path:
    key = _digest({"teacher": weights_digest(config.teacher), "train": _file_digest(config.train),
                   "spec": dataclasses.asdict(spec)})
    return config.teacher_cache_root() / f"task-{key}.npz"


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class TaskDistillResult:
    output_dir: Path
    best_dir: Path | None
    metric: str | None
    best_metric: float | None
    best_step: int | None
    teacher_metrics: dict[str, float] | None
    student_parameters: int
    teacher_parameters: int


_FINETUNE_TASK = {"classification": "glue|classify", "tagging": "ner", "qa": "squad",
                  "multiple_choice": "multiple-choice"}  # for the error messages


def _prepare_against_teacher(config: TaskDistillConfig):
    """`bertkit.finetuning.prepare` with the teacher as the checkpoint: the data read,
    checked and encoded in the teacher's label order. A teacher whose label map does not
    cover the data fails in prepare's one line, naming the teacher's config.json."""
    from bertkit.finetuning import prepare

    return prepare(config, label_map_advice="distil from a teacher fine-tuned on these labels")


def check_teacher_head(config: TaskDistillConfig, prepared, model_cls) -> None:
    """Raises in one line naming the teacher directory unless it holds a fine-tuned head of
    the task's family for the task's labels (`prepare` kept it). A transformers
    BertForSequenceClassification with LABEL_i names and as many outputs as labels is
    taken in the task's label order."""
    base = prepared.base_config
    architectures = base.extra.get("architectures") or []
    name = model_cls.__name__
    outputs = 1 if prepared.spec.regression else len(prepared.labels or [])
    placeholder_head = (prepared.spec.family == "classification" and name in architectures
                        and not base.has_label_names and base.num_labels == outputs)
    if prepared.keep_head or placeholder_head:
        return
    shown = ", ".join(architectures) or "none"
    why = ("its label map has no names (LABEL_i) to match the data's labels" if name in architectures
           else f"config.json architectures: {shown}")
    labels = " for these labels" if prepared.labels is not None else ""
    raise BertkitError(f"{config.teacher}: not a fine-tuned {name}{labels} ({why}); fine-tune the teacher first "
                       f"with `bertkit finetune {_FINETUNE_TASK[prepared.spec.family]}`")


def distill_task(config: TaskDistillConfig, *, overwrite: bool = False, notify=None) -> TaskDistillResult:
    """Task distillation (`bertkit distill --task glue|classify|ner|squad|multiple-choice`):
    the student trains on the task's training data with the teacher's logits; best/ is
    chosen by the dev metric."""
    from bertkit.finetuning import task_model_config, write_qa_predictions
    from bertkit.training.distributed import setup, teardown
    from bertkit.training.loop import Trainer

    output_dir = Path(config.output_dir)
    found = [n for n in ("best", "final", "metrics.jsonl", "report.md") if (output_dir / n).exists()]
    if found and not overwrite:
        raise BertkitError(f"{output_dir}: already holds a run ({found[0]}); pass --overwrite to replace it "
                           "or choose another --output-dir")
    prepared = _prepare_against_teacher(config)
    model_cls = prepared.program_cls.model_class(prepared.base_config)
    check_teacher_head(config, prepared, model_cls)
    teacher = load_teacher(model_cls, config.teacher, config=task_model_config(prepared))
    head = [k for k in teacher.loading_info["missing_keys"] if not k.startswith(f"{teacher.base_model_prefix}.")]
    if head:
        raise BertkitError(f"{config.teacher}: the checkpoint has no {head[0].split('.')[0]} weights (the task "
                           "head); fine-tune the teacher first")
    s_config = student_config(teacher.config, config.student_layers, config.student, config.teacher)
    if prepared.tokenizer.vocab_size > s_config.vocab_size:
        raise ConfigError(f"field 'student.vocab_size' ({s_config.vocab_size}) is smaller than the tokenizer's "
                          f"{prepared.tokenizer.vocab_size} tokens in {config.teacher}")
    torch.manual_seed(config.seed)
    student = model_cls(s_config)
    fresh = init_student_from_teacher(
        student, teacher, student_layer_sources(teacher.config.num_hidden_layers, s_config.num_hidden_layers))
    student.train()

    program_cls = DISTILL_PROGRAMS[prepared.program_cls.family]
    pad_id = prepared.tokenizer.pad_token_id or 0
    collate = lambda rows: program_cls.module().collate(rows, pad_id)  # noqa: E731
    cache_path = _task_cache_path(config, prepared.spec) if config.cache_teacher else None
    if cache_path is not None and cache_path.is_file():
        logits = load_teacher_logits(cache_path)
    else:
        logits = teacher_task_logits(teacher, prepared.train.features, collate, config.eval_batch_size,
                                     config.progress)
        if cache_path is not None:
            save_teacher_logits(cache_path, logits)
    id2label = None if prepared.labels is None else dict(enumerate(prepared.labels))
    teacher_metrics = None
    if prepared.dev is not None:  # scored as the student's dev evaluations are (QA v2.0: threshold tuned on dev)
        with torch.inference_mode():
            outputs = run_features(teacher, prepared.dev.features, collate, config.eval_batch_size, config.progress,
                                   "teacher dev")
        scorer = prepared.program_cls(teacher, prepared.tokenizer, prepared.spec, [], prepared.dev, id2label,
                                      progress=False)
        teacher_metrics = scorer.metrics(prepared.dev, outputs)
    if notify is not None:
        notify(f"student {s_config.num_hidden_layers} layers from teacher layers "
               f"{student_layer_sources(teacher.config.num_hidden_layers, s_config.num_hidden_layers)}"
               + (f"; initialised fresh: {', '.join(fresh)}" if fresh else "; every weight copied"))
    program = program_cls(student, prepared.tokenizer, prepared.spec, prepared.train.features, prepared.dev, id2label,
                          group_by_length=config.group_by_length, eval_batch_size=config.eval_batch_size,
                          progress=config.progress, teacher_logits=logits, config=config)
    steps_per_epoch = math.ceil(len(prepared.train.features) / config.batch_size)
    metric = program.default_metric(prepared.spec) if prepared.dev is not None else None
    ctx = setup()
    try:
        trainer = Trainer(program, config.training_fields(steps_per_epoch, metric), output_dir, ctx)
        if ctx.is_main:
            output_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(output_dir / RUN_CONFIG_FILE, to_json(config))
        started = time.perf_counter()
        result = trainer.train(student)
        seconds = time.perf_counter() - started
    finally:
        teardown()
    best_dir = output_dir / "best" if result.best_dir is not None else None
    if ctx.is_main:
        write_qa_predictions(prepared, program.best_outputs, output_dir)
        _write_task_report(config, prepared, program, teacher, student, fresh, result, metric, teacher_metrics,
                           seconds)
    return TaskDistillResult(output_dir, best_dir, metric, result.best_metric, result.best_step, teacher_metrics,
                             student.num_parameters(), teacher.num_parameters())


def _task_name(spec) -> str:
    if spec.family == "classification":
        return spec.glue_task or ("regression" if spec.regression else "classification")
    return {"tagging": f"tagging ({spec.scheme})", "multiple_choice": "multiple choice",
            "qa": f"SQuAD v{'2.0' if spec.squad_version == 2 else '1.1'} (doc_stride {spec.doc_stride}, "
                  f"max_query_length {spec.max_query_length})"}[spec.family]


def _write_task_report(config, prepared, program, teacher, student, fresh, result, metric, teacher_metrics,
                       seconds) -> Path:
    from bertkit.evaluation.metrics import format_metric
    from bertkit.finetuning import qa_scoring_rule, qa_threshold_note
    from bertkit.training.reporting import plot_curves, write_report

    output_dir = Path(config.output_dir)
    panels = [("Loss", ["loss", "eval_loss"]), ("Soft-target loss", ["soft_loss"])]
    if metric:
        panels.append((f"Dev {metric}", [f"eval_{metric}"]))
    plots = plot_curves(result.records, output_dir, panels)
    best: dict[str, Any] | str = "no dev set: no best model (use final/)"
    if result.best_step is not None:
        teacher_value = (teacher_metrics or {}).get(metric)
        best = {"metric": metric, "student (best)": format_metric(metric, result.best_metric),
                "teacher": None if teacher_value is None else format_metric(metric, teacher_value),
                "student / teacher": result.best_metric / teacher_value if teacher_value else None,
                "step": result.best_step, "model": "best/"}
    qa_files = (", `dev_predictions.json`" + (", `dev_na_probs.json`" if prepared.spec.squad_version == 2 else "")
                if prepared.spec.family == "qa" and result.best_step is not None else "")
    sections = [
        ("Distillation", {**_describe_student(teacher.config, student.config, config.teacher, fresh),
                          "parameters (student / teacher)": f"{student.num_parameters() / 1e6:.2f}M / "
                                                            f"{teacher.num_parameters() / 1e6:.2f}M",
                          "soft targets": program.soft_targets,
                          "temperature": config.temperature, "soft loss": config.soft_loss,
                          "loss weights": f"soft {config.alpha_soft:g}, hard {config.alpha_hard:g}"}),
        ("Run", {"task": _task_name(prepared.spec), **qa_scoring_rule(prepared),
                 "train": f"{config.train}: {len(prepared.train.examples)} examples, "
                          f"{len(prepared.train.features)} sequences",
                 "dev": f"{config.dev}" if config.dev else "none", "epochs": config.epochs,
                 "batch size, max_seq_length": f"{config.batch_size}, {config.max_seq_length}",
                 "lr (peak)": config.lr, "seed": config.seed, "steps": result.step,
                 "wall time (s)": round(seconds, 1)}),
        ("Best dev model", best),
        ("Teacher dev metrics", teacher_metrics or "no dev set"),
        ("Files", f"`best/` (HF {type(student).__name__} layout + tokenizer + bertkit_task.json; loads with "
                  f"`bertkit predict/evaluate` and transformers), `final/`, `metrics.jsonl`, `{RUN_CONFIG_FILE}`"
                  + qa_files),
        *qa_threshold_note(prepared),
    ]
    return write_report(output_dir, f"Task distillation run: {output_dir.name}", sections, plots)
