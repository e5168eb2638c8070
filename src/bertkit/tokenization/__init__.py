"""Tokenization: BERT WordPiece encoding with a Hugging Face compatible API.

`Tokenizer` (tokenizer.py) turns text into model inputs; `BatchEncoding` (encoding.py)
is what it returns; files.py reads/writes the checkpoint files (`TokenizerConfig`);
`bert_normalizer` (normalizers.py) is the shared text cleaning.
"""

from bertkit.tokenization.encoding import BatchEncoding
from bertkit.tokenization.files import TokenizerConfig
from bertkit.tokenization.tokenizer import Tokenizer

__all__ = ["BatchEncoding", "Tokenizer", "TokenizerConfig"]
