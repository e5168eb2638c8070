"""`T5Config` (HF field names) and the T5 / T5 v1.1 presets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.model.layers import ACTIVATIONS
from bertkit.pretrained_config import PretrainedConfig

GATED_ACTIVATION = {"gelu": "gelu_new"}  # transformers' "gated-gelu" is the tanh approximation


def _preset(d_model: int, d_ff: int, num_layers: int, num_heads: int, d_kv: int, v1_1: bool) -> dict[str, Any]:
    variant = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False) if v1_1 else {}
    return dict(d_model=d_model, d_ff=d_ff, num_layers=num_layers, num_heads=num_heads, d_kv=d_kv, **variant)


# small / base: the published google-t5/t5-small and t5-base shapes (v1.0); tiny / mini for
# pre-training from scratch here, in the v1.1 recipe (gated-GELU, untied head)
T5_PRESETS: dict[str, dict[str, Any]] = {
    "t5-tiny": _preset(128, 512, 2, 4, 32, v1_1=True),
    "t5-mini": _preset(256, 1024, 4, 4, 64, v1_1=True),
    "t5-small": _preset(512, 2048, 6, 8, 64, v1_1=False),
    "t5-base": _preset(768, 3072, 12, 12, 64, v1_1=False),
}


@dataclass
class T5Config(PretrainedConfig):
    """transformers' `T5Config` fields and defaults (t5-small sizes). `num_decoder_layers`
    None = num_layers; `scale_decoder_outputs` None = tie_word_embeddings."""

    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_decoder_layers: int | None = None
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    feed_forward_proj: str = "relu"
    tie_word_embeddings: bool = True
    scale_decoder_outputs: bool | None = None
    is_encoder_decoder: bool = True
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0
    classifier_dropout: float = 0.0
    model_type: str = "t5"

    # what transformers derives from feed_forward_proj (and writes): carried, recomputed here;
    # n_positions / output_past: fields of the published checkpoints' config.json, unused
    # transformers' attribute_map: the generic names of the sizes (bertkit.pretrained_config)
    attribute_map: ClassVar[dict[str, str]] = {
        "hidden_size": "d_model", "num_attention_heads": "num_heads", "num_hidden_layers": "num_layers",
    }
    carried_fields: ClassVar[frozenset[str]] = PretrainedConfig.carried_fields | {
        "dense_act_fn", "is_gated_act", "n_positions", "output_past"}
    presets: ClassVar[dict[str, dict[str, Any]]] = T5_PRESETS

    def __post_init__(self) -> None:
        if self.num_decoder_layers is None:
            self.num_decoder_layers = self.num_layers
        if self.scale_decoder_outputs is None:
            self.scale_decoder_outputs = bool(self.tie_word_embeddings)
        super().__post_init__()

    @property
    def is_gated_act(self) -> bool:
        return self.feed_forward_proj.startswith("gated-")

    @property
    def dense_act_fn(self) -> str:
        name = self.feed_forward_proj.removeprefix("gated-")
        return GATED_ACTIVATION.get(name, name) if self.is_gated_act else name

    def to_dict(self) -> dict[str, Any]:
        values = super().to_dict()
        values.update(dense_act_fn=self.dense_act_fn, is_gated_act=self.is_gated_act)  # as transformers writes them
        return values

    def validate(self) -> None:
        super().validate()
        for name in ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
                     "relative_attention_num_buckets", "relative_attention_max_distance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.relative_attention_num_buckets < 4:
            raise ConfigError(f"field 'relative_attention_num_buckets' must be at least 4, "
                              f"got {self.relative_attention_num_buckets}")
        for name in ("dropout_rate", "classifier_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {value!r}")
        for name in ("layer_norm_epsilon", "initializer_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive number, got {value!r}")
        parts = self.feed_forward_proj.split("-") if isinstance(self.feed_forward_proj, str) else []
        if not (len(parts) == 1 or (len(parts) == 2 and parts[0] == "gated")) or parts[-1] not in ACTIVATIONS:
            raise ConfigError(f"field 'feed_forward_proj' must be ACT or gated-ACT with ACT one of "
                              f"{', '.join(ACTIVATIONS)} (e.g. relu, gated-gelu), got {self.feed_forward_proj!r}")
        for name in ("tie_word_embeddings", "scale_decoder_outputs", "is_encoder_decoder"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"field {name!r} must be true or false, got {getattr(self, name)!r}")
        for name in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ConfigError(f"field {name!r} must be a token id in [0, {self.vocab_size}), got {value!r}")
