"""Loading the teacher: frozen, in eval mode; which teachers general distillation takes."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from bertkit.errors import BertkitError

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
                           f"(--task) takes {', '.join(task_teacher_types(MODEL_FAMILIES))} teachers fine-tuned on "
                           "the task")


def task_teacher_types(families) -> list[str]:
    """The model types task distillation takes (the registry's `distillable` families)."""
    return [name for name, family in families.items() if family.distillable]


def check_task_teacher(directory: str | Path) -> None:
    """Raises in one line naming `directory` when its model family cannot be task-distilled."""
    from bertkit.model.families import MODEL_FAMILIES, family_of

    family = family_of(directory)
    if not family.distillable:
        raise BertkitError(f"{directory}: task distillation takes teachers of model_type "
                           f"{', '.join(task_teacher_types(MODEL_FAMILIES))}, got {family.model_type!r}: the "
                           "student is the teacher with fewer layers, copied from its encoder stack (`encoder.layer.N`, "
                           "ModernBERT's `layers.N`), which bertkit builds for those families only")


def load_teacher(cls, directory: str | Path, **kwargs) -> nn.Module:
    """`cls.from_pretrained(directory)` in eval mode with gradients off."""
    teacher = cls.from_pretrained(directory, **kwargs)
    teacher.eval()
    teacher.requires_grad_(False)
    return teacher
