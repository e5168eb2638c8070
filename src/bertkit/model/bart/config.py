"""`BartConfig` (transformers' field names and defaults) and the BART presets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.model.layers import ACTIVATIONS
from bertkit.pretrained_config import PretrainedConfig, default_id2label

DEFAULT_BART_LABELS = 3


def _preset(d_model: int, ffn: int, layers: int, heads: int, **more: Any) -> dict[str, Any]:
    return dict(d_model=d_model, encoder_layers=layers, decoder_layers=layers, encoder_ffn_dim=ffn,
                decoder_ffn_dim=ffn, encoder_attention_heads=heads, decoder_attention_heads=heads, **more)


# tiny / mini for pre-training from scratch here; base: facebook/bart-base's shape (6+6 x 768,
# 12 heads); kobart-base: gogamza/kobart-base-v2's (6+6 x 768, 16 heads, 30,000 pieces)
BART_PRESETS: dict[str, dict[str, Any]] = {
    "bart-tiny": _preset(128, 512, 2, 2, max_position_embeddings=512),
    "bart-mini": _preset(256, 1024, 4, 4, max_position_embeddings=512),
    "bart-base": _preset(768, 3072, 6, 12, max_position_embeddings=1024, attention_dropout=0.1,
                         activation_dropout=0.1),
    "kobart-base": _preset(768, 3072, 6, 16, vocab_size=30000, max_position_embeddings=1026),
}

# config.json fields of published BART / KoBART checkpoints that configure nothing here (old
# transformers' generation defaults and fairseq-port switches): carried through, unused.
# `normalize_before` / `add_final_layer_norm` (mBART's pre-LN) are checked: they must be false.
_CARRIED = frozenset({
    "num_beams", "no_repeat_ngram_size", "early_stopping", "length_penalty", "max_length", "min_length",
    "classif_dropout", "add_bias_logits", "normalize_embedding", "static_position_embeddings",
    "extra_pos_embeddings", "num_hidden_layers", "force_bos_token_to_be_generated", "do_blenderbot_90_layernorm",
    "output_past", "author", "kobart_version", "doc_type", "gradient_checkpointing", "prefix", "do_sample",
    "temperature", "top_k", "top_p", "bad_words_ids", "repetition_penalty",
    "normalize_before", "add_final_layer_norm",
})


@dataclass
class BartConfig(PretrainedConfig):
    """transformers' `BartConfig` fields and defaults (facebook/bart-large sizes).

    Token ids: `decoder_start_token_id` is EOS (BART's decoder starts from `</s>`), and
    `forced_bos_token_id` / `forced_eos_token_id`, when set, make `generate` write BOS as
    the first new token and EOS as the last one the length allows (transformers' rules)."""

    vocab_size: int = 50265
    max_position_embeddings: int = 1024
    encoder_layers: int = 12
    encoder_ffn_dim: int = 4096
    encoder_attention_heads: int = 16
    decoder_layers: int = 12
    decoder_ffn_dim: int = 4096
    decoder_attention_heads: int = 16
    encoder_layerdrop: float = 0.0
    decoder_layerdrop: float = 0.0
    activation_function: str = "gelu"
    d_model: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    init_std: float = 0.02
    classifier_dropout: float = 0.0
    scale_embedding: bool = False
    tie_word_embeddings: bool = True
    is_encoder_decoder: bool = True
    pad_token_id: int = 1
    bos_token_id: int | None = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    forced_bos_token_id: int | None = None
    forced_eos_token_id: int | None = 2
    model_type: str = "bart"

    # transformers' attribute_map: the generic names of the sizes (bertkit.pretrained_config)
    attribute_map: ClassVar[dict[str, str]] = {
        "hidden_size": "d_model", "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }
    carried_fields: ClassVar[frozenset[str]] = PretrainedConfig.carried_fields | _CARRIED
    optional_fields: ClassVar[tuple[str, ...]] = PretrainedConfig.optional_fields + ("forced_bos_token_id",)
    presets: ClassVar[dict[str, dict[str, Any]]] = BART_PRESETS

    def __post_init__(self) -> None:
        if self.id2label is None:  # transformers' BartConfig: three labels unless told (MNLI's heads)
            self.id2label = default_id2label(DEFAULT_BART_LABELS)
        super().__post_init__()

    def validate(self) -> None:
        super().validate()
        for name in ("vocab_size", "max_position_embeddings", "encoder_layers", "encoder_ffn_dim",
                     "encoder_attention_heads", "decoder_layers", "decoder_ffn_dim", "decoder_attention_heads",
                     "d_model"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        for name in ("encoder_attention_heads", "decoder_attention_heads"):
            if self.d_model % getattr(self, name):
                raise ConfigError(f"field 'd_model' ({self.d_model}) must be a multiple of {name} "
                                  f"({getattr(self, name)})")
        for name in ("dropout", "attention_dropout", "activation_dropout", "classifier_dropout",
                     "encoder_layerdrop", "decoder_layerdrop"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {value!r}")
        if isinstance(self.init_std, bool) or not isinstance(self.init_std, (int, float)) or self.init_std <= 0:
            raise ConfigError(f"field 'init_std' must be a positive number, got {self.init_std!r}")
        if self.activation_function not in ACTIVATIONS:
            raise ConfigError(f"field 'activation_function' must be one of {', '.join(ACTIVATIONS)}, "
                              f"got {self.activation_function!r}")
        for name in ("scale_embedding", "tie_word_embeddings", "is_encoder_decoder"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"field {name!r} must be true or false, got {getattr(self, name)!r}")
        for name in ("pad_token_id", "eos_token_id", "decoder_start_token_id", "bos_token_id", "forced_bos_token_id",
                     "forced_eos_token_id"):
            value = getattr(self, name)
            if value is None and name in ("bos_token_id", "forced_bos_token_id", "forced_eos_token_id"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ConfigError(f"field {name!r} must be a token id in [0, {self.vocab_size}), got {value!r}")
        for name in ("normalize_before", "add_final_layer_norm"):
            if self.extra.get(name):
                raise ConfigError(f"field {name!r} is true: a pre-LN (mBART-style) model, not BART's post-LN "
                                  "layers; bertkit's BART does not run it")
