"""`GPT2Config` and `OpenAIGPTConfig` (transformers' field names and defaults) and the presets.

Both configs share transformers' field names (`n_embd`, `n_layer`, `n_head`, `n_positions`,
`resid_pdrop`, `embd_pdrop`, `attn_pdrop`, `layer_norm_epsilon`, `initializer_range`, the
`summary_*` fields of the double-heads model), and differ where the two models do:
- GPT-2 (`model_type` "gpt2"): pre-LN blocks and a final `ln_f`, `activation_function`
  (gelu_new), `n_inner` (None = 4 * n_embd), BOS = EOS = 50256;
- GPT-1 (`model_type` "openai-gpt"): post-LN blocks, no final LayerNorm, `afn` ("gelu" in
  transformers' OpenAI GPT *is* the tanh approximation, gelu_new), no special token ids.
`pre_layer_norm`, `final_layer_norm` and `activation` are what the shared blocks read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch.nn.functional as F

from bertkit.errors import ConfigError
from bertkit.pretrained_config import PretrainedConfig

# the activation functions by transformers' names, as each family reads them
GPT2_ACTIVATIONS = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,  # exact, in GPT-2's ACT2FN
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}
OPENAI_GPT_ACTIVATIONS = {  # transformers' modeling_openai ACT_FNS: its "gelu" is gelu_new
    "gelu": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def _size(n_embd: int, n_layer: int, n_head: int, n_positions: int, **more: Any) -> dict[str, Any]:
    return dict(n_embd=n_embd, n_layer=n_layer, n_head=n_head, n_positions=n_positions, **more)


# gpt2 / gpt1: the published shapes (openai-community/gpt2 124M; the GPT-1 paper's 12 x 768,
# 512 positions, 40,478 BPE pieces); tiny / mini: pre-training from scratch here (the vocabulary
# comes from the tokenizer)
GPT2_PRESETS: dict[str, dict[str, Any]] = {
    "gpt-tiny": _size(128, 2, 2, 256),
    "gpt-mini": _size(256, 4, 4, 512),
    "gpt2": _size(768, 12, 12, 1024, vocab_size=50257),
}
OPENAI_GPT_PRESETS: dict[str, dict[str, Any]] = {
    "gpt1-mini": _size(256, 4, 4, 512),
    "gpt1": _size(768, 12, 12, 512, vocab_size=40478),
}


@dataclass
class _GPTConfig(PretrainedConfig):
    """The fields GPT-1 and GPT-2 share (transformers' names and defaults)."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    summary_type: str = "cls_index"
    summary_use_proj: bool = True
    summary_activation: str | None = None
    summary_proj_to_labels: bool = True
    summary_first_dropout: float = 0.1
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    tie_word_embeddings: bool = True

    # transformers' attribute_map: the generic names of the sizes (bertkit.pretrained_config)
    attribute_map: ClassVar[dict[str, str]] = {
        "hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
    }
    # n_ctx: the published checkpoints' old name of n_positions; predict_special_tokens: GPT-1's
    carried_fields: ClassVar[frozenset[str]] = PretrainedConfig.carried_fields | {
        "n_ctx", "predict_special_tokens", "summary_last_dropout"}
    optional_fields: ClassVar[tuple[str, ...]] = PretrainedConfig.optional_fields
    activations: ClassVar[dict[str, Any]] = GPT2_ACTIVATIONS
    pre_layer_norm: ClassVar[bool] = True
    final_layer_norm: ClassVar[bool] = True

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def intermediate_size(self) -> int:
        return 4 * self.n_embd

    @property
    def is_encoder_decoder(self) -> bool:
        return False

    @property
    def activation_name(self) -> str:
        raise NotImplementedError

    @property
    def activation(self):
        return self.activations[self.activation_name]

    def validate(self) -> None:
        super().validate()
        for name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ConfigError(f"field 'n_embd' ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"field {name!r} must be in [0, 1), got {value!r}")
        for name in ("layer_norm_epsilon", "initializer_range"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive number, got {value!r}")
        if self.activation_name not in self.activations:
            raise ConfigError(f"field {self.activation_field!r} must be one of {', '.join(self.activations)}, "
                              f"got {self.activation_name!r}")
        if self.summary_type not in ("last", "first", "mean", "cls_index"):
            raise ConfigError(f"field 'summary_type' must be one of last, first, mean, cls_index, "
                              f"got {self.summary_type!r}")
        if self.summary_activation not in (None, "tanh", *self.activations):
            raise ConfigError(f"field 'summary_activation' must be null, tanh or an activation name, "
                              f"got {self.summary_activation!r}")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            # not bounded by vocab_size: transformers' GPT2Config(vocab_size=...) keeps BOS = EOS = 50256
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"field {name!r} must be a token id (an integer >= 0) or null, got {value!r}")
        if self.tie_word_embeddings is not True:
            raise ConfigError("field 'tie_word_embeddings' must be true (GPT's vocabulary head is its token "
                              f"embedding matrix), got {self.tie_word_embeddings!r}")
        if self.extra.get("add_cross_attention"):
            raise ConfigError("field 'add_cross_attention': cross-attention GPT-2 (an encoder-decoder part) is not "
                              "supported")

    activation_field: ClassVar[str] = "activation_function"


@dataclass
class GPT2Config(_GPTConfig):
    """transformers' `GPT2Config` (openai-community/gpt2 sizes). `n_inner` None = 4 * n_embd."""

    n_inner: int | None = None
    activation_function: str = "gelu_new"
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    reorder_and_upcast_attn: bool = False
    bos_token_id: int | None = 50256
    eos_token_id: int | None = 50256
    model_type: str = "gpt2"

    presets: ClassVar[dict[str, dict[str, Any]]] = GPT2_PRESETS
    optional_fields: ClassVar[tuple[str, ...]] = _GPTConfig.optional_fields

    @property
    def intermediate_size(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    @property
    def activation_name(self) -> str:
        return self.activation_function

    def validate(self) -> None:
        if self.n_inner is not None and (isinstance(self.n_inner, bool) or not isinstance(self.n_inner, int)
                                         or self.n_inner <= 0):
            raise ConfigError(f"field 'n_inner' must be a positive integer or null, got {self.n_inner!r}")
        for name in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"field {name!r} must be true or false, got {getattr(self, name)!r}")
        super().validate()


@dataclass
class OpenAIGPTConfig(_GPTConfig):
    """transformers' `OpenAIGPTConfig` (openai-community/openai-gpt sizes): GPT-1."""

    vocab_size: int = 40478
    n_positions: int = 512
    afn: str = "gelu"
    model_type: str = "openai-gpt"

    presets: ClassVar[dict[str, dict[str, Any]]] = OPENAI_GPT_PRESETS
    activations: ClassVar[dict[str, Any]] = OPENAI_GPT_ACTIVATIONS
    activation_field: ClassVar[str] = "afn"
    pre_layer_norm: ClassVar[bool] = False
    final_layer_norm: ClassVar[bool] = False

    @property
    def activation_name(self) -> str:
        return self.afn
