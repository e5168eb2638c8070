"""`PretrainedConfig`: what every model family's config shares, none of it BERT's.

A family's config is a dataclass subclass that adds its own fields (Hugging Face names)
and checks (`validate`, calling this one's) and sets `model_type`'s default to its
registry key. This base gives it:
- config.json both ways: `from_dict` / `from_json_file` / `from_pretrained` and `to_dict` /
  `save_pretrained`; fields transformers adds to every config (`transformers_version`,
  `architectures`, ...: `carried_fields`) are kept verbatim in `extra` and written back;
  any other unknown field is an error naming it, with a suggestion for a likely typo;
- the task-head fields transformers keeps on every config: `id2label` / `label2id` /
  `problem_type`. As in transformers, `num_labels` is not stored: it is the size of
  `id2label` (2 when there is none), and a `num_labels` key in a dict or override sets
  `id2label` to LABEL_0..LABEL_{n-1};
- named sizes: `from_preset(name)` over the class's `presets` (none here);
- a hook for another layout of the same model (`normalize_dict`: BERT reads pre-LN
  checkpoints saved in transformers' roberta-prelayernorm layout).
Errors are `ConfigError`s naming the field (and the file, when one was read).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.interop.config_json import config_json_text, read_json_object, write_config_json  # noqa: F401  (their old home)
from bertkit.interop.hub_cache import resolve_model_dir

# Generic fields transformers' PretrainedConfig writes; accepted and carried through in `extra`.
HF_GENERIC_FIELDS = frozenset({
    "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache",
    "gradient_checkpointing", "is_decoder", "add_cross_attention", "tie_word_embeddings",
    "output_hidden_states", "output_attentions", "return_dict", "pruned_heads",
    "chunk_size_feed_forward", "bos_token_id", "eos_token_id", "sep_token_id", "tokenizer_class",
    "finetuning_task", "task_specific_params", "is_encoder_decoder",
})

PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
DEFAULT_NUM_LABELS = 2  # transformers' default when a config has no id2label


@dataclass
class PretrainedConfig:
    """The fields and config.json machinery of every family's config (HF semantics)."""

    model_type: str = ""  # a family's config sets its registry key as the default
    # Task heads (HF names). id2label None = no label map: num_labels is 2, names LABEL_i.
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None
    # HF generic fields (transformers_version, architectures, ...), kept as-is.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    # config.json fields outside the dataclass that are carried in `extra` (not errors)
    carried_fields: ClassVar[frozenset[str]] = HF_GENERIC_FIELDS
    # fields left out of config.json when None (transformers' defaults apply on both sides)
    optional_fields: ClassVar[tuple[str, ...]] = ("id2label", "label2id", "problem_type")
    # named sizes: preset name -> field values (`from_preset`)
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    # transformers' attribute_map: a generic name -> the family's own field (GPT-2's hidden_size is
    # n_embd), read and set through the field; never a config.json key of its own
    attribute_map: ClassVar[dict[str, str]] = {}

    def __getattr__(self, name: str) -> Any:  # only names that are not attributes reach here
        mapped = type(self).attribute_map.get(name)
        if mapped is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self, mapped)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(type(self).attribute_map.get(name, name), value)

    def __post_init__(self) -> None:
        if isinstance(self.id2label, dict):  # JSON keys are strings
            try:
                self.id2label = {int(k): v for k, v in self.id2label.items()}
            except (TypeError, ValueError):
                raise ConfigError(f"field 'id2label' must map integer ids to names, got {self.id2label!r}") from None
            if self.label2id is None:
                self.label2id = {name: i for i, name in self.id2label.items()}
        self.validate()

    # ---- construction -------------------------------------------------------------
    @classmethod
    def from_preset(cls, name: str, **overrides: Any):
        """A named size (`presets`), with `overrides` on top."""
        if name not in cls.presets:
            choices = f"choose one of {', '.join(cls.presets)}" if cls.presets else f"{cls.__name__} has no presets"
            raise ConfigError(f"unknown preset {name!r}; {choices}")
        return cls.from_dict({**cls.presets[name], **overrides})

    @classmethod
    def normalize_dict(cls, values: dict[str, Any]) -> dict[str, Any]:
        """config.json values in another layout of this family's model, as this class's fields
        (the identity here)."""
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config"):
        """Build from a dict (e.g. parsed config.json); unknown fields raise ConfigError."""
        values = cls.normalize_dict(values)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = dict(values.get("extra", {}))
        for key, value in values.items():
            if key == "extra":
                continue
            if key == "num_labels":  # applied below: not a stored field
                continue
            if key in known:
                kwargs[key] = value
            elif key in cls.carried_fields or key.startswith("_"):
                extra[key] = value
            else:
                hint = difflib.get_close_matches(key, sorted(known), n=1)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise ConfigError(f"{source}: unknown field {key!r}{suggestion}")
        num_labels = values.get("num_labels")
        if num_labels is not None and kwargs.get("id2label") is None:  # as transformers: id2label wins
            if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
                raise ConfigError(f"{source}: field 'num_labels' must be a positive integer, got {num_labels!r}")
            kwargs["id2label"], kwargs["label2id"] = default_id2label(num_labels), None
        try:
            return cls(**kwargs, extra=extra)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike):
        return cls.from_dict(read_json_object(path), source=str(path))

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike):
        return cls.from_json_file(resolve_model_dir(directory) / "config.json")

    # ---- serialisation ------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for name in self.optional_fields:
            if values[name] is None:
                values.pop(name)
        if self.id2label is not None:
            values["id2label"] = {str(i): name for i, name in sorted(self.id2label.items())}
        return {**self.extra, **values}

    def to_json_string(self) -> str:
        return config_json_text(self.to_dict())

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write config.json (the config's own fields; a model's `save_pretrained` may write
        its family's checkpoint layout instead)."""
        write_config_json(directory, self.to_dict())

    # ---- labels -------------------------------------------------------------------
    @property
    def num_labels(self) -> int:
        """Outputs of a classification head: len(id2label), 2 without a label map (as HF)."""
        return len(self.id2label) if self.id2label is not None else DEFAULT_NUM_LABELS

    @num_labels.setter
    def num_labels(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"field 'num_labels' must be a positive integer, got {value!r}")
        if value != self.num_labels or self.id2label is None:
            self.id2label = default_id2label(value)
            self.label2id = {name: i for i, name in self.id2label.items()}

    @property
    def has_label_names(self) -> bool:
        """True when id2label names real labels (not transformers' LABEL_0.. placeholders)."""
        return self.id2label is not None and self.id2label != default_id2label(len(self.id2label))

    def with_labels(self, labels: list[str] | tuple[str, ...], problem_type: str | None = None):
        """A copy whose label map is `labels` in id order (id2label and label2id)."""
        id2label = {i: str(name) for i, name in enumerate(labels)}
        if len(set(id2label.values())) != len(id2label):
            raise ConfigError(f"labels must be distinct, got {list(labels)!r}")
        return dataclasses.replace(
            self, extra=dict(self.extra), id2label=id2label, label2id={name: i for i, name in id2label.items()},
            problem_type=problem_type if problem_type is not None else self.problem_type,
        )

    # ---- sizes --------------------------------------------------------------------
    @property
    def position_limit(self) -> int | None:
        """Positions the model can encode (its position table's `max_position_embeddings`),
        None when it has no limit (relative encodings: XLNet)."""
        return getattr(self, "max_position_embeddings", None)

    def describe_size(self) -> str:
        """The model's shape in a few words, for reports ("2 layers, hidden 128, 2 heads" for the
        Transformer families; a family of another shape says its own)."""
        return f"{self.num_hidden_layers} layers, hidden {self.hidden_size}, {self.num_attention_heads} heads"

    # ---- checks -------------------------------------------------------------------
    def validate(self) -> None:
        """The shared checks; a family's `validate` runs its own, then calls this."""
        self.validate_model_type()
        self.validate_task_fields()

    def validate_model_type(self) -> None:
        expected = type(self).__dataclass_fields__["model_type"].default  # each family's class sets its own
        if self.model_type != expected:
            raise ConfigError(f"field 'model_type' must be {expected!r}, got {self.model_type!r}")

    def validate_task_fields(self) -> None:
        if self.id2label is not None:
            if not isinstance(self.id2label, dict):
                raise ConfigError(f"field 'id2label' must map integer ids to names, got {self.id2label!r}")
            if not self.id2label or sorted(self.id2label) != list(range(len(self.id2label))):
                raise ConfigError(f"field 'id2label' must have ids 0..n-1, got {sorted(self.id2label)!r}")
            if not all(isinstance(name, str) for name in self.id2label.values()):
                raise ConfigError("field 'id2label' must map ids to label names (strings)")
        if self.label2id is not None and (
            not isinstance(self.label2id, dict) or not all(isinstance(i, int) for i in self.label2id.values())
        ):
            raise ConfigError(f"field 'label2id' must map label names to integer ids, got {self.label2id!r}")
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise ConfigError(
                f"field 'problem_type' must be one of {', '.join(PROBLEM_TYPES)}, got {self.problem_type!r}"
            )
        if self.problem_type == "single_label_classification" and self.num_labels == 1:
            raise ConfigError("field 'problem_type' single_label_classification needs num_labels > 1 (1 = regression)")


def default_id2label(num_labels: int) -> dict[int, str]:
    """transformers' placeholder label names: {0: "LABEL_0", ...}."""
    return {i: f"LABEL_{i}" for i in range(num_labels)}
