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

from bertkit.errors import BertkitError
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


def stack_sequences(ids: Sequence[Sequence[int]], types: Sequence[Sequence[int]],
                    pad_token_id: int) -> dict[str, np.ndarray]:
    """G token sequences of one feature (a question's choices, a pair's two orders) -> `input_ids`
    and `token_type_ids` (G, L) int32, padded with the pad id / 0 to the longest (L), and
    `lengths` (G,) int32 real tokens: the layout `collate_groups` batches."""
    lengths = np.asarray([len(row) for row in ids], dtype=np.int32)  # (G,)
    input_ids = np.full((len(ids), int(lengths.max())), pad_token_id, dtype=np.int32)  # (G, L)
    token_type_ids = np.zeros_like(input_ids)
    for g, (row, row_types) in enumerate(zip(ids, types, strict=True)):
        input_ids[g, : lengths[g]] = row
        token_type_ids[g, : lengths[g]] = row_types
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "lengths": lengths}


def collate_groups(
    features: Sequence[dict[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = 8, what: str = "sequences"
) -> dict[str, torch.Tensor]:
    """Batch features that hold G sequences each (a multiple-choice question's choices, a pair in
    both orders): `input_ids` and `token_type_ids` (G, L) padded, `lengths` (G,) real tokens.

    Returns (B, G, T) input_ids / token_type_ids / attention_mask int64 (T = the longest
    sequence in the batch, rounded up), through `collate` on the B * G flattened sequences, and
    every other per-feature value (labels, ...) as a (B,) tensor. All features must hold the
    same G (`what` names the sequences in the error)."""
    if not features:
        raise ValueError("collate needs at least one example")
    counts = {len(f["lengths"]) for f in features}
    if len(counts) > 1:
        raise BertkitError(f"a batch mixes examples with {sorted(counts)} {what}; use one count per batch")
    rows = [{"input_ids": f["input_ids"][g, :n], "token_type_ids": f["token_type_ids"][g, :n]}
            for f in features for g, n in enumerate(f["lengths"])]
    flat = collate(rows, pad_token_id, pad_to_multiple_of)  # (B * G, T) each
    count = counts.pop()
    batch = {key: value.view(len(features), count, -1) for key, value in flat.items()}  # (B, G, T)
    for key in features[0]:
        if key not in ("input_ids", "token_type_ids", "lengths"):  # labels and other per-example values: (B,)
            values = np.asarray([f[key] for f in features])
            batch[key] = torch.from_numpy(values.astype(_dtype(values.dtype)))
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
