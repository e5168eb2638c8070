"""Injected faults, for the tests of what a multi-process run does when one process dies
(docs/reliability.md). Off unless the environment asks for one.

`BERTKIT_INJECT_FAULT=RANK:STEP:POINT[:hang]` kills the process of rank RANK with
SIGKILL — no clean-up, no exception, as the kernel's OOM killer or a lost node would — at
step STEP (1-based, the step being trained or saved) at POINT: `step` (after the
forward, before the backward and its gradient all-reduce) or `checkpoint` (inside the
save: on the main process after the model files are written and before the training
state, on the others while they wait for it). With `:hang` the process stops answering
instead (it sleeps), as a stuck node would. It fires only in a run's first attempt, so a
run restarted by `torchrun --max-restarts` gets through.
"""

from __future__ import annotations

import os
import signal
import time

FAULT_ENV = "BERTKIT_INJECT_FAULT"
POINTS = ("step", "checkpoint")


def restart_count() -> int:
    """How many times torchrun has restarted this run's processes (0: the first attempt)."""
    try:
        return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except ValueError:
        return 0


def maybe_fail(point: str, step: int, rank: int) -> None:
    """SIGKILL this process when `BERTKIT_INJECT_FAULT` names this rank, step and point."""
    spec = os.environ.get(FAULT_ENV)
    if not spec or restart_count() > 0:
        return
    parts = spec.split(":")
    try:
        wanted = (int(parts[0]), int(parts[1]), parts[2])
        action = parts[3] if len(parts) == 4 else "kill"
        if len(parts) not in (3, 4) or action not in ("kill", "hang"):
            raise ValueError
    except (ValueError, IndexError):
        raise ValueError(f"{FAULT_ENV}={spec!r}: expected RANK:STEP:POINT[:hang], POINT one of {', '.join(POINTS)}")
    if wanted != (rank, step, point):
        return
    if action == "hang":
        while True:
            time.sleep(60)
    os.kill(os.getpid(), signal.SIGKILL)
