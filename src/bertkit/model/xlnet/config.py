"""`XLNetConfig`: transformers' XLNetConfig fields and defaults (XLNet-large sizes), plus
bertkit's named sizes.

Fields keep HF's names (`d_model`, `n_layer`, `n_head`, `d_inner`, ...); HF's aliases
`hidden_size`, `num_hidden_layers` and `num_attention_heads` are read-only properties, so
code written against BERT's configs reads an XLNet config unchanged. `untie_r` is kept
for old config.json files (the original code shared the r_*_bias tensors across layers
when False); as in transformers, every layer has its own biases either way. XLNet has no
position table (relative encodings): `max_position_embeddings` is not a field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.model.sizes import PRESETS
from bertkit.errors import ConfigError
from bertkit.pretrained_config import PretrainedConfig

ATTENTION_TYPES = ("bi", "uni")
SUMMARY_TYPES = ("last", "first", "mean")
FF_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


@dataclass
class XLNetConfig(PretrainedConfig):
    vocab_size: int = 32000
    d_model: int = 1024
    n_layer: int = 24
    n_head: int = 16
    d_inner: int = 4096
    d_head: int | None = None  # None: d_model // n_head
    ff_activation: str = "gelu"
    untie_r: bool = True
    attn_type: str = "bi"
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    mem_len: int | None = 512
    reuse_len: int | None = None
    use_mems_eval: bool = True
    use_mems_train: bool = False
    bi_data: bool = False
    clamp_len: int = -1
    same_length: bool = False
    summary_type: str = "last"
    summary_use_proj: bool = True
    summary_activation: str | None = "tanh"
    summary_last_dropout: float = 0.1
    start_n_top: int = 5
    end_n_top: int = 5
    pad_token_id: int | None = 5
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    model_type: str = "xlnet"

    # transformers' attribute_map: the generic names of the sizes (bertkit.pretrained_config)
    attribute_map: ClassVar[dict[str, str]] = {
        "hidden_size": "d_model", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
        "intermediate_size": "d_inner",
    }
    carried_fields: ClassVar[frozenset[str]] = PretrainedConfig.carried_fields | {"n_token"}
    # bertkit's sizes (bertkit.model.sizes.PRESETS: tiny .. large); base = xlnet-base-cased's shape
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        name: dict(n_layer=layers, d_model=hidden, n_head=heads, d_inner=4 * hidden)
        for name, (layers, hidden, heads) in PRESETS.items()
    }

    def __post_init__(self) -> None:
        if "n_token" in self.extra:  # HF's old name of vocab_size
            self.vocab_size = self.extra.pop("n_token")
        if self.d_head is None and isinstance(self.d_model, int) and isinstance(self.n_head, int) and self.n_head > 0:
            self.d_head = self.d_model // self.n_head
        super().__post_init__()

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "XLNetConfig":
        """A named size; d_head follows the preset's width unless given."""
        return super().from_preset(name, **{"d_head": None, **overrides})

    def validate(self) -> None:
        for name in ("vocab_size", "d_model", "n_layer", "n_head", "d_inner", "d_head"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ConfigError(f"field 'd_model' ({self.d_model}) must be divisible by 'n_head' ({self.n_head})")
        if self.d_head != self.d_model // self.n_head:
            raise ConfigError(f"field 'd_head' ({self.d_head}) must be d_model // n_head "
                              f"({self.d_model // self.n_head})")
        choices = {"attn_type": ATTENTION_TYPES, "summary_type": SUMMARY_TYPES, "ff_activation": FF_ACTIVATIONS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"field {name!r} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.summary_activation not in (None, "tanh", *FF_ACTIVATIONS):
            raise ConfigError(f"field 'summary_activation' must be tanh, one of {', '.join(FF_ACTIVATIONS)} or null, "
                              f"got {self.summary_activation!r}")
        for name in ("dropout", "summary_last_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {value!r}")
        for name in ("mem_len", "reuse_len"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ConfigError(f"field {name!r} must be a non-negative integer or null, got {value!r}")
        if not isinstance(self.clamp_len, int) or isinstance(self.clamp_len, bool):
            raise ConfigError(f"field 'clamp_len' must be an integer (-1: no clamping), got {self.clamp_len!r}")
        if self.layer_norm_eps <= 0:
            raise ConfigError(f"field 'layer_norm_eps' must be positive, got {self.layer_norm_eps!r}")
        super().validate()
