"""The batch ramp: the batch (sequences per optimizer step) grows over the run by accumulation.

Geiping & Goldstein (2022, "Cramming") start a budget run with a small batch, which
takes many cheap, noisy steps while the loss falls fast, and grow it by accumulating
more micro-batches as the run goes on. Here the batch grows linearly from
`batch_ramp_start` to `batch_size` over the first `batch_ramp_ratio` of the run (of the
budget's time under `--budget`, else of `max_steps`), then stays at `batch_size`; a
step's batch is always a whole number of micro-batches (over all processes), so the
loop only changes how many micro-batches it accumulates.
"""

from __future__ import annotations

import math


def ramp_batch_size(fraction: float, start: int, end: int, ratio: float, unit: int) -> int:
    """Sequences in the step taken at `fraction` of the run: `start` growing linearly to
    `end` over the first `ratio` of it, rounded to the nearest multiple of `unit` (one
    micro-batch over all processes; halves round up) and kept within [start, end]."""
    grown = min(max(fraction, 0.0) / ratio, 1.0)
    units = math.floor((start + (end - start) * grown) / unit + 0.5)
    return min(end, max(start, units * unit))
