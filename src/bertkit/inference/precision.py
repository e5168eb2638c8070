"""Inference precision: fp32 (default), int8 (dynamic quantization) or bf16.

- "int8": every `nn.Linear` becomes a dynamically quantized linear
  (`torch.ao.quantization.quantize_dynamic`): int8 weights per output channel,
  activations quantized per batch to uint8, matmuls on int8 kernels (AVX-512 VNNI);
  embeddings, LayerNorm and the attention itself stay fp32. CPU only. torch's dynamic
  linear quantizes activations to 7 bits (`reduce_range`), the safe choice for CPUs
  without VNNI, whose u8*s8 pair sums saturate at 16 bits; on a VNNI CPU the full 8 bits
  are safe, and on all-MiniLM-L6-v2 they lift the embeddings' cosine to fp32 from 0.96
  to 0.99 (min over a test set) and run faster: bertkit.inference.quantization uses them
  there. This is the quantization ONNX Runtime applies (`quantize_dynamic(per_channel=True)`,
  what `bertkit export onnx --precision int8` writes), which was no faster here (rough
  checks), and it keeps every bertkit model and output (hidden states, attentions, heads).
- "bf16": weights and compute in bfloat16 (AVX-512 BF16 on CPU, tensor cores on GPU).

Callers keep their dtype contract: logits and embeddings come back float32 whatever the
precision (bertkit.tasks.programs.run_features and embed cast them).
"""

from __future__ import annotations

from bertkit.errors import BertkitError

PRECISIONS = ("fp32", "int8", "bf16")
DEFAULT_PRECISION = "fp32"


def check_precision(precision: str | None) -> str:
    """The precision name, checked (None: the default); a one-line error naming the choices."""
    if precision is None:
        return DEFAULT_PRECISION
    if precision not in PRECISIONS:
        raise BertkitError(f"precision: unknown choice {precision!r}; choose one of {', '.join(PRECISIONS)}")
    return precision


def device_for(precision: str, device: str | None) -> str | None:
    """The device a model in `precision` runs on: int8 needs the CPU (None: as asked)."""
    if precision == "int8":
        if device is not None and not str(device).startswith("cpu"):
            raise BertkitError(f"precision int8: runs on the CPU only (device {device!r}); use bf16 on {device}")
        return "cpu"
    return device


def apply_precision(model, precision: str):
    """`model` (on its device) converted in place to `precision`; returns the model to use."""
    import torch

    precision = check_precision(precision)
    if precision == "bf16":
        return model.to(torch.bfloat16)
    if precision == "int8":
        from bertkit.inference.quantization import quantize_linear_layers

        return quantize_linear_layers(model)
    return model
