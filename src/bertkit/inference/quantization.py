"""int8 dynamic quantization of a model's linear layers (bertkit.inference.precision)."""

from __future__ import annotations

import functools
import warnings

import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic


class Int8Linear(DynamicQuantizedLinear):
    """torch's dynamic int8 linear (int8 weights per output channel, uint8 activations
    quantized per call) with the activations' full 8 bits where the CPU has VNNI: torch's
    own module always keeps 7 (`reduce_range`), which AVX2's 16-bit saturating pair sums
    need and VNNI's 32-bit sums do not."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self._packed_params._packed_params
        return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=not cpu_has_vnni()).to(x.dtype)


def quantize_linear_layers(model: torch.nn.Module) -> torch.nn.Module:
    """Every nn.Linear of `model` as an `Int8Linear`, in place; returns the model."""
    with warnings.catch_warnings():  # torch's notices that this API moves to torchao: not the user's concern
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                mapping={torch.nn.Linear: Int8Linear}, inplace=True)


@functools.cache
def cpu_has_vnni() -> bool:
    """Whether this CPU has AVX-512 VNNI or AVX-VNNI (Linux's /proc/cpuinfo; False where unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_vnni", "avx_vnni"})
    except OSError:
        pass
    return False
