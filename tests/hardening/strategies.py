"""Hypothesis strategies for hostile text: arbitrary Unicode mixed with the characters that
break readers and tokenizers (combining marks, zero-width and bidi controls, Hangul jamo,
BOMs, odd whitespace), and the files built from it."""

from __future__ import annotations

from hypothesis import strategies as st

TRICKY = [
    "\u0301", "\u0308", "\u20dd",  # combining marks
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff",  # zero-width, BOM inside text
    "\u202e", "\u202d", "\u200f", "\u05d0", "\u0627",  # bidi controls, Hebrew, Arabic (RTL)
    "\u1100", "\u1161", "\u11a8", "\uac00", "\ud55c",  # Hangul jamo and syllables
    "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b", "\x0c", "\x1c",  # unusual whitespace / separators
    "\ufffd", "\U0001f600", "\u4e2d", "e\u0301", "ﬁ", "Ⅸ", "１",  # replacement char, emoji, CJK, NFKC cases
    '"', "'", ",", "\\", "[", "]", "{", "}",  # quoting and structure characters
]

unicode_chars = st.one_of(st.sampled_from(TRICKY), st.characters(codec="utf-8"))


def texts(min_size: int = 0, max_size: int = 40, exclude: str = "") -> st.SearchStrategy[str]:
    """Arbitrary text (valid UTF-8: no lone surrogates) without the characters in `exclude`."""
    chars = unicode_chars.filter(lambda c: not any(x in c for x in exclude)) if exclude else unicode_chars
    return st.lists(chars, min_size=min_size, max_size=max_size).map("".join)


def field_texts(exclude: str) -> st.SearchStrategy[str]:
    """A non-blank text field (blank fields are errors by design) without `exclude`; it
    does not start with U+FEFF, which at the start of a file is read as its BOM."""
    return texts(1, 30, exclude).filter(lambda text: text.strip() != "" and not text.startswith("\ufeff"))


line_endings = st.sampled_from(["\n", "\r\n"])
boms = st.sampled_from(["", "\ufeff"])
arbitrary_bytes = st.one_of(
    st.binary(max_size=400),
    st.lists(st.sampled_from([b"\t", b",", b"\n", b"\r\n", b'"', b"{", b"}", b"[", b"]", b":", b"\xff", b"\xc3",
                              b"\xef\xbb\xbf", b"text", b"label", b"0", b"1", b"-DOCSTART-", b" O", b" B-PER",
                              b'"data"', b'"text"', b"\x00", "\u00e9".encode(), "\ud55c".encode()]),
             max_size=60).map(b"".join),
)
