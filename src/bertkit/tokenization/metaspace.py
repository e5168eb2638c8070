"""The SentencePiece-style text pipeline of Unigram tokenizers: NFKC, "▁" word marks.

Shared by training (word counting, the trained tokenizer) and anything that rebuilds it.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers

METASPACE = "\u2581"  # "▁": a word's leading space, as SentencePiece writes it


def unigram_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """NFKC (full-width forms, compatibility characters; Hangul stays composed), then lowercasing if asked."""
    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    return normalizers.Sequence(steps)


def metaspace_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Split on whitespace (runs collapse), "▁" before every word: "a  b" -> "▁a", "▁b"."""
    return pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always")]
    )


def metaspace_pipeline(tokenizer: Tokenizer, lowercase: bool) -> Tokenizer:
    """Set the normalizer, pre-tokenizer and "▁"-to-space decoder of `tokenizer`; returns it."""
    tokenizer.normalizer = unigram_normalizer(lowercase)
    tokenizer.pre_tokenizer = metaspace_pre_tokenizer()
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    return tokenizer
