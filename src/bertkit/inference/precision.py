"""Inference precision: fp32 (default), int8 (dynamic quantization) or bf16.

- "int8": every `nn.Linear` becomes an int8 linear (bertkit.inference.quantization):
  int8 weights per output channel, activations quantized at run time, matmuls on int8
  kernels; embeddings, LayerNorm and the attention itself stay fp32. CPU only. The
  scheme follows the CPU's int8 class: with VNNI (32-bit sums of u8*s8 products) torch's
  dynamic linear with 8-bit activations, one scale per call (cosine to fp32 0.99 on
  all-MiniLM-L6-v2, and faster); without VNNI (AVX2, whose 16-bit pair sums saturate)
  7-bit weights and 8-bit activations with one scale per token on oneDNN's int8 GEMM.
  Where the measured figures of a CPU class miss a target, loading in int8 says so in one
  line (`int8_notice`). ONNX Runtime's dynamic quantization (`bertkit export onnx
  --precision int8`) was no faster on either class (docs/export.md).
- "bf16": weights and compute in bfloat16 (AVX-512 BF16 on CPU, tensor cores on GPU).

Callers keep their dtype contract: logits and embeddings come back float32 whatever the
precision (bertkit.tasks.programs.run_features and embed cast them).
"""

from __future__ import annotations

import os
import sys

from bertkit.errors import BertkitError

PRECISIONS = ("fp32", "int8", "bf16")
DEFAULT_PRECISION = "fp32"

# int8 against its targets (embed >= 1.8x fp32's speed, sentences' cosine to fp32 >= 0.99 at
# the 5th percentile), per CPU int8 class where a target is missed: measured with
# bench/bench_precision.py on all-MiniLM-L6-v2 (docs/export.md, "int8 by CPU class").
INT8_SHORTFALLS = {
    "avx2": "int8 on this CPU (AVX2, no VNNI): embed measured 1.13x fp32's speed, short of the 1.8x target, "
            "which AVX2's int8 arithmetic cannot reach (bound 1.49x: its int8 matmuls are 1.83x faster, "
            "attention, GELU and LayerNorm stay fp32); sentences' cosine to fp32 0.997, fine-tuned "
            "accuracy -0.57 (SST-2) / -0.25 (MRPC) points; docs/export.md, 'int8 by CPU class'",
}
_SAID: set[str] = set()


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

        model = quantize_linear_layers(model)
        _say_once(int8_notice())
    return model


def int8_notice(cpu_class: str | None = None) -> str | None:
    """The line int8 says at load on a CPU int8 class (None: this CPU's) whose measured
    figures miss a target, with the figures; None where int8 meets them."""
    from bertkit.inference import quantization

    return INT8_SHORTFALLS.get(quantization.cpu_class() if cpu_class is None else cpu_class)


def _say_once(line: str | None) -> None:
    """`bertkit: LINE` on stderr, once per process (rank 0 under torchrun)."""
    if line and line not in _SAID and os.environ.get("RANK", "0") == "0":
        _SAID.add(line)
        print(f"bertkit: {line}", file=sys.stderr)
