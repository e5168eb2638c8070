"""`BatchEncoding`: the tokenizer's output, and its assembly from `tokenizers.Encoding`s.

Field layout (as Hugging Face fast tokenizers return it), B rows, T tokens per row:
  input_ids, token_type_ids, attention_mask   (B, T) ints
  special_tokens_mask                          (B, T) ints, 1 at [CLS]/[SEP]/[PAD]...
  offset_mapping                               (B, T, 2) character spans (start, end) into
                                               the row's own text; (0, 0) for special tokens
  overflow_to_sample_mapping                   (B,) index of the input text of each row
With `return_tensors=None` the fields are Python lists (rows may differ in length when
not padded); "np" gives int64 numpy arrays, "pt" int64 torch tensors.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from tokenizers import Encoding

from bertkit.errors import BertkitError


class BatchEncoding(dict):
    """Model inputs by name: `enc["input_ids"]` or `enc.input_ids`.

    `encodings` keeps the underlying `tokenizers.Encoding` of every row (word ids,
    sequence ids, tokens), so `word_ids(i)` / `sequence_ids(i)` work as in HF.
    """

    def __init__(self, data: dict[str, Any], encodings: list[Encoding] | None = None):
        super().__init__(data)
        self.encodings = encodings

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def _encoding(self, row: int) -> Encoding:
        if not self.encodings:
            raise BertkitError("this BatchEncoding carries no encodings (word_ids/sequence_ids unavailable)")
        if not -len(self.encodings) <= row < len(self.encodings):
            raise BertkitError(f"row={row} is out of range for a batch of {len(self.encodings)}")
        return self.encodings[row]

    def tokens(self, row: int = 0) -> list[str]:
        """The token strings of `row` (special and padding tokens included)."""
        return self._encoding(row).tokens

    def word_ids(self, row: int = 0) -> list[int | None]:
        """Per token of `row`: index of the word it came from (None for special tokens)."""
        return self._encoding(row).word_ids

    def sequence_ids(self, row: int = 0) -> list[int | None]:
        """Per token of `row`: 0 for text A, 1 for text B, None for special/padding tokens."""
        return self._encoding(row).sequence_ids

    def to(self, device: Any) -> BatchEncoding:
        """A copy with every torch tensor moved to `device` (other values unchanged)."""
        moved = {name: (value.to(device) if hasattr(value, "to") else value) for name, value in self.items()}
        return BatchEncoding(moved, self.encodings)


def assemble(
    encodings: Sequence[Encoding],
    *,
    return_tensors: str | None,
    padded: bool,
    zero_type_ids: bool,
    offsets: list[list[tuple[int, int]]] | None = None,
    sample_mapping: list[int] | None = None,
    special_tokens_mask: bool = False,
) -> BatchEncoding:
    """Collect the fields of `encodings` into a `BatchEncoding` (lists, numpy or torch).

    Shortcuts keep the Python work small: `zero_type_ids` (single sequences whose
    post-processor gives type id 0 everywhere) builds token_type_ids without asking each
    encoding, and unpadded rows get an all-ones attention_mask the same way.
    """
    input_ids = [e.ids for e in encodings]
    data: dict[str, Any] = {"input_ids": input_ids}
    data["token_type_ids"] = (
        [[0] * len(row) for row in input_ids] if zero_type_ids else [e.type_ids for e in encodings]
    )
    data["attention_mask"] = (
        [e.attention_mask for e in encodings] if padded else [[1] * len(row) for row in input_ids]
    )
    if special_tokens_mask:
        data["special_tokens_mask"] = [e.special_tokens_mask for e in encodings]
    if offsets is not None:
        data["offset_mapping"] = offsets
    if sample_mapping is not None:
        data["overflow_to_sample_mapping"] = sample_mapping
    if return_tensors is not None:
        data = _to_tensors(data, return_tensors)
    return BatchEncoding(data, list(encodings))


def _to_tensors(data: dict[str, Any], return_tensors: str) -> dict[str, Any]:
    lengths = {len(row) for row in data["input_ids"]}
    if len(lengths) > 1:
        raise BertkitError(
            f"return_tensors={return_tensors!r} needs rows of equal length, got lengths "
            f"{min(lengths)}..{max(lengths)}: pass padding=True (or padding='max_length')"
        )
    width = lengths.pop() if lengths else 0
    arrays: dict[str, Any] = {}
    for name, value in data.items():
        if name == "overflow_to_sample_mapping":
            arrays[name] = np.asarray(value, dtype=np.int64)
        elif name == "offset_mapping":
            arrays[name] = np.asarray(value, dtype=np.int64).reshape(len(value), width, 2)  # (B, T, 2)
        else:
            arrays[name] = np.asarray(value, dtype=np.int64).reshape(len(value), width)  # (B, T)
    if return_tensors == "pt":
        import torch

        return {name: torch.from_numpy(array) for name, array in arrays.items()}
    return arrays


def unbatch(encoding: BatchEncoding) -> BatchEncoding:
    """The single row of a one-row list-valued batch, as flat lists (HF's single-text form)."""
    return BatchEncoding({name: value[0] for name, value in encoding.items()}, encoding.encodings)
