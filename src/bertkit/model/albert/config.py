"""`AlbertConfig` (HF field names): factorised embeddings and the layer-sharing modes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bertkit.errors import ConfigError
from bertkit.model.bert.config import BertConfig

SHARING_MODES = ("all", "none", "attention", "ffn")
PARTIAL_SHARING = ("attention", "ffn")  # not expressible by HF's groups: kept in config.json


@dataclass
class AlbertConfig(BertConfig):
    """HF `AlbertConfig` fields and defaults (ALBERT-xxlarge sizes, as transformers).

    `num_hidden_groups` None resolves from `share_layers` (all -> 1, else L); `share_layers`
    is stored only for the partial modes (attention / ffn), which HF's groups cannot express.
    """

    vocab_size: int = 30000
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    model_type: str = "albert"
    embedding_size: int = 128
    num_hidden_groups: int | None = None
    inner_group_num: int = 1
    classifier_dropout_prob: float = 0.1
    share_layers: str | None = None

    def __post_init__(self) -> None:
        mode = self.share_layers
        if mode is not None and mode not in SHARING_MODES:
            raise ConfigError(f"field 'share_layers' must be one of {', '.join(SHARING_MODES)}, got {mode!r}")
        if self.num_hidden_groups is None:
            self.num_hidden_groups = 1 if mode in (None, "all") else self.num_hidden_layers
        if mode is not None and isinstance(self.num_hidden_groups, int) and isinstance(self.num_hidden_layers, int):
            groups = 1 if mode == "all" else self.num_hidden_layers
            if self.num_hidden_groups != groups or self.inner_group_num != 1:
                raise ConfigError(
                    f"field 'share_layers' {mode!r} needs num_hidden_groups {groups} and inner_group_num 1, "
                    f"got {self.num_hidden_groups} and {self.inner_group_num}"
                )
            if mode not in PARTIAL_SHARING:
                self.share_layers = None  # all / none: num_hidden_groups says it, in HF's terms
        super().__post_init__()

    def to_dict(self) -> dict[str, Any]:
        values = super().to_dict()
        if self.share_layers is None:
            values.pop("share_layers")
        return values

    @property
    def sharing(self) -> str:
        """all / none / attention / ffn, or "groups" for another HF grouping."""
        if self.share_layers is not None:
            return self.share_layers
        if self.inner_group_num == 1 and self.num_hidden_groups == 1:
            return "all"
        if self.inner_group_num == 1 and self.num_hidden_groups == self.num_hidden_layers:
            return "none"
        return "groups"

    def validate(self) -> None:
        super().validate()
        for name in ("embedding_size", "num_hidden_groups", "inner_group_num"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(f"field 'num_hidden_groups' ({self.num_hidden_groups}) must not exceed "
                              f"num_hidden_layers ({self.num_hidden_layers})")
        value = self.classifier_dropout_prob
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ConfigError(f"field 'classifier_dropout_prob' must be in [0, 1), got {value!r}")
        if self.pre_layer_norm:
            raise ConfigError("field 'pre_layer_norm' is not supported by ALBERT (post-LN only)")
