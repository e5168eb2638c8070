"""`BertConfig`: the BERT encoder's fields (Hugging Face `BertConfig` names), presets, checks.

The config.json machinery (round-trip, HF generic fields carried in `extra`, field-named
errors with typo suggestions, the task-head fields `id2label` / `label2id` /
`problem_type` and `num_labels`) is every family's and lives in
bertkit.pretrained_config.PretrainedConfig; this class adds BERT's fields and checks, the
named sizes tiny..large, and reads pre-LN checkpoints saved in transformers'
roberta-prelayernorm layout (bertkit.interop.prelayernorm). RoBERTa's, ELECTRA's and
ALBERT's configs subclass it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.interop import prelayernorm
from bertkit.model.sizes import PRESETS
from bertkit.pretrained_config import PretrainedConfig
from bertkit.pretrained_config import read_json_object, write_config_json  # noqa: F401  (their old home)

HIDDEN_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
CLASSIFIER_POOLINGS = ("cls", "mean")

# Fields of old BERT checkpoints (Google's TF port, bert-base-chinese) that transformers keeps.
_BERT_LEGACY_FIELDS = frozenset({
    "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
    "pooler_size_per_head", "pooler_type",
})


@dataclass
class BertConfig(PretrainedConfig):
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
    classifier_dropout: float | None = None  # task heads; None: hidden_dropout_prob
    # bertkit extension (transformers' ModernBERT name and values): what a sequence classifier
    # reads, "cls" = [CLS] -> pooler (BERT's), "mean" = the mean of the last layer over real tokens
    classifier_pooling: str = "cls"

    carried_fields: ClassVar[frozenset[str]] = PretrainedConfig.carried_fields | _BERT_LEGACY_FIELDS
    optional_fields: ClassVar[tuple[str, ...]] = PretrainedConfig.optional_fields + ("classifier_dropout",)
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        name: dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden)
        for name, (layers, hidden, heads) in PRESETS.items()
    }

    @classmethod
    def normalize_dict(cls, values: dict[str, Any]) -> dict[str, Any]:
        if prelayernorm.is_hf_config(values):  # a pre-LN checkpoint in transformers' layout
            return prelayernorm.config_from_hf(values)
        return values

    def to_dict(self) -> dict[str, Any]:
        """config.json's fields (a model's `save_pretrained` writes a pre-LN config in
        transformers' roberta-prelayernorm layout, bertkit.interop.prelayernorm)."""
        values = super().to_dict()
        if not self.pre_layer_norm:
            values.pop("pre_layer_norm")  # keep plain BERT configs identical to HF's
        if self.classifier_pooling == "cls":
            values.pop("classifier_pooling")
        return values

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
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"field 'pad_token_id' must be an id in [0, vocab_size), got {self.pad_token_id!r}")
        if not isinstance(self.pre_layer_norm, bool):
            raise ConfigError(f"field 'pre_layer_norm' must be true or false, got {self.pre_layer_norm!r}")
        if self.pre_layer_norm and self.model_type == "bert" and self.hidden_act != "gelu":
            raise ConfigError(  # its MLM head is transformers' RoBERTa lm_head, which applies exact GELU
                f"field 'hidden_act' must be 'gelu' with pre_layer_norm (BERT saves pre-LN models in transformers' "
                f"roberta-prelayernorm layout, whose MLM head uses GELU), got {self.hidden_act!r}"
            )
        if self.classifier_pooling not in CLASSIFIER_POOLINGS:
            raise ConfigError(f"field 'classifier_pooling' must be one of {', '.join(CLASSIFIER_POOLINGS)}, "
                              f"got {self.classifier_pooling!r}")
        super().validate()  # model_type, the task-head fields
        value = self.classifier_dropout
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0.0 <= value < 1.0):
            raise ConfigError(f"field 'classifier_dropout' must be in [0, 1) or null, got {value!r}")
