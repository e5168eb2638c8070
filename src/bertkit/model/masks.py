"""Attention masks every decoder and encoder-decoder builds the same way: which keys a query may
see (causal over the cached and new positions, real tokens only), as bool "keep" tensors, and
their additive form for `F.scaled_dot_product_attention`."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def may_pad(attention_mask: torch.Tensor) -> bool:
    """Whether a 1/0 attention mask may hold padding (then a mask is built). Checked on the CPU,
    where it is free; on an accelerator the check would make the host wait for the device at
    every decoding step, so padding is assumed there (a mask of ones is exact), and while
    compiling (the read would break the graph)."""
    return attention_mask.device.type != "cpu" or torch.compiler.is_compiling() or not bool(attention_mask.all())


def additive_mask(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool keep (any shape) -> float: 0 where kept, the dtype's minimum elsewhere (finite,
    so a query that sees no key gets a uniform row rather than NaN, as transformers)."""
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)


def causal_keep(query_length: int, past_length: int, device: torch.device) -> torch.Tensor:
    """(Tq, Tp + Tq) bool: key k visible to the query at position past + t when k <= past + t."""
    keys = torch.arange(past_length + query_length, device=device)
    queries = torch.arange(past_length, past_length + query_length, device=device)
    return keys[None, :] <= queries[:, None]


def self_attention_keep(attention_mask: torch.Tensor | None, query_length: int, past_length: int,
                        device: torch.device, causal: bool) -> torch.Tensor | None:
    """(B or 1, 1, Tq, Tp + Tq) bool keys each query may see, None when it sees every key: causal
    (a decoder; one new position sees every cached key, so nothing is masked then) and padding
    where `attention_mask` (B, Tp + Tq), or (B, Tq) for the new positions only, has 0s. The caller
    passes a mask only when it may pad (`may_pad`, checked once per forward), else None."""
    keep = causal_keep(query_length, past_length, device)[None, None] if causal and query_length > 1 else None
    if attention_mask is not None:
        if attention_mask.shape[-1] == query_length and past_length:  # a mask of the new positions only
            attention_mask = F.pad(attention_mask, (past_length, 0), value=1)
        padding = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, Tk)
        keep = padding if keep is None else keep & padding
    return keep
