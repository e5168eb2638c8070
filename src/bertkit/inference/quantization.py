"""int8 quantization of a model's linear layers (bertkit.inference.precision), by CPU class.

Two schemes, both int8 weights per output channel and activations quantized at run time
(no calibration data), chosen by what the CPU's int8 instructions can do (`cpu_class`):

- "vnni" (AVX-512 VNNI or AVX-VNNI): `Int8Linear`, torch's dynamic linear (fbgemm) with
  the activations' full 8 bits, one scale per call. VNNI sums u8*s8 products in 32 bits.
- every other x86 CPU ("avx512" without VNNI, "avx2"): `RowwiseInt8Linear`. These sum
  pairs of u8*s8 products in 16 bits with saturation (vpmaddubsw), which is why torch's
  dynamic linear keeps only 7 bits of activation there (`reduce_range`), and one scale
  for the whole call lets the few tokens with large activations set the step for all:
  on all-MiniLM-L6-v2 sentences' cosine to fp32 fell to 0.97 (5th percentile), one word's
  to 0.87. Here the weights keep 7 bits instead ([-63, 63]: 2 * 255 * 63 < 2^15, so no pair
  sum saturates) and the activations all 8, with one scale and zero point per token
  (row); the matmul is oneDNN's int8 GEMM (`torch.ops.onednn.qlinear_pointwise`, what
  torch.compile's x86 int8 path calls), and the rows' scales and zero points are applied
  to its float32 output. Sentences' cosine rises to 0.997 (docs/export.md, "int8 by CPU
  class").

A CPU of another class, or a torch build without oneDNN, gets `Int8Linear` with 7-bit
activations (torch's safe default).
"""

from __future__ import annotations

import functools
import warnings

import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

CPU_CLASSES = ("vnni", "avx512", "avx2", "other")
ROWWISE_WEIGHT_MAX = 63  # 7-bit weights: two u8 x s7 products sum below 2^15 (no vpmaddubsw saturation)


@functools.cache
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (Linux's /proc/cpuinfo; empty where unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_class(flags: frozenset[str] | set[str] | None = None) -> str:
    """The int8 class of a CPU (`flags`: its feature flags; None: this one's): "vnni"
    (AVX-512 VNNI or AVX-VNNI: 32-bit sums of u8*s8 products), "avx512" (AVX-512 without
    VNNI), "avx2", or "other" (flags unknown, or not x86)."""
    flags = cpu_flags() if flags is None else flags
    if flags & {"avx512_vnni", "avx_vnni"}:
        return "vnni"
    if "avx512bw" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "other"


def cpu_has_vnni() -> bool:
    """Whether this CPU has AVX-512 VNNI or AVX-VNNI (False where unknown)."""
    return cpu_class() == "vnni"


def int8_scheme(cls: str | None = None) -> str:
    """The int8 linear a CPU class gets: "dynamic" (`Int8Linear`) or "rowwise"
    (`RowwiseInt8Linear`: a CPU without VNNI, where oneDNN's int8 kernels are in torch)."""
    cls = cpu_class() if cls is None else cls
    if cls in ("avx512", "avx2") and _onednn_int8_available():
        return "rowwise"
    return "dynamic"


@functools.cache
def _onednn_int8_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.onednn, "qlinear_pointwise")


class Int8Linear(DynamicQuantizedLinear):
    """torch's dynamic int8 linear (int8 weights per output channel, uint8 activations
    quantized per call) with the activations' full 8 bits where the CPU has VNNI: torch's
    own module always keeps 7 (`reduce_range`), which AVX2's 16-bit saturating pair sums
    need and VNNI's 32-bit sums do not."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self._packed_params._packed_params
        return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=not cpu_has_vnni()).to(x.dtype)


class RowwiseInt8Linear(nn.Module):
    """An nn.Linear on int8: weights per output channel in 7 bits, activations per row
    (token) in 8 bits with their own scale and zero point, oneDNN's int8 GEMM, float32 out.

    With a row x = s * (q - zp): y = s * (q @ Wq^T) * w_scale - (s * zp) (x) colsum(Wq *
    w_scale) + bias; the last two terms are one rank-2 update of the GEMM's output."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        scale = (weight.abs().amax(1) / ROWWISE_WEIGHT_MAX).clamp_min(torch.finfo(torch.float32).tiny)
        quantized = torch.round(weight / scale[:, None]).clamp(-ROWWISE_WEIGHT_MAX, ROWWISE_WEIGHT_MAX)
        self.register_buffer("weight_int8", quantized.to(torch.int8), persistent=False)
        self.register_buffer("weight_scale", scale, persistent=False)
        self.register_buffer("weight_zero_point", torch.zeros(self.out_features, dtype=torch.int64), persistent=False)
        self._packed = torch.ops.onednn.qlinear_prepack(self.weight_int8, None)
        bias = linear.bias.detach().float() if linear.bias is not None else torch.zeros(self.out_features)
        # the rank-2 update's rows: the dequantized weights' sum per output, and the bias
        self.register_buffer("row_terms", torch.stack([(quantized * scale[:, None]).sum(1), bias]), persistent=False)

    def weight(self) -> torch.Tensor:
        """The weight the kernel multiplies by (its 7-bit values dequantized), float32
        (out, in); a method, as on torch's quantized linears."""
        return self.weight_int8.float() * self.weight_scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype, shape = x.dtype, x.shape
        rows = x.reshape(-1, shape[-1]).float()
        if rows.shape[0] == 0:
            return x.new_zeros(*shape[:-1], self.out_features)
        return self._matmul(rows).view(*shape[:-1], self.out_features).to(dtype)

    def _matmul(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, in) float32 -> (N, out) float32. The quantization is plain elementwise ops:
        torch's quantize_per_channel and aminmax(dim=1) took 3x the int8 GEMM's time here."""
        low = rows.amin(1).clamp_(max=0)  # the range holds 0, so zeros stay exact
        high = rows.amax(1).clamp_(min=0)
        scale = ((high - low) / 255).clamp_(min=torch.finfo(torch.float32).tiny)
        zero_point = torch.round(-low / scale)
        quantized = torch.addcmul(zero_point[:, None], rows, scale.reciprocal()[:, None]).round_().clamp_(0, 255)
        out = torch.ops.onednn.qlinear_pointwise(quantized.to(torch.uint8), 1.0, 0, self._packed, self.weight_scale,
                                                 self.weight_zero_point, None, 1.0, 0, torch.float32, "none", [], "")
        out.mul_(scale[:, None])
        return out.addmm_(torch.stack([-scale * zero_point, torch.ones_like(scale)], 1), self.row_terms)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per row (oneDNN)"


def quantize_linear_layers(model: nn.Module, scheme: str | None = None) -> nn.Module:
    """Every nn.Linear of `model` as an int8 linear of `scheme` ("dynamic", "rowwise";
    None: this CPU's, `int8_scheme`), in place; returns the model."""
    scheme = int8_scheme() if scheme is None else scheme
    if scheme == "rowwise":
        return _replace_linears(model, RowwiseInt8Linear)
    with warnings.catch_warnings():  # torch's notices that this API moves to torchao: not the user's concern
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                mapping={nn.Linear: Int8Linear}, inplace=True)


def _replace_linears(module: nn.Module, make) -> nn.Module:
    """Every nn.Linear under `module` replaced by make(linear), in place."""
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, make(child))
        else:
            _replace_linears(child, make)
    return module
