"""Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer"), in transformers' half-split layout.

A query or key vector x of size d at position p is rotated pair by pair: its i-th and (i + d/2)-th
components by the angle p * theta^(-2i/d). The attention score of a query at p and a key at q then
depends on p - q only. transformers' layout (the one its checkpoints' Q/K weights are trained for)
pairs the two halves of the head, not neighbouring components: x * cos + rotate_half(x) * sin with
cos, sin of the angles repeated over both halves. Nothing here is learned: no state-dict keys.
"""

from __future__ import annotations

import torch


def inverse_frequencies(head_dim: int, theta: float, device: torch.device | None = None) -> torch.Tensor:
    """(d/2,) float32: theta^(-2i/d), i = 0 .. d/2 - 1."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))


def rotary_tables(position_ids: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """position_ids (...,) int -> (cos, sin), each (..., d) float32: the angles p * theta^(-2i/d) over
    both halves of the head."""
    angles = position_ids[..., None].float() * inverse_frequencies(head_dim, theta, position_ids.device)  # (..., d/2)
    angles = torch.cat((angles, angles), dim=-1)  # (..., d)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): (-x2, x1) for the halves x1, x2."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., T, d) queries or keys, cos / sin broadcastable to it (e.g. (T, d), (B, 1, T, d)) -> x
    rotated, in x's dtype (computed in float32, as transformers)."""
    xf = x.float()
    return (xf * cos + rotate_half(xf) * sin).to(x.dtype)
