"""Quality report of a tokenizer on held-out text: fertility, [UNK] rate, words kept whole.

Words are the whitespace-separated words of the original text (before any morpheme
splitting), so tokenizers with different pre-tokenization are compared on the same
units. Each token belongs to the word holding its last character.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from bertkit.errors import BertkitError
from bertkit.plots import new_figure, save_png

_WORD = re.compile(r"\S+")
MAX_BIN = 10  # pieces-per-word histogram: 1..9 and "10+"


@dataclass
class TokenizerStats:
    """Counts over a text sample; the derived rates are properties."""

    lines: int = 0
    words: int = 0
    tokens: int = 0
    unk_tokens: int = 0
    words_whole: int = 0  # words that are a single token (not the unknown token)
    words_with_unk: int = 0
    pieces_per_word: Counter = field(default_factory=Counter)  # n pieces (capped at MAX_BIN) -> words
    tokens_per_line: Counter = field(default_factory=Counter)  # n tokens -> lines

    @property
    def fertility(self) -> float:
        """Sub-word tokens per word."""
        return self.tokens / self.words if self.words else 0.0

    @property
    def unk_rate(self) -> float:
        """Share of tokens that are the unknown token."""
        return self.unk_tokens / self.tokens if self.tokens else 0.0

    @property
    def whole_word_share(self) -> float:
        """Share of words encoded as exactly one (known) token."""
        return self.words_whole / self.words if self.words else 0.0

    def summary(self) -> dict:
        return {
            "lines": self.lines,
            "words": self.words,
            "tokens": self.tokens,
            "fertility": round(self.fertility, 4),
            "unk_rate": round(self.unk_rate, 6),
            "words_with_unk": self.words_with_unk,
            "whole_word_share": round(self.whole_word_share, 4),
        }


def measure(
    tokenizer, texts: Iterable[str], *, batch_size: int = 512, source: str = "the held-out text"
) -> TokenizerStats:
    """Encode `texts` (read from `source`, named in errors) with a bertkit `Tokenizer`, no special tokens, and count."""
    stats = TokenizerStats()
    unk_id = tokenizer.unk_token_id
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) >= batch_size:
            _add_batch(stats, tokenizer, batch, unk_id)
            batch = []
    if batch:
        _add_batch(stats, tokenizer, batch, unk_id)
    if not stats.words:
        raise BertkitError(f"{source}: no words to measure (empty or blank)")
    return stats


def _add_batch(stats: TokenizerStats, tokenizer, texts: list[str], unk_id: int | None) -> None:
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    for text, ids, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"], strict=True):
        spans = [m.start() for m in _WORD.finditer(text)]
        if not spans:
            continue
        pieces = [0] * len(spans)
        unknown = [False] * len(spans)
        for token_id, (start, end) in zip(ids, offsets, strict=True):
            word = max(bisect_right(spans, max(end - 1, start)) - 1, 0)
            pieces[word] += 1
            if token_id == unk_id:
                unknown[word] = True
        stats.lines += 1
        stats.words += len(spans)
        stats.tokens += len(ids)
        stats.tokens_per_line[len(ids)] += 1
        stats.unk_tokens += sum(1 for token_id in ids if token_id == unk_id) if unk_id is not None else 0
        for count, unk in zip(pieces, unknown):
            stats.pieces_per_word[min(count, MAX_BIN)] += 1
            stats.words_with_unk += unk
            stats.words_whole += count == 1 and not unk


def format_report(stats: TokenizerStats, title: str) -> str:
    """A few aligned lines for the terminal."""
    total = stats.words or 1
    shares = "  ".join(
        f"{n if n < MAX_BIN else str(MAX_BIN) + '+'}:{100 * stats.pieces_per_word[n] / total:.1f}%"
        for n in range(0 if stats.pieces_per_word[0] else 1, MAX_BIN + 1)
    )
    return "\n".join(
        [
            title,
            f"  lines              {stats.lines:,}",
            f"  words              {stats.words:,}",
            f"  tokens             {stats.tokens:,}",
            f"  fertility          {stats.fertility:.3f} tokens/word",
            f"  unknown-token rate {100 * stats.unk_rate:.3f}% of tokens ({stats.words_with_unk:,} words hit)",
            f"  words kept whole   {100 * stats.whole_word_share:.1f}%",
            f"  pieces per word    {shares}",
        ]
    )


def plot_histogram(stats: TokenizerStats, path: str | Path, title: str) -> Path:
    """Write a PNG: pieces per word (left) and tokens per line (right). No global pyplot state."""
    figure = new_figure(10, 4)
    left, right = figure.subplots(1, 2)
    bins = list(range(1, MAX_BIN + 1))
    total = stats.words or 1
    left.bar(
        [str(b) if b < MAX_BIN else f"{MAX_BIN}+" for b in bins], [100 * stats.pieces_per_word[b] / total for b in bins]
    )
    left.set_xlabel("tokens per word")
    left.set_ylabel("% of words")
    left.set_title(f"fertility {stats.fertility:.2f}, whole words {100 * stats.whole_word_share:.1f}%")
    lengths = sorted(stats.tokens_per_line.elements())
    right.hist(lengths, bins=min(50, max(1, len(set(lengths)))))
    right.set_xlabel("tokens per line")
    right.set_ylabel("lines")
    right.set_title(f"{stats.lines:,} lines, [UNK] {100 * stats.unk_rate:.2f}% of tokens")
    figure.suptitle(title)
    figure.tight_layout()
    return save_png(figure, path)
