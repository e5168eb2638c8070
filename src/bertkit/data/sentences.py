"""Sentence splitting for pre-training corpora: rules, not a model.

BERT's next-sentence pairs are built from sentences, so raw text (one paragraph a line,
JSONL records) is cut into sentences first. The splitter looks at every run of sentence
terminators (`.` `!` `?` `…`, CJK `。！？`, possibly followed by closing quotes or
brackets) and decides from the context:

* CJK full stops end a sentence even with no space after them.
* A period, `!` or `?` right after a Hangul syllable and followed directly by a letter
  ends a sentence too: Korean web text often omits the space ("봤다.너무 좋다").
* Otherwise a boundary needs whitespace after the terminator and a next word that does
  not start with a lower-case letter ("e.g. the" and '"Really?" she asked' stay whole).
* A single period after an abbreviation ("Mr.", "Dr.", "U.S.", "e.g.", "No."), an initial
  ("J. K. Rowling") is not a boundary; decimals ("3.14") have no space and never split.

Splitting is idempotent on text that already holds one sentence a line (the BERT corpus
format), so it is always on unless the caller says otherwise.
"""

from __future__ import annotations

import re

# Titles and common abbreviations that end in a period inside a sentence (lower-cased,
# without the final period). "etc." is left out: it ends sentences more often than not.
ABBREVIATIONS = frozenset(
    """
    mr mrs ms messrs mme mlle dr prof rev hon st mt ft gen col lt sgt capt cmdr adm gov sen rep pres
    sr jr esq vs cf al approx dept est vol vols pp ed eds fig figs no nos op ch sec art ca inc ltd co
    corp bros jan feb mar apr jun jul aug sep sept oct nov dec univ assn
    """.split()
)
_TERMINATORS = re.compile(r"(?:[.!?…]+|[。！？]+)[\"'”’)\]}»」』]*")
_DOTTED_ABBREVIATION = re.compile(r"(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}\Z")  # U.S, e.g, Ph.D, a.m
_CJK_STOPS = frozenset("。！？")
_OPENERS = "\"'“‘([{«「『"


def _is_hangul_syllable(char: str) -> bool:
    return "\uac00" <= char <= "\ud7a3"


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped, empty ones dropped; a text with no boundary is one sentence."""
    sentences: list[str] = []
    start = 0
    for match in _TERMINATORS.finditer(text):
        end = match.end()
        if end >= len(text) or not _is_boundary(text, match.start(), end):
            continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def _is_boundary(text: str, term_start: int, term_end: int) -> bool:
    """Whether the terminator run text[term_start:term_end] (with its closers) ends a sentence."""
    terminator = text[term_start:term_end]
    if terminator[0] in _CJK_STOPS:
        return True
    following = text[term_end]
    if not following.isspace():
        # no space: only Korean "다.너무" style (a Hangul syllable before, a letter after)
        return term_start > 0 and _is_hangul_syllable(text[term_start - 1]) and following.isalpha()
    next_start = term_end
    length = len(text)
    while next_start < length and text[next_start].isspace():
        next_start += 1
    if next_start == length or text[next_start].islower():
        return False
    if terminator.rstrip("\"'”’)]}»」』") != ".":
        return True  # "!", "?", "...", "?!": a boundary before a non-lower-case word
    word = _word_before(text, term_start)
    if not word:
        return True
    if word.lower() in ABBREVIATIONS or _DOTTED_ABBREVIATION.match(word):
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():  # an initial: "J. K. Rowling"
        return False
    return True


def _word_before(text: str, end: int) -> str:
    """The whitespace-delimited word ending at `end`, opening quotes/brackets removed."""
    start = text.rfind(" ", 0, end) + 1
    tab = max(text.rfind("\t", 0, end), text.rfind("\n", 0, end)) + 1
    return text[max(start, tab) : end].lstrip(_OPENERS)
