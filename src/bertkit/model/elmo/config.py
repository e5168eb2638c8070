"""`ElmoConfig`: the biLM's sizes with bilm-tf's options.json names, flattened, and the presets.

bilm-tf's options.json nests them (`char_cnn: {embedding: {dim}, filters, n_highway,
n_characters, max_characters_per_token, activation}`, `lstm: {dim, projection_dim, n_layers,
cell_clip, proj_clip, use_skip_connections}`, `n_tokens_vocab`); here they are one flat
dataclass (`from_options` reads the nested form). `n_tokens_vocab` is the size of the word
softmax the two language models share (0: a biLM without its softmax, features only).

Presets: elmo-tiny (tests), elmo-small (the published small shape: 2 layers of 1024 cells
projected to 128, 2048 character filters, 1 highway layer) and elmo-original (4096 cells
projected to 512, 2 highway layers). Cell and projection clipping at 3 as published.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.pretrained_config import PretrainedConfig

# bilm-tf's character filters (width, count) of the published models: 2048 filters in all
PUBLISHED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
ACTIVATIONS = ("relu", "tanh")
N_CHARACTERS = 262  # 256 bytes + BOS/EOS/BOW/EOW/padding characters + 1 (0 masks padding words)
MAX_CHARACTERS_PER_TOKEN = 50  # AllenNLP's ELMoCharacterMapper.max_word_length

ELMO_PRESETS: dict[str, dict[str, Any]] = {
    "elmo-tiny": dict(char_embedding_dim=8, filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, projection_dim=16,
                      cell_size=32, num_layers=2),
    "elmo-small": dict(char_embedding_dim=16, filters=PUBLISHED_FILTERS, n_highway=1, projection_dim=128,
                       cell_size=1024, num_layers=2),
    "elmo-original": dict(char_embedding_dim=16, filters=PUBLISHED_FILTERS, n_highway=2, projection_dim=512,
                          cell_size=4096, num_layers=2),
}


@dataclass
class ElmoConfig(PretrainedConfig):
    """A character-CNN token layer, `num_layers` LSTMs with projections per direction, a shared softmax."""

    char_embedding_dim: int = 16
    filters: list = field(default_factory=lambda: [list(f) for f in PUBLISHED_FILTERS])
    n_highway: int = 2
    n_characters: int = N_CHARACTERS
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN
    activation: str = "relu"
    projection_dim: int = 512
    cell_size: int = 4096
    num_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    n_tokens_vocab: int = 0
    dropout: float = 0.1
    initializer_range: float = 0.02
    model_type: str = "elmo"

    # transformers' attribute_map: the generic names of the sizes (bertkit.pretrained_config)
    attribute_map: ClassVar[dict[str, str]] = {
        "num_hidden_layers": "num_layers", "hidden_dropout_prob": "dropout",
    }
    optional_fields: ClassVar[tuple[str, ...]] = PretrainedConfig.optional_fields
    presets: ClassVar[dict[str, dict[str, Any]]] = ELMO_PRESETS

    # ---- the sizes callers ask every family for -------------------------------------------
    @property
    def hidden_size(self) -> int:
        """Width of every representation layer: forward and backward concatenated (2 x projection)."""
        return 2 * self.projection_dim

    @property
    def num_representation_layers(self) -> int:
        """Layer 0 (the token layer, duplicated) and one per LSTM level."""
        return self.num_layers + 1

    @property
    def classifier_dropout(self) -> None:
        return None

    @property
    def num_filters(self) -> int:
        return sum(count for _, count in self.filters)

    @property
    def position_limit(self) -> None:
        return None  # an LSTM reads any length

    def describe_size(self) -> str:
        return (f"biLM {self.num_layers} x LSTM {self.cell_size} cells -> {self.projection_dim}, "
                f"char CNN {self.num_filters} filters + {self.n_highway} highway")

    @classmethod
    def from_options(cls, options: dict[str, Any], source: str = "options.json") -> "ElmoConfig":
        """bilm-tf's nested options.json as a config."""
        try:
            cnn, lstm = options["char_cnn"], options["lstm"]
            values = dict(char_embedding_dim=cnn["embedding"]["dim"], filters=cnn["filters"],
                          n_highway=cnn["n_highway"],
                          max_characters_per_token=cnn["max_characters_per_token"],
                          activation=cnn.get("activation", "relu"), projection_dim=lstm["projection_dim"],
                          cell_size=lstm["dim"], num_layers=lstm["n_layers"], cell_clip=lstm.get("cell_clip"),
                          proj_clip=lstm.get("proj_clip"), use_skip_connections=lstm.get("use_skip_connections", True),
                          n_tokens_vocab=options.get("n_tokens_vocab", 0))
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{source}: not a bilm-tf options file (missing {exc})") from None
        return cls.from_dict(values, source=source)

    def validate(self) -> None:
        super().validate()
        for name in ("char_embedding_dim", "n_characters", "max_characters_per_token", "projection_dim", "cell_size",
                     "num_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        for name in ("n_highway", "n_tokens_vocab"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"field {name!r} must be a non-negative integer, got {value!r}")
        if self.max_characters_per_token < 3:
            raise ConfigError(f"field 'max_characters_per_token' must be at least 3 (begin, one byte, end), "
                              f"got {self.max_characters_per_token}")
        if not isinstance(self.filters, list) or not self.filters or not all(
                isinstance(f, (list, tuple)) and len(f) == 2 and all(isinstance(n, int) and not isinstance(n, bool)
                                                                     and n > 0 for n in f) for f in self.filters):
            raise ConfigError(f"field 'filters' must be a non-empty list of [width, count] pairs of positive "
                              f"integers, got {self.filters!r}")
        if max(width for width, _ in self.filters) > self.max_characters_per_token:
            raise ConfigError("field 'filters': a filter is wider than max_characters_per_token")
        self.filters = [list(f) for f in self.filters]
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"field 'activation' must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ConfigError(f"field {name!r} must be a positive number or null (no clipping), got {value!r}")
        if not isinstance(self.use_skip_connections, bool):
            raise ConfigError(f"field 'use_skip_connections' must be true or false, got {self.use_skip_connections!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"field 'dropout' must be in [0, 1), got {self.dropout!r}")
