"""Attention over packed rows, no padding at all: nested jagged tensors through SDPA.

The unpadded encoder path (bertkit.model.unpad) runs every row-wise operation on the real
tokens only, but attention there still scatters Q, K and V into padded (B, heads, T, d)
tensors. On a GPU the packed rows can go to attention as they are: viewed as a nested
tensor with jagged layout (`torch.nested.nested_tensor_from_jagged` over the rows and the
sequences' offsets), `F.scaled_dot_product_attention` dispatches to the flash /
memory-efficient variable-length kernels, which attend within each sequence and never
touch a padding position; attention dropout is supported (FlexAttention has none, and
BERT's recipe keeps 0.1). torch-native, nothing to install.

Where it runs: `VARLEN_DEVICES` (CUDA). On a CPU the same call runs torch's reference
path (one product per sequence), slower than the padded product bertkit's CPU path is
tuned for, so the CPU keeps the padded attention; the tests run this route on the CPU
(`varlen_route(True)`) to check it against the padded path.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch
import torch.nn.functional as F

VARLEN_DEVICES = {"cuda"}


def use_varlen(device: torch.device) -> bool:
    """Whether packed attention on `device` goes through the jagged route."""
    return device.type in VARLEN_DEVICES


@contextlib.contextmanager
def varlen_route(enabled: bool = True, device_type: str = "cpu") -> Iterator[None]:
    """Turn the jagged route on (or off) for `device_type` within the block (tests, benchmarks)."""
    had = device_type in VARLEN_DEVICES
    (VARLEN_DEVICES.add if enabled else VARLEN_DEVICES.discard)(device_type)
    try:
        yield
    finally:
        (VARLEN_DEVICES.add if had else VARLEN_DEVICES.discard)(device_type)


def packed_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, offsets: torch.Tensor,
                     num_heads: int, dropout_p: float = 0.0) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d)) V within each sequence of packed rows.

    query, key, value: (N, heads * d) projections of the real tokens, sequence after
    sequence; offsets: (B + 1,) int64, sequence b's rows are [offsets[b], offsets[b + 1]).
    Returns the context (N, heads * d), rows in the same order."""
    rows, width = query.shape
    head_dim = width // num_heads

    def jagged(x: torch.Tensor) -> torch.Tensor:  # (N, H) -> (B, heads, j, d), no copy
        return torch.nested.nested_tensor_from_jagged(x.view(rows, num_heads, head_dim), offsets).transpose(1, 2)

    with warnings.catch_warnings():  # "prototype stage" notices of the CPU's reference path
        warnings.simplefilter("ignore", UserWarning)
        context = F.scaled_dot_product_attention(jagged(query), jagged(key), jagged(value), dropout_p=dropout_p)
    return context.transpose(1, 2).values().reshape(rows, width)
