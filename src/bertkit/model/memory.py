"""Allocation of the large per-step training buffers (MLM logits, tied-embedding gradient).

A fresh tensor of tens of MB is a fresh `mmap` from the C allocator, and its first
write page-faults once per 4 KiB page: for the (N, V) MLM logits of a batch of 32 x 128
(about 75 MB) that costs as much as the matmul that fills them (measured on a 2-core
VM: 27 ms to first-fill 72 MB, 6 ms to refill it). Asking the kernel for transparent
huge pages on such a buffer (`madvise(MADV_HUGEPAGE)`, which PyTorch itself does for
every allocation under `THP_MEM_ALLOC_ENABLE=1`) cuts that to 10 ms. Linux only; a
silent no-op elsewhere, on GPUs and for small tensors.
"""

from __future__ import annotations

import ctypes
import sys

import torch

_HUGE_PAGE = 2 << 20  # bytes (x86-64 and arm64 Linux)
_MADV_HUGEPAGE = 14
_MIN_BYTES = 4 * _HUGE_PAGE


def _load_madvise():
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise  # libc's, already loaded by Python
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _load_madvise()


def empty_large(shape: tuple[int, ...] | torch.Size, like: torch.Tensor) -> torch.Tensor:
    """`torch.empty(shape)` with `like`'s dtype and device, backed by huge pages where possible.

    Only the whole 2 MiB pages inside the tensor are advised (the advice never touches
    memory outside it); the content is uninitialised, as with `torch.empty`.
    """
    out = torch.empty(shape, dtype=like.dtype, device=like.device)
    nbytes = out.numel() * out.element_size()
    if _madvise is None or out.device.type != "cpu" or nbytes < _MIN_BYTES:
        return out
    start = out.data_ptr()
    first = (start + _HUGE_PAGE - 1) // _HUGE_PAGE * _HUGE_PAGE
    last = (start + nbytes) // _HUGE_PAGE * _HUGE_PAGE
    if last > first:
        _madvise(first, last - first, _MADV_HUGEPAGE)  # advice only: failure changes nothing
    return out
