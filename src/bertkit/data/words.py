"""Words as a word-level model (ELMo) reads them: the tokenizer's pre-tokenization, whole words.

The rule, one for training data and for texts alike: a word is a maximal run of sub-word
tokens that `bertkit.data.masking.word_boundaries` joins (a WordPiece word and its "##"
pieces; a "Ġ" / "▁"-led piece and the pieces after it; a "</w>"-ended run), its text the
tokenizer's decoding of those tokens with surrounding spaces removed. So a word's characters
are what the tokenizer's normaliser left (lowercased and accent-free for an uncased
tokenizer); special tokens ([CLS], [SEP], [PAD], ...) are not words, and a word the
tokenizer could not spell reads as its unknown token ("[UNK]").

- token ids (a built data directory's instances): `TokenWords.words(ids)`;
- texts: `TokenWords.text_words(texts)` tokenizes them (no specials) and applies the same rule;
- words already split (CoNLL's: a tagging window's `word_ids`, `grouped_words`): each given
  word is one word, the decoding of its tokens with whitespace removed ("U.S." stays one
  word), so a tagger's labels stay one per word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bertkit.data.masking import word_boundaries


class TokenWords:
    """A tokenizer's word rule (see the module docstring)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        starts, ends = word_boundaries(tokenizer)
        self.starts = starts
        self.ends = ends
        self.special = np.zeros(len(starts), dtype=bool)
        self.special[[i for i in tokenizer.all_special_ids if i < len(starts)]] = True

    def split(self, ids: np.ndarray) -> list[np.ndarray]:
        """(T,) token ids -> the ids of each word, in order (special tokens dropped)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return []
        special = self.special[ids]
        begins = self.starts[ids] | special
        begins[0] = True
        if self.ends is not None:  # after a "</w>" token comes a new word
            begins[1:] |= self.ends[ids[:-1]]
        begins[1:] |= special[:-1]
        groups = np.split(ids, np.flatnonzero(begins)[1:])
        return [group for group in groups if not self.special[group[0]]]

    def single_token_words(self, ids: np.ndarray) -> np.ndarray:
        """The ids of the words of (T,) `ids` that are one token each (for counting a vocabulary)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return ids
        special = self.special[ids]
        begins = self.starts[ids] | special
        begins[0] = True
        if self.ends is not None:
            begins[1:] |= self.ends[ids[:-1]]
        begins[1:] |= special[:-1]
        alone = begins & np.concatenate([begins[1:], [True]]) & ~special
        return ids[alone]

    def positions(self, ids: np.ndarray, word_ids: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """(T,) ids -> ((T,) the word index of each position, -1 for special tokens; word count).
        `word_ids` (T,) (a tagging window's: the given word of each token, -1 for none) groups
        the tokens by given word instead of by the tokenizer's word starts."""
        ids = np.asarray(ids, dtype=np.int64)
        index = np.full(ids.shape, -1, dtype=np.int64)
        if word_ids is not None:
            word_ids = np.asarray(word_ids, dtype=np.int64)
            real = (word_ids >= 0) & ~self.special[ids]
            begins = real & np.concatenate([[True], word_ids[1:] != word_ids[:-1]])
        else:
            real = ~self.special[ids]
            begins = real & (self.starts[ids] | np.concatenate([[True], self.special[ids[:-1]]]))
            if self.ends is not None:
                begins[1:] |= real[1:] & self.ends[ids[:-1]]
        index[real] = (np.cumsum(begins) - 1)[real]
        return index, int(begins.sum())

    def grouped_words(self, ids: np.ndarray, word_ids: np.ndarray | None = None) -> tuple[list[str], np.ndarray]:
        """(words, (T,) word index per position or -1) of one row of token ids: each word's
        text is the decoding of its tokens with whitespace removed (a given word never holds
        a space; a piece that decodes to nothing stays a word, as its token)."""
        index, count = self.positions(ids, word_ids)
        groups = [[] for _ in range(count)]
        for token, word in zip(np.asarray(ids).tolist(), index.tolist()):
            if word >= 0:
                groups[word].append(token)
        texts = self.tokenizer.backend.decode_batch(groups, skip_special_tokens=False) if groups else []
        words = ["".join(text.split()) or self.tokenizer.convert_ids_to_tokens(group[0])
                 for text, group in zip(texts, groups)]
        return words, index

    def words(self, ids: np.ndarray) -> list[str]:
        """(T,) token ids -> the words' texts (a piece that decodes to nothing is no word)."""
        groups = self.split(ids)
        texts = self.tokenizer.backend.decode_batch([g.tolist() for g in groups], skip_special_tokens=False)
        return [text.strip() for text in texts if text.strip()]

    def text_words(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's words (tokenized without special tokens, then `words`)."""
        encoded = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [self.words(np.asarray(ids, dtype=np.int64)) for ids in encoded]
