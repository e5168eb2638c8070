"""Batch examples of different lengths into padded tensors (the DataLoader's collate_fn).

Every per-token array is padded on the right to the longest example, rounded up to a
multiple of `pad_to_multiple_of` (8 by default: tensor-core friendly shapes, and fewer
distinct shapes to compile for). Each key is filled into one preallocated numpy array
and handed to torch with `torch.from_numpy` (no copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bertkit.model.bert.modeling import IGNORE_INDEX

# Pad value of the per-token keys that have a meaning; other per-token keys pad with 0.
PAD_VALUES = {"token_type_ids": 0, "labels": IGNORE_INDEX, "attention_mask": 0}


def collate(
    examples: Sequence[dict[str, np.ndarray | int]], pad_token_id: int, pad_to_multiple_of: int | None = 8
) -> dict[str, torch.Tensor]:
    """Pad a list of examples to the longest (rounded up to pad_to_multiple_of) and stack.

    examples: dicts with the same keys; `input_ids` (T_i,) int is required. Array keys are
        per token, (T_i,) or (T_i, ...), and pad with: input_ids -> pad_token_id,
        token_type_ids -> 0, labels -> -100, anything else -> 0.
    Returns (B, T) tensors, T = max T_i rounded up; `attention_mask` (B, T) int64 (1 real
    token, 0 padding) is built unless the examples carry one. Scalar keys
    (next_sentence_label, label, ...) become (B,) tensors. Integer data is int64, floating
    data float32, booleans stay bool.
    """
    if not examples:
        raise ValueError("collate needs at least one example")
    if pad_to_multiple_of is not None and (
        isinstance(pad_to_multiple_of, bool) or not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1
    ):
        raise ValueError(f"pad_to_multiple_of={pad_to_multiple_of!r} must be a positive integer or None")
    keys = list(examples[0])
    if "input_ids" not in examples[0]:
        raise ValueError(f"examples need an 'input_ids' array; got keys {keys}")
    for i, example in enumerate(examples):
        if example.keys() != examples[0].keys():
            raise ValueError(f"example {i} has keys {sorted(example)}, example 0 has {sorted(examples[0])}")

    lengths = [len(example["input_ids"]) for example in examples]
    width = max(lengths)
    if pad_to_multiple_of is not None:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of  # round up
    batch: dict[str, torch.Tensor] = {}
    for key in keys:
        values = [example[key] for example in examples]
        first = np.asarray(values[0])
        if first.ndim == 0:
            batch[key] = torch.from_numpy(np.array(values, dtype=_dtype(first.dtype)))  # (B,)
            continue
        fill = pad_token_id if key == "input_ids" else PAD_VALUES.get(key, 0)
        out = np.full((len(values), width, *first.shape[1:]), fill, dtype=_dtype(first.dtype))  # (B, T, ...)
        for row, (value, length) in enumerate(zip(values, lengths, strict=True)):
            if len(value) != length:
                raise ValueError(f"example {row}: {key!r} has {len(value)} positions, input_ids has {length}")
            out[row, :length] = value
        batch[key] = torch.from_numpy(out)
    if "attention_mask" not in batch:
        positions = np.arange(width)  # (T,)
        mask = (positions[None, :] < np.asarray(lengths)[:, None]).astype(np.int64)  # (B, T)
        batch["attention_mask"] = torch.from_numpy(mask)
    return batch


def _dtype(dtype: np.dtype) -> Any:
    """int64 for integers, float32 for floats, bool for bools."""
    if dtype == np.bool_:
        return np.bool_
    if np.issubdtype(dtype, np.integer):
        return np.int64
    if np.issubdtype(dtype, np.floating):
        return np.float32
    raise TypeError(f"cannot collate values of dtype {dtype}")
