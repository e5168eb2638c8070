"""The two modes' configurations and how `bertkit distill` builds them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError
from bertkit.finetuning import FinetuneConfig
from bertkit.training.config import EVAL_SEED, TrainingConfig, apply_overrides, check_choice, parse_value

SOFT_LOSSES = ("kl", "ce")
CACHE_DIR = "teacher-cache"
GENERAL_PATH_FIELDS = ("data", "output_dir", "teacher", "cache_dir")  # stored absolute in run_config.json


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
