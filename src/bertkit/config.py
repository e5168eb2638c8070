"""`BertConfig`: Hugging Face `BertConfig` field names, named presets, JSON round-trip.

A config.json written by transformers loads here and the other way round. Fields that
transformers adds to every config (`transformers_version`, `architectures`, ...) are
kept verbatim in `extra` and written back; anything else unknown is an error naming the
field, with a suggestion when it looks like a typo.
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
    "chunk_size_feed_forward", "id2label", "label2id", "num_labels", "problem_type",
    "bos_token_id", "eos_token_id", "sep_token_id", "tokenizer_class", "finetuning_task",
    "task_specific_params", "directionality", "pooler_fc_size", "pooler_num_attention_heads",
    "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type", "is_encoder_decoder",
    "classifier_dropout",
}


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
    # HF generic fields (transformers_version, architectures, id2label...), kept as-is.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
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
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = dict(values.get("extra", {}))
        for key, value in values.items():
            if key == "extra":
                continue
            if key in known:
                kwargs[key] = value
            elif key in _HF_GENERIC_FIELDS or key.startswith("_"):
                extra[key] = value
            else:
                hint = difflib.get_close_matches(key, sorted(known), n=1)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise ConfigError(f"{source}: unknown field {key!r}{suggestion}")
        try:
            return cls(**kwargs, extra=extra)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        path = Path(path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BertkitError(f"{path}: no such file") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BertkitError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(values, dict):
            raise BertkitError(f"{path}: expected a JSON object")
        return cls.from_dict(values, source=str(path))

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
        return {**self.extra, **values}

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_text_atomic(directory / "config.json", self.to_json_string())

    # ---- derived ------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

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
        if self.model_type != "bert":
            raise ConfigError(f"field 'model_type' must be 'bert', got {self.model_type!r}")
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"field 'pad_token_id' must be an id in [0, vocab_size), got {self.pad_token_id!r}")
        if not isinstance(self.pre_layer_norm, bool):
            raise ConfigError(f"field 'pre_layer_norm' must be true or false, got {self.pre_layer_norm!r}")
