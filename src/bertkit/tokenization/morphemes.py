"""Korean morpheme pre-tokenization (KLUE style) with kiwipiepy, an optional extra.

`morpheme_splitter()` returns a function that inserts a space at every morpheme boundary
inside a word and changes nothing else: "영화를 봤다" -> "영화 를 봤 다". The text
keeps its surface characters (kiwi's normalized lemmas such as 보+았 are not used), so
offsets map back by skipping the inserted spaces. Where two morphemes share a syllable
(봤 = 보 + 았) no boundary is possible and the syllable stays whole. Training and
encoding both call this when a tokenizer's config says `"pretokenize_morphemes": "kiwi"`.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

from bertkit.errors import BertkitError

INSTALL_HINT = "pip install 'bertkit[ko]'"


@functools.lru_cache(maxsize=1)
def morpheme_splitter() -> Callable[[str], str]:
    """A function text -> text with spaces between Korean morphemes (kiwipiepy).

    Raises `BertkitError` with an install hint when kiwipiepy is missing. Loading the
    analyzer takes a few seconds and ~0.5 GB, so one is loaded per process and shared.
    """
    try:
        from kiwipiepy import Kiwi
    except ImportError as exc:
        raise BertkitError(
            f"Korean morpheme pre-tokenization needs kiwipiepy, which is not installed ({INSTALL_HINT})"
        ) from exc
    with warnings.catch_warnings():  # kiwipiepy >= 0.21 warns that 0 now means "one thread", which is what we want
        warnings.simplefilter("ignore", DeprecationWarning)
        kiwi = Kiwi(num_workers=0)

    def split(text: str) -> str:
        if not text or text.isascii():  # no cut is made between two ASCII characters
            return text
        return insert_boundaries(text, [(token.start, token.start + token.len) for token in kiwi.tokenize(text)])

    return split


def insert_boundaries(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with a space at each morpheme start inside a word.

    `spans` are the analyzer's (start, end) character offsets, in order. A start is cut
    when it does not overlap the previous morpheme, lies inside a word, and is not
    between two ASCII characters (so "ab12" or "BERT's" are never cut, whatever the rest
    of the line holds; "2019년" -> "2019 년").
    """
    cuts: list[int] = []
    previous_end = 0
    for start, end in spans:
        if (
            start >= previous_end
            and 0 < start < len(text)
            and not text[start - 1].isspace()
            and not text[start].isspace()
            and not (text[start - 1].isascii() and text[start].isascii())
        ):
            cuts.append(start)
        previous_end = max(previous_end, end)
    if not cuts:
        return text
    pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
    return " ".join(pieces)
