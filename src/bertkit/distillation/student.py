"""The student: its config (the teacher's, shallower or narrower), which teacher layer
each student layer starts from, the layer maps of the intermediate losses, and the
weight copy from the teacher."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from torch import nn

from bertkit.errors import ConfigError


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
    if values.get("layer_types") is not None and "layer_types" not in overrides:  # ModernBERT's, one per layer:
        values["layer_types"] = [values["layer_types"][i] for i in student_layer_sources(teacher_depth, layers)]
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


# a layer of the stack: BERT-shaped `encoder.layer.N.`, ModernBERT's `layers.N.`
_LAYER_KEY = re.compile(r"(^|\.)(encoder\.layer|layers)\.(\d+)\.")


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
            source = f"{key[:match.start()]}{match[1]}{match[2]}.{sources[int(match[3])]}.{key[match.end():]}"
        if source in teacher_state and tuple(teacher_state[source].shape) == tuple(value.shape):
            loaded[key] = teacher_state[source]
            if source in untrained:
                fresh.append(key)
        else:
            fresh.append(key)
    student.load_state_dict(loaded, strict=False)
    return sorted(fresh)


def describe_student(teacher_config, student_config_, teacher_dir: str, fresh: list[str]) -> dict[str, Any]:
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
