"""Helpers shared by the benchmarks: locating ../shared/data and timing."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The shared data sets: $BERTKIT_DATA, else ../shared/data next to the repo."""
    path = Path(os.environ.get("BERTKIT_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        sys.exit(f"bench: data directory {path} not found (set BERTKIT_DATA)")
    return path


def interleaved_best(
    candidates: dict[str, Callable[[], object]], repeats: int = 3, clock: Callable[[], float] = time.perf_counter
) -> tuple[dict[str, float], dict]:
    """Best (minimum) wall time of each candidate over `repeats` rounds, and its last result.

    Rounds are interleaved (A B A B ...), so a drift in machine load hits every candidate
    alike instead of biasing the ratio. `clock=time.process_time` times CPU instead of
    wall time (for one-thread runs on a machine shared with other jobs).
    """
    best = {name: float("inf") for name in candidates}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = clock()
            results[name] = fn()
            best[name] = min(best[name], clock() - start)
    return best, results


def synchronized(step: Callable[[], object], device: str) -> Callable[[], object]:
    """`step` followed by a CUDA synchronize on a GPU (so its time is the kernels' time); as is on CPU."""
    if device == "cpu":
        return step
    import torch

    def run():
        value = step()
        torch.cuda.synchronize()
        return value

    return run
