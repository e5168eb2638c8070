"""A built data directory's text as one token stream, cut into chunks of a length the reader chooses.

Instance formats cut text to the build's `max_seq_length` and add the BERT specials
([CLS] ... [SEP]). An objective that needs raw text of another length — T5's span
corruption reads 141 raw tokens to fill 128 input positions — reads the same `packed`
data through `TextChunks`: the instances' tokens in index order with the given ids
(the specials the format added) dropped, and chunk k = stream[k * length : (k + 1) * length].
The tail shorter than one chunk is not used. So formats stay generic: nothing at build
time knows which objective will read the data, and one `packed` directory serves every
single-segment objective.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bertkit.data.dataset import PretrainingDataset


class TextChunks:
    """Fixed-length chunks (`length` tokens) of `data`'s text, `drop_ids` removed; indexable like a list."""

    def __init__(self, data: PretrainingDataset, length: int, drop_ids: Iterable[int]):
        if length < 1:
            raise ValueError(f"chunk length must be positive, got {length}")
        self.data = data
        self.length = length
        self.drop_ids = np.array(sorted(set(drop_ids)), dtype=np.int64)
        lengths = data.text_lengths(self.drop_ids)  # (N,) kept tokens per instance
        self._starts = np.zeros(len(lengths) + 1, dtype=np.int64)  # instance i holds stream[starts[i], starts[i + 1])
        np.cumsum(lengths, out=self._starts[1:])
        self.num_tokens = int(self._starts[-1])

    def __len__(self) -> int:
        return self.num_tokens // self.length

    def __getitem__(self, index: int) -> np.ndarray:
        """(length,) int64: stream tokens [index * length, (index + 1) * length)."""
        if not 0 <= index < len(self):
            raise IndexError(f"chunk {index} out of range for {len(self)} chunks")
        start, end = index * self.length, (index + 1) * self.length
        instance = int(np.searchsorted(self._starts, start, side="right")) - 1  # the instance holding stream token `start`
        pieces, have = [], 0
        while have < self.length:
            ids = self.data[instance]["input_ids"]
            text = ids[~np.isin(ids, self.drop_ids)]
            lo = start - int(self._starts[instance]) if not pieces else 0
            piece = text[lo:lo + end - start - have]
            pieces.append(piece)
            have += len(piece)
            instance += 1
        return np.concatenate(pieces)
