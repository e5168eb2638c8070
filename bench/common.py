"""Helpers shared by the benchmarks: locating ../shared/data and timing."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The shared data sets: $BERTKIT_DATA, else ../shared/data next to the repo."""
    path = Path(os.environ.get("BERTKIT_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        sys.exit(f"bench: data directory {path} not found (set BERTKIT_DATA)")
    return path


def best_time(fn, repeats: int = 3) -> tuple[float, object]:
    """Minimum wall time of `repeats` calls of fn() and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result
