"""Tokenization: BERT WordPiece encoding with a Hugging Face compatible API.

`Tokenizer` (tokenizer.py) turns text into model inputs; `BatchEncoding` (encoding.py)
is what it returns; `bert_normalizer` (normalizers.py) is the shared text cleaning.
"""

from bertkit.tokenization.encoding import BatchEncoding
from bertkit.tokenization.tokenizer import Tokenizer, TokenizerConfig

__all__ = ["BatchEncoding", "Tokenizer", "TokenizerConfig"]
