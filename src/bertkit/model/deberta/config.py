"""`DebertaV2Config`: transformers' DebertaV2Config field names and defaults, bertkit's presets and checks.

transformers reads some fields with `getattr` defaults rather than declaring them (position_buckets,
share_att_key, norm_rel_ebd, conv_kernel_size, conv_groups, conv_act, cls_dropout, pooler_hidden_size);
here they are fields with those defaults, so a published config.json round-trips.

Presets: `deberta-tiny` and `deberta-mini` (BERT's tiny and mini sizes, for a CPU) and the published
DeBERTa-v3 sizes `deberta-v3-xsmall`, `deberta-v3-small`, `deberta-v3-base`, all in the v3 layout:
relative attention with c2p and p2c terms, 256 log-buckets, a shared attention key, the relative
embeddings layer-normed, no absolute positions at the input and no token types, the unlegacy MLM head
(`lm_predictions.lm_head`, as microsoft's checkpoints hold it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.model.layers import ACTIVATIONS
from bertkit.model.sizes import PRESETS
from bertkit.pretrained_config import PretrainedConfig

POSITION_TERMS = ("c2p", "p2c")  # content-to-position, position-to-content
REL_EMBEDDING_NORMS = ("none", "layer_norm")
CONV_ACTIVATIONS = ("tanh", *ACTIVATIONS)

V3_LAYOUT: dict[str, Any] = dict(
    relative_attention=True, max_relative_positions=-1, position_buckets=256, share_att_key=True,
    norm_rel_ebd="layer_norm", pos_att_type=["p2c", "c2p"], position_biased_input=False, type_vocab_size=0,
    layer_norm_eps=1e-7, legacy=False,
)


def _sized(layers: int, hidden: int, heads: int) -> dict[str, Any]:
    return dict(V3_LAYOUT, num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                intermediate_size=4 * hidden)


@dataclass
class DebertaV2Config(PretrainedConfig):
    """Hyper-parameters of a DeBERTa-v2/v3 encoder (transformers' names; defaults are transformers',
    i.e. deberta-v2-xlarge's shape with relative attention off)."""

    vocab_size: int = 128100
    hidden_size: int = 1536
    num_hidden_layers: int = 24
    num_attention_heads: int = 24
    intermediate_size: int = 6144
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 0
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-7
    relative_attention: bool = False
    max_relative_positions: int = -1  # < 1: max_position_embeddings
    pad_token_id: int = 0
    position_biased_input: bool = True  # absolute position embeddings added to the input
    pos_att_type: list[str] | None = None  # the position terms: "c2p", "p2c" (or "p2c|c2p")
    pooler_dropout: float = 0.0
    pooler_hidden_act: str = "gelu"
    legacy: bool = True  # the MLM head: `cls.predictions` (legacy) or `lm_predictions.lm_head`
    position_buckets: int = -1  # > 0: relative distances log-bucketed into this many per side
    share_att_key: bool = False  # positions projected by query_proj / key_proj (else pos_*_proj)
    norm_rel_ebd: str = "none"  # "layer_norm": the relative embeddings through encoder.LayerNorm
    conv_kernel_size: int = 0  # > 0: v2's convolution beside the first layer (encoder.conv)
    conv_groups: int = 1
    conv_act: str = "tanh"
    cls_dropout: float | None = None  # the classifier's dropout; None: hidden_dropout_prob
    pooler_hidden_size: int | None = None  # transformers' default: hidden_size (no other value runs)
    enhanced_mask_decoder: bool = False  # bertkit's: the MLM head runs the paper's EMD (config.json: only when true)
    model_type: str = "deberta-v2"

    optional_fields: ClassVar[tuple[str, ...]] = PretrainedConfig.optional_fields + ("cls_dropout", "pooler_hidden_size")
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "deberta-tiny": _sized(*PRESETS["tiny"]),
        "deberta-mini": _sized(*PRESETS["mini"]),
        "deberta-v3-xsmall": _sized(12, 384, 6),
        "deberta-v3-small": _sized(6, 768, 12),
        "deberta-v3-base": _sized(12, 768, 12),
    }

    def __post_init__(self) -> None:
        if isinstance(self.pos_att_type, str):  # transformers' older spelling "p2c|c2p"
            self.pos_att_type = [x.strip() for x in self.pos_att_type.lower().split("|")]
        super().__post_init__()

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def position_terms(self) -> tuple[str, ...]:
        """The relative-position terms the attention adds (none without relative attention)."""
        return tuple(t for t in POSITION_TERMS if t in (self.pos_att_type or ())) if self.relative_attention else ()

    @property
    def relative_span(self) -> int:
        """k: relative distances (bucketed or not) are clamped into [-k, k); the table has 2k rows."""
        if self.position_buckets > 0:
            return self.position_buckets
        return self.max_relative_positions if self.max_relative_positions >= 1 else self.max_position_embeddings

    @property
    def classifier_dropout(self) -> float | None:
        """bertkit's name for the heads' dropout (transformers' `cls_dropout`)."""
        return self.cls_dropout

    @property
    def position_limit(self) -> int | None:
        return self.max_position_embeddings if self.position_biased_input or self.enhanced_mask_decoder else None

    def to_dict(self) -> dict[str, Any]:
        """config.json's fields; `enhanced_mask_decoder` only when true (transformers keeps an unknown
        field as an attribute and ignores it)."""
        values = super().to_dict()
        if not values.get("enhanced_mask_decoder"):
            values.pop("enhanced_mask_decoder", None)
        return values

    def validate(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"field 'hidden_size' ({self.hidden_size}) must be divisible by "
                              f"'num_attention_heads' ({self.num_attention_heads})")
        for name in ("type_vocab_size", "conv_kernel_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"field {name!r} must be a non-negative integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "pooler_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {value!r}")
        if self.cls_dropout is not None and not 0.0 <= self.cls_dropout < 1.0:
            raise ConfigError(f"field 'cls_dropout' must be in [0, 1) or null, got {self.cls_dropout!r}")
        for name in ("hidden_act", "pooler_hidden_act"):
            if getattr(self, name) not in ACTIVATIONS:
                raise ConfigError(f"field {name!r} must be one of {', '.join(ACTIVATIONS)}, got {getattr(self, name)!r}")
        if self.conv_act not in CONV_ACTIVATIONS:
            raise ConfigError(f"field 'conv_act' must be one of {', '.join(CONV_ACTIVATIONS)}, got {self.conv_act!r}")
        if not isinstance(self.conv_groups, int) or self.conv_groups < 1 or self.hidden_size % self.conv_groups:
            raise ConfigError(f"field 'conv_groups' must be a positive divisor of hidden_size, got {self.conv_groups!r}")
        unknown = [t for t in (self.pos_att_type or ()) if t not in POSITION_TERMS]
        if unknown:
            raise ConfigError(f"field 'pos_att_type' must list terms of {', '.join(POSITION_TERMS)}, got {unknown!r}")
        norms = [x.strip() for x in str(self.norm_rel_ebd).lower().split("|")]
        if any(x not in REL_EMBEDDING_NORMS for x in norms):
            raise ConfigError(f"field 'norm_rel_ebd' must be one of {', '.join(REL_EMBEDDING_NORMS)}, "
                              f"got {self.norm_rel_ebd!r}")
        if self.position_buckets > 0 and self.position_buckets < 4:
            raise ConfigError(f"field 'position_buckets' must be at least 4 (or <= 0: no buckets), "
                              f"got {self.position_buckets!r}")
        if not isinstance(self.enhanced_mask_decoder, bool):
            raise ConfigError(f"field 'enhanced_mask_decoder' must be true or false, got {self.enhanced_mask_decoder!r}")
        if self.pooler_hidden_size not in (None, self.hidden_size):
            raise ConfigError(f"field 'pooler_hidden_size' must equal hidden_size ({self.hidden_size}): the pooler "
                              f"reads the first token's state, got {self.pooler_hidden_size!r}")
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"field 'pad_token_id' must be an id in [0, vocab_size), got {self.pad_token_id!r}")
        super().validate()

    @property
    def layer_norm_rel_embeddings(self) -> bool:
        return "layer_norm" in str(self.norm_rel_ebd).lower()
