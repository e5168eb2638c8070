"""Words -> character ids, as AllenNLP's `ELMoCharacterMapper` (the ids the published ELMo files use).

A word is its UTF-8 bytes (0..255) between a begin-of-word (258) and an end-of-word (259)
character, padded with 260 to `max_characters` (50); the sentence markers <S> and </S>
are the single characters 256 and 257 so marked. Every id is shifted by one, so 0 is
the padding of a padded *word* (a batch's rows of different lengths). A word of more
than max_characters - 2 bytes is cut to that many bytes (at a byte, as AllenNLP) and
counted (`CharacterMapper.cut_words`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bertkit.errors import BertkitError

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260


class SentenceMarker(str):
    """<S> / </S>: the sentence markers, a `str` subclass so a text's literal "<S>" stays a word."""


BOS = SentenceMarker("<S>")
EOS = SentenceMarker("</S>")


class CharacterMapper:
    """Word strings -> (max_characters,) int64 character ids; counts the words it cut."""

    def __init__(self, max_characters: int = 50):
        self.max_characters = max_characters
        self.cut_words = 0
        self._markers = {BOS: self._marker(BOS_CHAR), EOS: self._marker(EOS_CHAR)}

    def _marker(self, char: int) -> np.ndarray:
        ids = np.full(self.max_characters, PAD_CHAR + 1, dtype=np.int64)
        ids[:3] = [BOW_CHAR + 1, char + 1, EOW_CHAR + 1]
        return ids

    def word_ids(self, word: str, where: str = "word") -> np.ndarray:
        """(max_characters,) ids of one word; `where` names it in errors (a file:line or field)."""
        if isinstance(word, SentenceMarker):
            return self._markers[word]
        if not word:
            raise BertkitError(f"{where}: an empty word (words have at least one character)")
        try:
            data = word.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BertkitError(f"{where}: word {word!r} is not valid Unicode ({exc.reason}); "
                               "decode the input as UTF-8") from None
        room = self.max_characters - 2
        if len(data) > room:
            data = data[:room]
            self.cut_words += 1
        ids = np.full(self.max_characters, PAD_CHAR + 1, dtype=np.int64)
        ids[0] = BOW_CHAR + 1
        ids[1:len(data) + 1] = np.frombuffer(data, dtype=np.uint8).astype(np.int64) + 1
        ids[len(data) + 1] = EOW_CHAR + 1
        return ids

    def sentence_ids(self, words: Sequence[str], where: str = "sentence") -> np.ndarray:
        """(W, max_characters) ids of a word sequence (markers included if given)."""
        if not words:
            raise BertkitError(f"{where}: an empty sentence (no words to represent)")
        return np.stack([self.word_ids(word, f"{where}, word {i + 1}") for i, word in enumerate(words)])


def batch_character_ids(sentences: Sequence[np.ndarray]) -> np.ndarray:
    """(W_i, C) arrays -> (B, max W_i, C) int64, padded words all 0."""
    width = max(len(s) for s in sentences)
    out = np.zeros((len(sentences), width, sentences[0].shape[1]), dtype=np.int64)
    for row, ids in enumerate(sentences):
        out[row, :len(ids)] = ids
    return out
