"""`ElectraConfig` (HF field names) and the generator's config derived from the discriminator's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bertkit.errors import ConfigError
from bertkit.model.bert.config import PRESETS, BertConfig
from bertkit.model.layers import ACTIVATIONS

SUMMARY_TYPES = ("first", "last", "mean")


@dataclass
class ElectraConfig(BertConfig):
    """HF `ElectraConfig` fields; defaults are transformers' (ELECTRA-small's encoder).

    `embedding_size` is the width of the token/position/segment embeddings; when it
    differs from `hidden_size` the model projects them (`embeddings_project`). The
    `summary_*` fields configure the multiple-choice head (HF's sequence summary).
    """

    embedding_size: int = 128
    hidden_size: int = 256
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    model_type: str = "electra"
    summary_type: str = "first"
    summary_use_proj: bool = True
    summary_activation: str | None = "gelu"
    summary_last_dropout: float = 0.1

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "ElectraConfig":
        """A BERT size (tiny..large) as an ELECTRA encoder; embedding_size = hidden_size unless given."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        hidden = PRESETS[name][1]
        return super().from_preset(name, **{"embedding_size": overrides.get("hidden_size", hidden), **overrides})

    def validate(self) -> None:
        super().validate()
        if self.pre_layer_norm:  # transformers has no pre-LN ELECTRA: a checkpoint would compute another function
            raise ConfigError("field 'pre_layer_norm' is not supported by ELECTRA (post-LN only, as in transformers)")
        size = self.embedding_size
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ConfigError(f"field 'embedding_size' must be a positive integer, got {size!r}")
        if self.summary_type not in SUMMARY_TYPES:
            raise ConfigError(f"field 'summary_type' must be one of {', '.join(SUMMARY_TYPES)}, got {self.summary_type!r}")
        if self.summary_activation is not None and self.summary_activation not in ACTIVATIONS and self.summary_activation != "tanh":
            raise ConfigError(f"field 'summary_activation' must be tanh, {', '.join(ACTIVATIONS)} or null, "
                              f"got {self.summary_activation!r}")
        if self.extra.get("tie_word_embeddings") is False:
            raise ConfigError("field 'tie_word_embeddings' must be true: bertkit's ELECTRA generator ties its "
                              "output layer to the word embeddings")
        value = self.summary_last_dropout
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ConfigError(f"field 'summary_last_dropout' must be in [0, 1), got {value!r}")


def generator_config(config: ElectraConfig, size: float) -> ElectraConfig:
    """The generator for discriminator `config`: hidden size, heads and FFN scaled by `size`.

    As the ELECTRA paper's generators: same depth and embedding width (the embeddings are
    shared), hidden = round(size * H), heads = round(size * A) (at least 1, dividing the
    hidden size), intermediate = round(size * I). `size` must be in (0, 1]: a generator
    larger than its discriminator is an error (it makes the task too hard, paper sec. 3.2).
    """
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0.0 < size <= 1.0:
        raise ConfigError(f"field 'generator_size' must be in (0, 1] (a fraction of the discriminator's "
                          f"hidden size; a larger generator is not allowed), got {size!r}")
    hidden = max(1, round(config.hidden_size * size))
    heads = max(1, min(hidden, round(config.num_attention_heads * size)))
    while hidden % heads:
        heads -= 1
    return dataclasses.replace(
        config, hidden_size=hidden, num_attention_heads=heads,
        intermediate_size=max(1, round(config.intermediate_size * size)), extra={},
        id2label=None, label2id=None, problem_type=None,
    )
