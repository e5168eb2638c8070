"""Text normalization for BERT-style tokenizers, built from `tokenizers` normalizers.

BERT's uncased pipeline strips accents with NFD + "drop non-spacing marks (Mn)". NFD
also splits every Hangul syllable into conjoining jamo, which wrecks Korean (a known BERT
pitfall). With `keep_hangul=True` (what bertkit trains with) the normalizer recomposes
with NFC after stripping: accents are gone (they were removed while decomposed) and
Hangul syllables come back whole. `keep_hangul=False` is the original BERT behaviour,
which a checkpoint trained elsewhere needs (its vocab holds jamo); the tokenizer config
decides (files.py, `keep_hangul_syllables`).

Two details keep every non-Hangul character identical to BERT's:
  * accents are stripped by `BertNormalizer` (drops Mn only, like BERT). The separate
    `tokenizers` `StripAccents` would also drop spacing marks (Mc), i.e. most Indic vowel
    signs (Hindi "कि" -> "क").
  * NFC also recomposes 29 two-part vowel signs (Bengali, Oriya, Tamil, Malayalam,
    Sinhala, Balinese, ...) whose parts are both spacing marks; `Replace` steps split
    them again, as BERT leaves them.
"""

from __future__ import annotations

import unicodedata

from tokenizers import normalizers as N

# Characters that NFC rebuilds from parts BERT's accent stripping leaves decomposed: their
# canonical decomposition has no non-spacing mark (Mn). Found by scanning all of Unicode
# for c with NFC(strip_mn(NFD(c))) != strip_mn(NFD(c)), Hangul syllables excluded
# (tests/tokenization/test_tokenizer.py re-checks the list).
NFC_RECOMPOSED_NON_HANGUL = (
    "\u09cb\u09cc\u0b4b\u0b4c\u0b94\u0bca\u0bcb\u0bcc\u0d4a\u0d4b\u0d4c\u0ddc\u0ddd\u0dde"
    "\u1b06\u1b08\u1b0a\u1b0c\u1b0e\u1b12\u1b40\u1b41"
    "\U0001134b\U0001134c\U000114bc\U000114be\U000115ba\U000115bb\U00011938"
)


def _strip_nonspacing_marks(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


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
            N.BertNormalizer(  # NFD + drop Mn: Hangul is now jamo
                clean_text=clean_text,
                handle_chinese_chars=handle_chinese_chars,
                strip_accents=True,
                lowercase=lowercase,
            ),
            N.NFC(),  # recompose Hangul syllables (accents are already gone)
            *(N.Replace(c, _strip_nonspacing_marks(c)) for c in NFC_RECOMPOSED_NON_HANGUL),
        ]
    return steps[0] if len(steps) == 1 else N.Sequence(steps)
