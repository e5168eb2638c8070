"""`ModernBertConfig`: transformers' field names and defaults, and the presets.

transformers 4.x wrote the attention pattern and RoPE as `global_attn_every_n_layers`,
`global_rope_theta` and `local_rope_theta` (the published answerdotai checkpoints' config.json);
transformers 5 writes `layer_types` (one "full_attention" / "sliding_attention" per layer) and
`rope_parameters` ({"full_attention": {"rope_theta": ...}, "sliding_attention": {...}}). Both load:
`rope_parameters` becomes the two theta fields (only RoPE type "default" is supported),
`layer_types` is kept as given; written back, the thetas and the every-n pattern are what
config.json holds (both transformers versions read them), plus `layer_types` when it was given.
A local ("sliding") layer attends within `local_attention` // 2 positions on either side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.pretrained_config import HF_GENERIC_FIELDS, PretrainedConfig

LAYER_TYPES = ("full_attention", "sliding_attention")
CLASSIFIER_POOLINGS = ("cls", "mean")
# transformers' ACT2FN names the blocks and heads may use
ACTIVATION_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")


def _size(hidden_size: int, num_hidden_layers: int, num_attention_heads: int, intermediate_size: int,
          **more: Any) -> dict[str, Any]:
    return dict(hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
                num_attention_heads=num_attention_heads, intermediate_size=intermediate_size, **more)


# modernbert-base / -large: the published shapes (answerdotai/ModernBERT-base 22 x 768, GeGLU width 1152;
# -large 28 x 1024, 2624; 8192 positions); tiny / mini: pre-training from scratch on a CPU (the vocabulary
# comes from the tokenizer), ModernBERT's GeGLU width of 1.5 x hidden and global attention every third layer
MODERNBERT_PRESETS: dict[str, dict[str, Any]] = {
    "modernbert-tiny": _size(128, 3, 2, 192, local_attention=64, max_position_embeddings=512),
    "modernbert-mini": _size(256, 6, 4, 384, local_attention=64, max_position_embeddings=512),
    "modernbert-base": _size(768, 22, 12, 1152),
    "modernbert-large": _size(1024, 28, 16, 2624),
}


@dataclass
class ModernBertConfig(PretrainedConfig):
    """transformers' `ModernBertConfig` (model_type "modernbert"): fields and defaults of ModernBERT-base."""

    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int | None = 50283
    eos_token_id: int | None = 50282
    bos_token_id: int | None = 50281
    cls_token_id: int | None = 50281
    sep_token_id: int | None = 50282
    global_rope_theta: float = 160000.0
    attention_bias: bool = False
    attention_dropout: float = 0.0
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    local_rope_theta: float = 10000.0
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_pooling: str = "cls"
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    deterministic_flash_attn: bool = False
    sparse_prediction: bool = False
    sparse_pred_ignore_index: int = -100
    reference_compile: bool | None = None  # transformers 4's torch.compile switch (read, not used)
    layer_types: list[str] | None = None  # None: global every `global_attn_every_n_layers`, from layer 0
    model_type: str = "modernbert"

    # what the published config.json files also hold (GPU kernels' switches, a BERT leftover), carried through
    carried_fields: ClassVar[frozenset[str]] = HF_GENERIC_FIELDS | {
        "repad_logits_with_grad", "layer_norm_eps", "position_embedding_type"}
    optional_fields: ClassVar[tuple[str, ...]] = PretrainedConfig.optional_fields + ("reference_compile", "layer_types")
    presets: ClassVar[dict[str, dict[str, Any]]] = MODERNBERT_PRESETS

    @classmethod
    def normalize_dict(cls, values: dict[str, Any]) -> dict[str, Any]:
        """transformers 5's `rope_parameters` as the two theta fields (its `rope_scaling` is refused)."""
        if "rope_parameters" not in values and "rope_scaling" not in values:
            return values
        values = dict(values)
        if values.pop("rope_scaling", None) is not None:
            raise ConfigError("field 'rope_scaling': scaled RoPE is not supported by bertkit's ModernBERT")
        rope = values.pop("rope_parameters", None) or {}
        for layer_type, field in (("full_attention", "global_rope_theta"), ("sliding_attention", "local_rope_theta")):
            params = rope.get(layer_type) or {}
            if params.get("rope_type", "default") != "default":
                raise ConfigError(f"field 'rope_parameters': rope_type {params['rope_type']!r} is not supported "
                                  f"(only 'default')")
            if "rope_theta" in params:
                values[field] = params["rope_theta"]
        return values

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def sliding_window(self) -> int:
        """How far a local layer's query sees on either side: `local_attention` // 2 (transformers' name)."""
        return self.local_attention // 2

    @property
    def attention_types(self) -> list[str]:
        """Each layer's attention: `layer_types`, else "full_attention" at layers 0, n, 2n, ... (n =
        `global_attn_every_n_layers`) and "sliding_attention" between."""
        if self.layer_types is not None:
            return list(self.layer_types)
        every = self.global_attn_every_n_layers
        return ["sliding_attention" if i % every else "full_attention" for i in range(self.num_hidden_layers)]

    def validate(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings", "global_attn_every_n_layers", "local_attention"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"field 'hidden_size' ({self.hidden_size}) must be a multiple of "
                              f"num_attention_heads ({self.num_attention_heads})")
        if self.head_dim % 2:
            raise ConfigError(f"field 'hidden_size': RoPE needs an even head size, got {self.head_dim}")
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in ACTIVATION_NAMES:
                raise ConfigError(f"field {name!r} must be one of {', '.join(ACTIVATION_NAMES)}, "
                                  f"got {getattr(self, name)!r}")
        if self.classifier_pooling not in CLASSIFIER_POOLINGS:
            raise ConfigError(f"field 'classifier_pooling' must be one of {', '.join(CLASSIFIER_POOLINGS)}, "
                              f"got {self.classifier_pooling!r}")
        for name in ("attention_dropout", "embedding_dropout", "mlp_dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {getattr(self, name)!r}")
        if self.layer_types is not None:
            if len(self.layer_types) != self.num_hidden_layers or not set(self.layer_types) <= set(LAYER_TYPES):
                raise ConfigError(f"field 'layer_types' must name {self.num_hidden_layers} layers, each one of "
                                  f"{', '.join(LAYER_TYPES)}, got {self.layer_types!r}")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"field 'pad_token_id' must be in [0, vocab_size={self.vocab_size}), "
                              f"got {self.pad_token_id}")
        super().validate()
