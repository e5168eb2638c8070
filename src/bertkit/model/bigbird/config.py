"""`BigBirdConfig`: transformers' BigBirdConfig fields and defaults, BigBird's presets.

BigBird (Zaheer et al., 2020) is BERT's encoder with block-sparse self-attention: the
sequence is cut into blocks of `block_size` tokens; the first and last blocks are global
(they attend to, and are attended by, every block), every other block attends to its
neighbours (a window of 3 blocks) and to `num_random_blocks` random blocks. Sequences too
short for that pattern run full attention (`sparse_threshold`). `attention_type`
"original_full" always runs full attention (a BERT with BigBird's weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.model.bert.config import BertConfig

ATTENTION_TYPES = ("block_sparse", "original_full")


def _size(layers: int, hidden: int, heads: int, block_size: int, **more: Any) -> dict[str, Any]:
    return dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden,
                block_size=block_size, **more)


@dataclass
class BigBirdConfig(BertConfig):
    """HF `BigBirdConfig` (defaults: google/bigbird-roberta-base's encoder, 4,096 positions).

    `sep_token_id` is a field here (transformers' QA head finds the question's end by it);
    `bos_token_id` / `eos_token_id` are carried through config.json as other generic fields."""

    vocab_size: int = 50358
    hidden_act: str = "gelu_new"
    max_position_embeddings: int = 4096
    model_type: str = "big_bird"
    attention_type: str = "block_sparse"
    use_bias: bool = True  # biases of the query, key and value projections
    rescale_embeddings: bool = False  # word embeddings times sqrt(hidden_size)
    block_size: int = 64
    num_random_blocks: int = 3
    sep_token_id: int | None = 66

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        # CPU sizes: BERT-tiny / BERT-mini widths with blocks small enough that a few hundred tokens run sparse
        "bigbird-tiny": _size(2, 128, 2, 16),
        "bigbird-mini": _size(4, 256, 4, 32),
        # google/bigbird-roberta-base's encoder (transformers' defaults)
        "bigbird-base": _size(12, 768, 12, 64),
        # monologg/kobigbird-bert-base: a 32,500-piece Korean WordPiece vocabulary, [SEP] = 3, <s> = 5, </s> = 6
        "kobigbird-base": _size(12, 768, 12, 64, vocab_size=32500, sep_token_id=3, bos_token_id=5, eos_token_id=6,
                                tokenizer_class="BertTokenizer"),
        # kobigbird-base's layout (Korean WordPiece, [SEP] = 3, <s> = 5, </s> = 6) at bigbird-tiny's size: a Korean
        # long-document run on a CPU (the vocabulary size follows the tokenizer it is trained with)
        "kobigbird-tiny": _size(2, 128, 2, 16, vocab_size=32500, sep_token_id=3, bos_token_id=5, eos_token_id=6,
                                tokenizer_class="BertTokenizer"),
    }

    @property
    def sparse_threshold(self) -> int:
        """The longest input that runs full attention in block-sparse mode (transformers' rule): the
        global (2), sliding (3) and twice the random blocks, (5 + 2 r) * block_size tokens."""
        return (5 + 2 * self.num_random_blocks) * self.block_size

    def to_dict(self) -> dict[str, Any]:
        values = super().to_dict()
        values.pop("position_embedding_type", None)  # not a BigBirdConfig field in transformers
        return values

    def validate(self) -> None:
        super().validate()
        if self.pre_layer_norm:
            raise ConfigError("field 'pre_layer_norm' is not supported by BigBird (post-LN only, as in transformers)")
        if self.attention_type not in ATTENTION_TYPES:
            raise ConfigError(f"field 'attention_type' must be one of {', '.join(ATTENTION_TYPES)}, "
                              f"got {self.attention_type!r}")
        for name in ("block_size", "num_random_blocks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "block_size" else 0):
                raise ConfigError(f"field {name!r} must be a {'positive' if name == 'block_size' else 'non-negative'} "
                                  f"integer, got {value!r}")
        for name in ("use_bias", "rescale_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"field {name!r} must be true or false, got {getattr(self, name)!r}")
        if self.sep_token_id is not None and (isinstance(self.sep_token_id, bool)
                                              or not isinstance(self.sep_token_id, int)):
            raise ConfigError(f"field 'sep_token_id' must be a token id or null, got {self.sep_token_id!r}")
