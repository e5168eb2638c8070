"""`ScalarMix`: ELMo's task-trained mix of a model's layers (Peters et al. 2018, Eq. 1).

    mix = gamma * sum_j softmax(s)_j * h_j

with one scalar s_j per layer (`scalar_parameters`, 0 at the start: uniform weights) and a
scale `gamma` (1 at the start), AllenNLP's names and layout. With `do_layer_norm` each
layer is first normalised over its real positions (AllenNLP's masked layer norm: one mean
and variance over every real position and feature of the layer, no learned affine).
Shared: ELMo's features and the weighted sum of a BERT's hidden states use it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from bertkit.errors import BertkitError


class ScalarMix(nn.Module):
    def __init__(self, mixture_size: int, do_layer_norm: bool = False, initial_scalar_parameters=None,
                 trainable: bool = True):
        super().__init__()
        if mixture_size < 1:
            raise BertkitError(f"mixture_size: must be at least 1, got {mixture_size}")
        initial = [0.0] * mixture_size if initial_scalar_parameters is None else list(initial_scalar_parameters)
        if len(initial) != mixture_size:
            raise BertkitError(f"initial_scalar_parameters: expected {mixture_size} values, got {len(initial)}")
        self.mixture_size = mixture_size
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = nn.ParameterList(
            nn.Parameter(torch.tensor([value]), requires_grad=trainable) for value in initial)
        self.gamma = nn.Parameter(torch.tensor([1.0]), requires_grad=trainable)

    def weights(self) -> torch.Tensor:
        """(mixture_size,) softmax(s)."""
        return torch.softmax(torch.cat(list(self.scalar_parameters)), dim=0)

    def forward(self, tensors: Sequence[torch.Tensor] | torch.Tensor, mask: torch.Tensor | None = None,
                layer_dim: int = 0) -> torch.Tensor:
        """`tensors`: a sequence of mixture_size tensors (B, T, D), or one tensor holding them
        along `layer_dim`; `mask` (B, T), 1 on real positions (needed with do_layer_norm).
        Returns (B, T, D)."""
        if isinstance(tensors, torch.Tensor):
            tensors = tensors.unbind(layer_dim)
        if len(tensors) != self.mixture_size:
            raise BertkitError(f"ScalarMix: {len(tensors)} layers given, {self.mixture_size} expected")
        weights = self.weights().to(tensors[0].dtype)
        if self.do_layer_norm:
            if mask is None:
                raise BertkitError("ScalarMix: do_layer_norm needs the mask of real positions")
            tensors = [_masked_layer_norm(t, mask) for t in tensors]
        mixed = sum(w * t for w, t in zip(weights, tensors))
        return self.gamma.to(mixed.dtype) * mixed

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        old = state_dict.pop(prefix + "scalar_weights", None)  # feature taggers saved before (one vector)
        if old is not None:
            for index, value in enumerate(old.reshape(-1)):
                state_dict[f"{prefix}scalar_parameters.{index}"] = value.reshape(1).clone()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def _masked_layer_norm(tensor: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """(B, T, D) normalised by the mean and variance over its real positions' values."""
    broadcast = mask.to(tensor.dtype).unsqueeze(-1)  # (B, T, 1)
    count = broadcast.sum() * tensor.shape[-1]
    mean = (tensor * broadcast).sum() / count
    variance = (((tensor - mean) * broadcast) ** 2).sum() / count
    return (tensor - mean) / torch.sqrt(variance + eps)
