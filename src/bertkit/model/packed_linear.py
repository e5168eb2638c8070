"""Linear layers on oneDNN's packed weights while generating (CPU, float32, no autograd).

A decoding step multiplies a few rows (the batch, or batch x beams: 8-32) by every weight
matrix of the decoder and by the 32k-word vocabulary head. For such shapes MKL's GEMM
behind F.linear runs at a fraction of the machine's rate; oneDNN's linear on a weight
reordered once into its blocked layout (what torch.compile's CPU freezing uses) takes
2-4x less time (docs/benchmarks.md, T5 generation). It is the same float32 arithmetic in
another summation order, so results differ from F.linear's by rounding (~1e-6 relative).

The packed copies are made on a weight's second use inside `packed_weights()` (a call
that uses a weight once, such as one decoding step, packs nothing) and dropped when it
ends: `generate` runs its steps inside one, during which the weights cannot change (an
optimizer's fused in-place step does not even bump a tensor's version counter, so copies
kept across calls could go stale). Outside it, and for training (autograd recording),
other devices and dtypes, int8-quantized layers and a torch build without oneDNN, these
functions are F.linear / the layer itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

_STATE = threading.local()  # .cache: {id(weight): (weight, packed)} inside packed_weights(), else absent/None
_ONEDNN = {"usable": True}  # False after a failure: the plain path from then on


@contextmanager
def packed_weights(cache: dict | None = None) -> Iterator[None]:
    """Within: `linear` / `packed_matmul` multiply by packed copies of the weights, made on
    second use and dropped at exit. The weights must not change inside. Nested: one cache.
    `cache` (a dict the caller keeps, empty at first): the copies are kept in it and used
    again by the next context given it — for weights that never change between the
    contexts (a server's model: bertkit.serving.generation)."""
    previous = getattr(_STATE, "cache", None)
    _STATE.cache = previous if previous is not None else ({} if cache is None else cache)
    try:
        yield
    finally:
        _STATE.cache = previous


@contextmanager
def plain_weights() -> Iterator[None]:
    """Within: F.linear even inside `packed_weights()` (a server's encoder run between the
    decoding steps of a running batch, as `generate` runs its encoder outside)."""
    previous = getattr(_STATE, "cache", None)
    _STATE.cache = None
    try:
        yield
    finally:
        _STATE.cache = previous


def linear(x: torch.Tensor, layer: nn.Module) -> torch.Tensor:
    """layer(x) for an nn.Linear (..., in) -> (..., out), on the packed weight where it applies."""
    if type(layer) is not nn.Linear:  # e.g. an int8 dynamically quantized layer: its own kernel
        return layer(x)
    return packed_matmul(x, layer.weight, layer.bias)


def packed_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias): x (..., in), weight (out, in) -> (..., out)."""
    cache = getattr(_STATE, "cache", None)
    if cache is None or not _applies(x, weight, bias):
        return F.linear(x, weight, bias)
    entry = cache.get(id(weight))
    if entry is None or entry[0] is not weight:  # first use: plain, so that a one-step call packs nothing
        cache[id(weight)] = (weight, None)
        return F.linear(x, weight, bias)
    try:
        if entry[1] is None:  # second use: pack (a reorder costs ~1-2 plain calls; each later use gains 2-4x)
            entry = cache[id(weight)] = (weight, torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None))
        return torch.ops.mkldnn._linear_pointwise(x, entry[1], None if bias is None else bias.detach(), "none", [], "")
    except (RuntimeError, AttributeError, NotImplementedError):  # a build without these kernels
        _ONEDNN["usable"] = False
        return F.linear(x, weight, bias)


def _applies(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    if not _ONEDNN["usable"] or not torch.backends.mkldnn.is_available():
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        return False
    return (x.device.type == "cpu" and weight.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32 and x.dim() >= 2 and weight.dim() == 2)
