"""`--set compile=true`: torch.compile of the model (its loss included), falling back to eager.

The model is compiled in place (`nn.Module.compile`), so its parameter names, state dict and
checkpoints are the eager model's. Inductor's artefacts go to the run folder's
`compile_cache/` (TORCHINDUCTOR_CACHE_DIR, unless the user set it), so a resumed run reuses
them instead of compiling again. Should compilation fail (an unsupported operation, a missing
compiler toolchain), the run says so in one line and goes on eagerly: a failed compile
costs time, never the run.

Static shapes. Pre-training batches have one width (max_seq_length), and the rest of the
step is kept free of data-dependent counts while compiling: the encoders skip their unpadded
path (bertkit.model.unpad) and the sparse last layer (bertkit.model.query_rows), the
attention mask is never read on the host, and a masked LM's head reads a fixed token
budget of rows per sequence that the program sets before compiling
(`TrainingProgram.fix_shapes`, bertkit.model.static_shapes). So a BERT step is one graph
per micro-batch size, which `compile_mode=reduce-overhead` can replay as a CUDA graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from torch import nn

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def compile_with_fallback(model: nn.Module, cache_dir: Path, say: Callable[[str], None],
                          mode: str = "default") -> nn.Module:
    """Compile `model` in place with torch.compile's `mode`; its first call that fails to
    compile turns it back to eager (one line through `say`) and reruns eagerly, so a real
    error in the model still surfaces."""
    if CACHE_ENV not in os.environ:
        cache_dir.mkdir(parents=True, exist_ok=True)
        os.environ[CACHE_ENV] = str(cache_dir)
    model.compile(mode=None if mode == "default" else mode)
    compiled = model._compiled_call_impl

    def call(*args, **kwargs):
        try:
            return compiled(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any compiler failure; the eager rerun re-raises a model error
            model._compiled_call_impl = None
            result = model(*args, **kwargs)  # an error of the model itself raises here, as without compile
            say(f"torch.compile failed ({type(exc).__name__}: {first_line(exc)}); training eagerly")
            return result

    model._compiled_call_impl = call
    return model


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else "no message"
