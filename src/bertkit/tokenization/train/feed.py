"""Handing counted words to a `tokenizers` trainer (which takes texts, not counts)."""

from __future__ import annotations

from typing import Iterator, Mapping

FEED_CHARS = 1 << 16  # characters per text handed to the trainer


def word_stream(words: Mapping[str, int]) -> Iterator[list[str]]:
    """Batches of texts holding every word as often as it was counted, in sorted order."""
    batch: list[str] = []
    size = 0
    for word in sorted(words):
        count = words[word]
        per_text = max(1, FEED_CHARS // (len(word) + 1))
        while count > 0:
            n = min(count, per_text)
            batch.append((word + " ") * n)
            size += n * (len(word) + 1)
            count -= n
            if size >= FEED_CHARS * 16:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch
