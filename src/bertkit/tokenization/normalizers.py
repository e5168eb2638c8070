"""Text normalization for BERT-style tokenizers, built from `tokenizers` normalizers.

BERT's uncased pipeline strips accents with NFD + "drop combining marks". NFD also
splits every Hangul syllable into conjoining jamo, which wrecks Korean (a known BERT
pitfall). By default bertkit recomposes with NFC after stripping: accents are gone
(they were removed while decomposed) and Hangul syllables come back whole. Set
`keep_hangul=False` for the original BERT behaviour (exact compatibility with
checkpoints whose vocab holds jamo).
"""

from __future__ import annotations

from tokenizers import normalizers as N


def bert_normalizer(
    lowercase: bool = True,
    strip_accents: bool | None = None,
    handle_chinese_chars: bool = True,
    clean_text: bool = True,
    keep_hangul: bool = True,
    nfkc: bool = False,
) -> N.Normalizer:
    """The BERT BasicTokenizer's normalization as a (Rust) `tokenizers` normalizer.

    `strip_accents=None` follows `lowercase`, as in BERT/HF. `nfkc` applies Unicode NFKC
    first (full-width forms, compatibility characters) — off in the original BERT.
    """
    if strip_accents is None:
        strip_accents = lowercase
    steps: list[N.Normalizer] = []
    if nfkc:
        steps.append(N.NFKC())
    if not (strip_accents and keep_hangul):
        steps.append(
            N.BertNormalizer(
                clean_text=clean_text,
                handle_chinese_chars=handle_chinese_chars,
                strip_accents=strip_accents,
                lowercase=lowercase,
            )
        )
    else:
        steps += [
            N.BertNormalizer(
                clean_text=clean_text, handle_chinese_chars=handle_chinese_chars, strip_accents=False, lowercase=lowercase
            ),
            N.NFD(),
            N.StripAccents(),
            N.NFC(),  # recompose Hangul syllables (accents are already gone)
        ]
    return steps[0] if len(steps) == 1 else N.Sequence(steps)
