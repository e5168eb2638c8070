"""BERT WordPiece building blocks that encoding (`Tokenizer`) and training share.

The pipeline: a BERT normalizer -> BertPreTokenizer (whitespace and punctuation) ->
WordPiece (greedy longest match, "##" continuation pieces, the unknown token for a word
it cannot spell or one over 100 characters), framed as `[CLS] A [SEP] (B [SEP])`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenizers import Tokenizer as RustTokenizer
from tokenizers import decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

WORDPIECE_PREFIX = "##"
MAX_INPUT_CHARS_PER_WORD = 100  # BERT: a longer word becomes the unknown token


def wordpiece_backend(
    vocab: Mapping[str, int],
    unk_token: str,
    normalizer: normalizers.Normalizer,
    *,
    prefix: str = WORDPIECE_PREFIX,
    max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
) -> RustTokenizer:
    """The BERT WordPiece pipeline over `vocab` (token -> id), without a post-processor."""
    backend = RustTokenizer(
        WordPiece(
            dict(vocab),
            unk_token=unk_token,
            continuing_subword_prefix=prefix,
            max_input_chars_per_word=max_input_chars_per_word,
        )
    )
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix=prefix)
    return backend


def bert_template(cls_token: str, cls_id: int, sep_token: str, sep_id: int) -> processors.TemplateProcessing:
    """`[CLS] A [SEP]` (all type 0) and `[CLS] A [SEP] B [SEP]` (B and its [SEP] type 1)."""
    return processors.TemplateProcessing(
        single=f"{cls_token}:0 $A:0 {sep_token}:0",
        pair=f"{cls_token}:0 $A:0 {sep_token}:0 $B:1 {sep_token}:1",
        special_tokens=[(cls_token, cls_id), (sep_token, sep_id)],
    )
