"""`BatchEncoding`: the tokenizer's output, and its assembly (with padding) from `tokenizers.Encoding`s.

Field layout (as Hugging Face fast tokenizers return it), B rows, T tokens per row:
  input_ids, token_type_ids, attention_mask   (B, T) ints
  special_tokens_mask                          (B, T) ints, 1 at [CLS]/[SEP]/[PAD]...
  offset_mapping                               (B, T, 2) character spans (start, end) into
                                               the row's own text; (0, 0) for special tokens
  overflow_to_sample_mapping                   (B,) index of the input text of each row
With `return_tensors=None` the fields are Python lists (rows may differ in length when
not padded); "np" gives int64 numpy arrays, "pt" int64 torch tensors.

Padding happens here rather than in Rust: the Rust encodings stay unpadded, so only the
real tokens cross into Python, and pad runs are built by list repetition (lists) or one
vectorized fill (arrays). Measured on 2 cores this is faster than reading back rows the
Rust padder filled (see docs/benchmarks.md). The result equals Rust's/HF's padding
(pad id, type id 0, mask 0, special mask 1, offsets (0, 0), word/sequence id None), on
the right, or on the left for tokenizers whose config says `padding_side="left"` (XLNet).
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Encoding

from bertkit.errors import BertkitError


@dataclass(frozen=True)
class Padding:
    """How to pad a batch: to the longest row or to `max_length`, then up to a multiple."""

    mode: str  # "longest" | "max_length"
    max_length: int
    pad_id: int
    pad_token: str
    pad_to_multiple_of: int | None = None
    side: str = "right"  # "left": pads before the tokens (XLNet), the attention mask 0s first

    def width(self, lengths: Sequence[int]) -> int:
        """The padded row length T (rows already longer are left as they are, as in Rust)."""
        width = max(lengths, default=0) if self.mode == "longest" else self.max_length
        multiple = self.pad_to_multiple_of
        if multiple and width % multiple:
            width += multiple - width % multiple
        return width


class BatchEncoding(dict):
    """Model inputs by name: `enc["input_ids"]` or `enc.input_ids`.

    `encodings` keeps the underlying (unpadded) `tokenizers.Encoding` of every row;
    `tokens(i)`, `word_ids(i)` and `sequence_ids(i)` give the padded row's view, as in HF.
    """

    def __init__(
        self,
        data: dict[str, Any],
        encodings: list[Encoding] | None = None,
        row_widths: list[int] | None = None,
        pad_token: str | None = None,
        pad_left: bool = False,
    ):
        super().__init__(data)
        self.encodings = encodings
        self._row_widths = row_widths
        self._pad_token = pad_token
        self._pad_left = pad_left

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private attributes not yet set (e.g. while unpickling)
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def _row(self, row: int) -> tuple[Encoding, int]:
        """The encoding of `row` and how many padding positions follow it."""
        if not self.encodings:
            raise BertkitError("this BatchEncoding carries no encodings (tokens/word_ids/sequence_ids unavailable)")
        if not -len(self.encodings) <= row < len(self.encodings):
            raise BertkitError(f"row={row} is out of range for a batch of {len(self.encodings)}")
        encoding = self.encodings[row]
        gap = self._row_widths[row] - len(encoding) if self._row_widths else 0
        return encoding, gap

    def _padded(self, values: list[Any], gap: int, fill: Any) -> list[Any]:
        return [fill] * gap + values if self._pad_left else values + [fill] * gap

    def tokens(self, row: int = 0) -> list[str]:
        """The token strings of `row` (special and padding tokens included)."""
        encoding, gap = self._row(row)
        return self._padded(encoding.tokens, gap, self._pad_token)

    def word_ids(self, row: int = 0) -> list[int | None]:
        """Per token of `row`: index of the word it came from (None for special and padding tokens)."""
        encoding, gap = self._row(row)
        return self._padded(encoding.word_ids, gap, None)

    def sequence_ids(self, row: int = 0) -> list[int | None]:
        """Per token of `row`: 0 for text A, 1 for text B, None for special/padding tokens."""
        encoding, gap = self._row(row)
        return self._padded(encoding.sequence_ids, gap, None)

    def to(self, device: Any) -> BatchEncoding:
        """A copy with every torch tensor moved to `device` (other values unchanged)."""
        moved = {name: (value.to(device) if hasattr(value, "to") else value) for name, value in self.items()}
        return BatchEncoding(moved, self.encodings, self._row_widths, self._pad_token, self._pad_left)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many int-only lists.

    Tens of thousands of fresh lists trigger repeated collections that scan every live
    object (about half the assembly time for a 10k batch); lists of ints cannot form
    cycles, so nothing is left uncollected. The previous GC state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def assemble(
    encodings: Sequence[Encoding],
    *,
    return_tensors: str | None,
    padding: Padding | None,
    zero_type_ids: bool,
    offsets: list[list[tuple[int, int]]] | None = None,
    sample_mapping: list[int] | None = None,
    special_tokens_mask: bool = False,
) -> BatchEncoding:
    """Collect (and pad) the fields of `encodings` into a `BatchEncoding` of lists, numpy or torch.

    Reading a field back from Rust costs a Python list per row, so constant fields are
    built directly: token_type_ids when `zero_type_ids` (single sequences whose
    post-processor gives type id 0 everywhere) and the attention mask always.
    """
    with _cyclic_gc_paused():
        return _assemble(
            encodings, return_tensors, padding, zero_type_ids, offsets, sample_mapping, special_tokens_mask
        )


def _assemble(
    encodings: Sequence[Encoding],
    return_tensors: str | None,
    padding: Padding | None,
    zero_type_ids: bool,
    offsets: list[list[tuple[int, int]]] | None,
    sample_mapping: list[int] | None,
    special_tokens_mask: bool,
) -> BatchEncoding:
    input_ids = [e.ids for e in encodings]
    type_ids = None if zero_type_ids else [e.type_ids for e in encodings]
    special = [e.special_tokens_mask for e in encodings] if special_tokens_mask else None
    data, widths = _padded_fields(input_ids, type_ids, special, offsets, padding, return_tensors)
    if sample_mapping is not None:
        data["overflow_to_sample_mapping"] = (
            sample_mapping
            if return_tensors is None
            else _as_tensor(np.asarray(sample_mapping, dtype=np.int64), return_tensors)
        )  # (B,)
    return _batch(data, list(encodings), widths, padding)


def _batch(
    data: dict[str, Any], encodings: list[Encoding] | None, widths: list[int], padding: Padding | None
) -> BatchEncoding:
    """The BatchEncoding of padded `data`, remembering the pad token and side for tokens(i) & co."""
    if padding is None:
        return BatchEncoding(data, encodings, widths)
    return BatchEncoding(data, encodings, widths, padding.pad_token, padding.side == "left")


def pad_encoded(
    features: Mapping[str, Sequence[Sequence[int]]], padding: Padding | None, return_tensors: str | None
) -> BatchEncoding:
    """Pad rows encoded earlier (e.g. regrouped into new batches) like `assemble` pads.

    `features["input_ids"]` is required; `token_type_ids` and `special_tokens_mask` are
    padded when present (type ids default to 0); the attention mask is rebuilt.
    """
    if "input_ids" not in features:
        raise BertkitError("pad: the features have no 'input_ids'")

    def rows(name: str) -> list[list[int]] | None:
        value = features.get(name)
        if value is None:
            return None
        value = value.tolist() if hasattr(value, "tolist") else value
        return [list(row) for row in value]

    input_ids = rows("input_ids")
    type_ids = rows("token_type_ids")
    special = rows("special_tokens_mask")
    for name, other in (("token_type_ids", type_ids), ("special_tokens_mask", special)):
        if other is not None and [len(r) for r in other] != [len(r) for r in input_ids]:
            raise BertkitError(f"pad: {name} rows differ in length from input_ids")
    with _cyclic_gc_paused():
        data, widths = _padded_fields(input_ids, type_ids, special, None, padding, return_tensors)
    return _batch(data, None, widths, padding)


def _padded_fields(
    input_ids: list[list[int]],
    type_ids: list[list[int]] | None,
    special: list[list[int]] | None,
    offsets: list[list[tuple[int, int]]] | None,
    padding: Padding | None,
    return_tensors: str | None,
) -> tuple[dict[str, Any], list[int]]:
    """The model-input fields, padded; and each row's padded length. `type_ids=None`: all 0."""
    lengths = [len(row) for row in input_ids]
    width = padding.width(lengths) if padding is not None else 0
    widths = [max(n, width) for n in lengths]
    if return_tensors is not None:
        return _arrays(input_ids, lengths, widths, padding, type_ids, special, offsets, return_tensors), widths

    left = padding is not None and padding.side == "left"

    def padded(rows: list[list[Any]], fill: Any) -> list[list[Any]]:
        if left:
            return [[fill] * (w - n) + row for row, n, w in zip(rows, lengths, widths, strict=True)]
        return [row + [fill] * (w - n) for row, n, w in zip(rows, lengths, widths, strict=True)]

    data = {
        "input_ids": padded(input_ids, padding.pad_id if padding is not None else 0),
        "token_type_ids": [[0] * w for w in widths] if type_ids is None else padded(type_ids, 0),
        "attention_mask": _mask_rows(lengths, width, left),
    }
    if special is not None:
        data["special_tokens_mask"] = padded(special, 1)
    if offsets is not None:
        data["offset_mapping"] = padded(offsets, (0, 0))
    return data, widths


def _mask_rows(lengths: list[int], width: int, left: bool = False) -> list[list[int]]:
    """Attention-mask rows: n ones then zeros up to `width`, or (`left`) the zeros first
    (rows longer than `width`: all ones)."""
    if left:
        template = [0] * width + [1] * width
        return [template[n : width + n] if n <= width else [1] * n for n in lengths]
    template = [1] * width + [0] * width  # each row is one slice of it: a single allocation
    return [template[width - n : 2 * width - n] if n <= width else [1] * n for n in lengths]


def _arrays(
    input_ids: list[list[int]],
    lengths: list[int],
    widths: list[int],
    padding: Padding | None,
    type_ids: list[list[int]] | None,
    special: list[list[int]] | None,
    offsets: list[list[tuple[int, int]]] | None,
    return_tensors: str,
) -> dict[str, Any]:
    """(B, T) int64 fields (offsets (B, T, 2)) filled row-major through one boolean mask."""
    if len(set(widths)) > 1:
        raise BertkitError(
            f"return_tensors={return_tensors!r} needs rows of equal length, got lengths "
            f"{min(widths)}..{max(widths)}: pass padding=True (or truncation with padding='max_length')"
        )
    shape = (len(input_ids), widths[0] if widths else 0)  # (B, T)
    row_lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 1)  # (B, 1)
    if padding is not None and padding.side == "left":
        real = np.arange(shape[1]) >= shape[1] - row_lengths  # (B, T) True at real tokens
    else:
        real = np.arange(shape[1]) < row_lengths
    n_real = sum(lengths)

    def filled(rows: list[list[int]], pad_value: int) -> np.ndarray:
        array = np.full(shape, pad_value, dtype=np.int64)
        array[real] = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=n_real)
        return array

    data: dict[str, Any] = {
        "input_ids": filled(input_ids, padding.pad_id if padding is not None else 0),
        "token_type_ids": np.zeros(shape, dtype=np.int64) if type_ids is None else filled(type_ids, 0),
        "attention_mask": real.astype(np.int64),
    }
    if special is not None:
        data["special_tokens_mask"] = filled(special, 1)
    if offsets is not None:
        spans = np.zeros((*shape, 2), dtype=np.int64)  # (B, T, 2)
        spans[real] = np.asarray(list(itertools.chain.from_iterable(offsets)), dtype=np.int64).reshape(-1, 2)
        data["offset_mapping"] = spans
    return {name: _as_tensor(value, return_tensors) for name, value in data.items()}


def _as_tensor(array: np.ndarray, return_tensors: str) -> Any:
    if return_tensors == "pt":
        import torch

        return torch.from_numpy(array)
    return array


def unbatch(encoding: BatchEncoding) -> BatchEncoding:
    """The single row of a one-row list-valued batch, as flat lists (HF's single-text form)."""
    return BatchEncoding(
        {name: value[0] for name, value in encoding.items()},
        encoding.encodings,
        encoding._row_widths,
        encoding._pad_token,
        encoding._pad_left,
    )
