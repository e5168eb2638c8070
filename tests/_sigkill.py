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


def assert_killed_run_resumes_bit_identical(run_args, tmp_path: Path, steps: list[str],
                                            checkpoint: str = "checkpoint-0000004") -> None:
    """A run to the end and the same run SIGKILLed after `checkpoint`, then resumed, end with
    equal weights to the bit. run_args(output_dir, *extra) -> the `bertkit` arguments."""
    import torch
    from safetensors.torch import load_file

    from bertkit.cli import main

    reference, killed = tmp_path / "ref", tmp_path / "killed"
    assert main(run_args(reference, *steps)) == 0
    kill_after_checkpoint(run_args(killed, *steps), killed, checkpoint)
    assert main(run_args(killed, *steps, "--resume")) == 0
    ref, resumed = load_file(reference / "final" / "model.safetensors"), load_file(killed / "final" / "model.safetensors")
    assert ref.keys() == resumed.keys()
    for key in ref:
        assert torch.equal(ref[key], resumed[key]), key
