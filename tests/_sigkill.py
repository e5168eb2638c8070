"""Kill a `bertkit` run with SIGKILL once it has written a given checkpoint (the resume tests' helper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def kill_after_checkpoint(args: list[str], run_dir: Path, checkpoint: str, timeout: float = 120.0) -> None:
    """Run `python -m bertkit ARGS` and SIGKILL it as soon as `run_dir/checkpoint/training_state.pt`
    exists; the run must not have finished (no `final/`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertkit", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while not (run_dir / checkpoint / "training_state.pt").exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before it could be killed"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not (run_dir / "final").exists()
