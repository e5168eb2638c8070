"""`BertConfig`: Hugging Face `BertConfig` field names, named presets, JSON round-trip.

A config.json written by transformers loads here and the other way round. Fields that
transformers adds to every config (`transformers_version`, `architectures`, ...) are
kept verbatim in `extra` and written back; anything else unknown is an error naming the
field, with a suggestion when it looks like a typo.

Task heads read `id2label` / `label2id` / `problem_type` / `classifier_dropout`, which
are proper fields. As in transformers, `num_labels` is not stored: it is the size of
`id2label` (2 when there is none), and a `num_labels` key in a dict or override sets
`id2label` to LABEL_0..LABEL_{n-1}.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError, ConfigError
from bertkit.interop import prelayernorm

# (num_hidden_layers, hidden_size, num_attention_heads); intermediate_size = 4 * hidden.
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

HIDDEN_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")

# Generic fields transformers' PretrainedConfig writes; accepted and carried through.
_HF_GENERIC_FIELDS = {
    "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache",
    "gradient_checkpointing", "is_decoder", "add_cross_attention", "tie_word_embeddings",
    "output_hidden_states", "output_attentions", "return_dict", "pruned_heads",
    "chunk_size_feed_forward", "bos_token_id", "eos_token_id", "sep_token_id", "tokenizer_class",
    "finetuning_task", "task_specific_params", "directionality", "pooler_fc_size", "pooler_num_attention_heads",
    "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type", "is_encoder_decoder",
}

PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
DEFAULT_NUM_LABELS = 2  # transformers' default when a config has no id2label


@dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder (HF field names; defaults = BERT-base)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"
    model_type: str = "bert"
    # bertkit extension: LayerNorm before each sub-layer plus a final LayerNorm.
    pre_layer_norm: bool = False
    # Task heads (HF names). id2label None = no label map: num_labels is 2, names LABEL_i.
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None
    classifier_dropout: float | None = None  # None: hidden_dropout_prob
    # HF generic fields (transformers_version, architectures, ...), kept as-is.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

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
    def from_preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A named size from the BERT papers: tiny, mini, small, medium, base, large."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        values = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden)
        values.update(overrides)
        return cls.from_dict(values)

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> "BertConfig":
        """Build from a dict (e.g. parsed config.json); unknown fields raise ConfigError."""
        if prelayernorm.is_hf_config(values):  # a pre-LN checkpoint in transformers' layout
            values = prelayernorm.config_from_hf(values)
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
            elif key in _HF_GENERIC_FIELDS or key.startswith("_"):
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
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        return cls.from_dict(read_json_object(path), source=str(path))

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike) -> "BertConfig":
        directory = Path(directory)
        if not directory.is_dir():
            raise BertkitError(f"{directory}: no such model directory")
        return cls.from_json_file(directory / "config.json")

    # ---- serialisation ------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        if not self.pre_layer_norm:
            values.pop("pre_layer_norm")  # keep plain BERT configs identical to HF's
        for name in ("id2label", "label2id", "problem_type", "classifier_dropout"):
            if values[name] is None:
                values.pop(name)  # unset task fields: HF's defaults apply on both sides
        if self.id2label is not None:
            values["id2label"] = {str(i): name for i, name in sorted(self.id2label.items())}
        return {**self.extra, **values}

    def to_json_string(self) -> str:
        return config_json_text(self.to_dict())

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write config.json: bertkit's own fields (a model's `save_pretrained` writes a pre-LN
        config in transformers' roberta-prelayernorm layout, bertkit.interop.prelayernorm)."""
        write_config_json(directory, self.to_dict())

    # ---- derived ------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

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

    def with_labels(self, labels: list[str] | tuple[str, ...], problem_type: str | None = None) -> "BertConfig":
        """A copy whose label map is `labels` in id order (id2label and label2id)."""
        id2label = {i: str(name) for i, name in enumerate(labels)}
        if len(set(id2label.values())) != len(id2label):
            raise ConfigError(f"labels must be distinct, got {list(labels)!r}")
        return dataclasses.replace(
            self, extra=dict(self.extra), id2label=id2label, label2id={name: i for i, name in id2label.items()},
            problem_type=problem_type if problem_type is not None else self.problem_type,
        )

    def validate(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"field 'hidden_size' ({self.hidden_size}) must be divisible by "
                f"'num_attention_heads' ({self.num_attention_heads})"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive number, got {value!r}")
        if self.hidden_act not in HIDDEN_ACTS:
            raise ConfigError(f"field 'hidden_act' must be one of {', '.join(HIDDEN_ACTS)}, got {self.hidden_act!r}")
        if self.position_embedding_type != "absolute":
            raise ConfigError(
                f"field 'position_embedding_type' must be 'absolute' (BERT's learned positions), "
                f"got {self.position_embedding_type!r}"
            )
        expected = type(self).__dataclass_fields__["model_type"].default  # a subclass (RoBERTa, ALBERT...) sets its own
        if self.model_type != expected:
            raise ConfigError(f"field 'model_type' must be {expected!r}, got {self.model_type!r}")
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"field 'pad_token_id' must be an id in [0, vocab_size), got {self.pad_token_id!r}")
        if not isinstance(self.pre_layer_norm, bool):
            raise ConfigError(f"field 'pre_layer_norm' must be true or false, got {self.pre_layer_norm!r}")
        if self.pre_layer_norm and self.model_type == "bert" and self.hidden_act != "gelu":
            raise ConfigError(  # its MLM head is transformers' RoBERTa lm_head, which applies exact GELU
                f"field 'hidden_act' must be 'gelu' with pre_layer_norm (BERT saves pre-LN models in transformers' "
                f"roberta-prelayernorm layout, whose MLM head uses GELU), got {self.hidden_act!r}"
            )
        self._validate_task_fields()

    def _validate_task_fields(self) -> None:
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
        value = self.classifier_dropout
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0.0 <= value < 1.0):
            raise ConfigError(f"field 'classifier_dropout' must be in [0, 1) or null, got {value!r}")


def config_json_text(values: dict[str, Any]) -> str:
    return json.dumps(values, indent=2, sort_keys=True) + "\n"


def write_config_json(directory: str | os.PathLike, values: dict[str, Any]) -> None:
    """`values` as `directory`/config.json (atomically), creating the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_text_atomic(directory / "config.json", config_json_text(values))


def read_json_object(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON file holding one object (config.json); errors are one line naming the file."""
    path = Path(path)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BertkitError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BertkitError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(values, dict):
        raise BertkitError(f"{path}: expected a JSON object")
    return values


def default_id2label(num_labels: int) -> dict[int, str]:
    """transformers' placeholder label names: {0: "LABEL_0", ...}."""
    return {i: f"LABEL_{i}" for i in range(num_labels)}
