"""Model FLOPs utilisation (MFU): the model's FLOPs per second over the device's peak.

The model's FLOPs are counted as the dense model defines them, whatever an implementation
skips (unpadding, the sparse MLM head): per token, 6 x the non-embedding parameters
(forward and backward matrix products) + 12 x layers x hidden x sequence length (the
attention scores and context), as PaLM's appendix B counts them (Chowdhery et al., 2022).
For an encoder-decoder (T5) the tokens are the encoder's and the layers those of both
stacks: an approximation of the same kind. ALBERT with shared layers has no such count
(its parameters are one layer's, applied L times): MFU is left out for it.

The peak is the card's dense (no sparsity) tensor-core rate for the precision, from its
datasheet (`PEAK_TFLOPS`; fp32 means fp32 without TF32, torch's default). A card not in the
table and the CPU have no peak here: MFU is then left out (bench/bench_pretrain_step.py
measures a CPU's fp32 GEMM rate and reports MFU against that instead).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

# (a substring of torch.cuda.get_device_name(), {precision: dense TFLOPS}); the first match wins,
# so the specific names come before the general ones
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "fp32": 51.2}),
    ("H100 NVL", {"bf16": 835.0, "fp16": 835.0, "fp32": 60.0}),
    ("H100", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}),  # SXM (the "80GB HBM3" name)
    ("H200", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}),  # GH200 too
    ("A100", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}),
    ("L40S", {"bf16": 362.0, "fp16": 362.0, "fp32": 91.6}),
    ("L4", {"bf16": 121.0, "fp16": 121.0, "fp32": 30.3}),
    ("V100", {"fp16": 125.0, "fp32": 15.7}),
    ("T4", {"fp16": 65.0, "fp32": 8.1}),
]


@dataclass(frozen=True)
class Peak:
    flops: float  # FLOP/s
    source: str  # what it is, for a report: "NVIDIA H100 80GB HBM3, bf16 dense, 989 TFLOPS (datasheet)"


def device_peak(device: torch.device, precision: str) -> Peak | None:
    """The dense peak of `device` in `precision` (fp32 / bf16 / fp16), or None when unknown
    (the CPU, a card not in the table)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return table_peak(name, precision)


def table_peak(name: str, precision: str) -> Peak | None:
    """The table's peak for a card called `name` in `precision`, or None."""
    for part, peaks in PEAK_TFLOPS:
        if part in name and precision in peaks:
            tflops = peaks[precision]
            return Peak(tflops * 1e12, f"{name}, {precision} dense, {tflops:g} TFLOPS (datasheet)")
        if part in name:
            return None
    return None


def _config_value(config, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters outside the embedding tables (a tied output layer counts as the table)."""
    embedding = {id(p) for module in model.modules() if isinstance(module, nn.Embedding) for p in module.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embedding)


@dataclass(frozen=True)
class ModelFlops:
    """6 N + 12 L H T per token (the module docstring)."""

    non_embedding_params: int
    layers: int
    hidden: int

    @classmethod
    def of(cls, model: nn.Module) -> ModelFlops | None:
        """From a model's `config` (BERT family, T5, XLNet field names); None when it has none."""
        config = getattr(model, "config", None)
        if _config_value(config, "num_hidden_groups") not in (None, _config_value(config, "num_hidden_layers")):
            return None  # ALBERT sharing layers: its parameters count one layer for several
        hidden = _config_value(config, "hidden_size", "d_model")
        layers = _config_value(config, "num_hidden_layers", "n_layer", "num_layers")
        if hidden is None or layers is None:
            return None
        layers += _config_value(config, "num_decoder_layers") or 0
        return cls(non_embedding_parameters(model), layers, hidden)

    def per_token(self, seq_len: int) -> float:
        return 6.0 * self.non_embedding_params + 12.0 * self.layers * self.hidden * seq_len


def mfu(tokens_per_second: float, flops_per_token: float, peak: Peak | None) -> float | None:
    """The fraction of the peak the model's FLOPs reach (None without a peak)."""
    if peak is None or not flops_per_token:
        return None
    return tokens_per_second * flops_per_token / peak.flops
