"""A run's summed statistics kept where they were computed, read to the host at once.

Reading a CUDA tensor's value (`float(t)`, `.item()`, `.tolist()`) makes the host wait
for every kernel queued before it: the GPU then idles while the host launches the next
kernels. A training step that read its loss and counts once per micro-batch paid that
several times a step. So the loop sums a logging window's statistics as they come
(0-d tensors on the device, or plain numbers) and reads them all in one transfer when
it logs (`read_sums`). On a CPU the same code costs nothing extra.
"""

from __future__ import annotations

from typing import Union

import torch

Number = Union[float, int, torch.Tensor]


def add_into(sums: dict[str, Number], values: dict[str, Number], keep: torch.Tensor | None = None) -> None:
    """sums[key] += values[key] for every key (tensors detached; `keep`: a 0-d bool tensor,
    False = add zero instead, without reading it on the host)."""
    for key, value in values.items():
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if keep is not None:
                value = torch.where(keep, value, 0.0)  # a NaN times 0 would stay NaN
        elif keep is not None:
            value = keep * float(value)
        sums[key] = sums[key] + value if key in sums else value


def read_sums(sums: dict[str, Number]) -> dict[str, float]:
    """Every value as a Python float: the tensors of each device in one transfer."""
    values = {key: float(value) for key, value in sums.items() if not isinstance(value, torch.Tensor)}
    by_device: dict[torch.device, list[str]] = {}
    for key, value in sums.items():
        if isinstance(value, torch.Tensor):
            by_device.setdefault(value.device, []).append(key)
    for keys in by_device.values():
        stacked = torch.stack([sums[key].reshape(()).to(torch.float64) for key in keys])
        values.update(zip(keys, stacked.tolist()))
    return {key: values[key] for key in sums}
