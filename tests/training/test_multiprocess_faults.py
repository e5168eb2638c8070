"""Faults in a two-process run (torchrun, gloo, CPU): a rank killed mid-step or
mid-checkpoint, or hung. The survivors stop in bounded time; nothing half-written is
taken as a checkpoint; `--resume` — or torchrun `--max-restarts`, which resumes by itself
— ends with final weights bit-identical to an uninterrupted two-process run. DDP and
FSDP. Faults are injected with BERTKIT_INJECT_FAULT (bertkit.training.faults)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertkit.training import checkpoints as ckpt
from tests.training.test_pretrain_cli import data_dir, pretrain_args  # noqa: F401  (the module's data fixture)

STEPS = ["--set", "max_steps=6", "--set", "save_steps=2", "--set", "save_total_limit=5", "--set", "log_steps=2",
         "--set", "eval_steps=100", "--set", "model.hidden_dropout_prob=0.1"]
BOUND = 180  # seconds any one torchrun may take here, kill and restart included


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(data: Path, out: Path, *extra: str, fault: str | None = None, restarts: int = 0,
             timeout_s: str = "600") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "BERTKIT_INJECT_FAULT"}
    env.update(OMP_NUM_THREADS="1", BERTKIT_COLLECTIVE_TIMEOUT=timeout_s)
    if fault:
        env["BERTKIT_INJECT_FAULT"] = fault
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", str(restarts),
           "--master-port", str(free_port()), "-m", "bertkit", *pretrain_args(data, out, *STEPS, *extra)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BOUND)


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "final" / "model.safetensors"))


def assert_bit_identical(a: Path, b: Path) -> None:
    first, second = weights(a), weights(b)
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key


@pytest.fixture(scope="module")
def reference(data_dir, tmp_path_factory):  # noqa: F811
    """Uninterrupted two-process runs, DDP and FSDP."""
    runs = {}
    for parallel in ("ddp", "fsdp"):
        out = tmp_path_factory.mktemp("reference") / parallel
        done = torchrun(data_dir, out, "--set", f"parallel={parallel}")
        assert done.returncode == 0, done.stderr[-3000:]
        runs[parallel] = out
    return runs


def assert_only_complete_checkpoints(out: Path) -> None:
    for _, path in ckpt.list_checkpoints(out):
        assert ckpt.checkpoint_problem(path) is None, path


def test_a_rank_killed_mid_step_stops_the_run_and_resume_is_exact(data_dir, reference, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    started = time.monotonic()
    done = torchrun(data_dir, out, fault="1:5:step")
    assert done.returncode != 0
    assert time.monotonic() - started < BOUND
    assert [step for step, _ in ckpt.list_checkpoints(out)] == [2, 4]
    assert_only_complete_checkpoints(out)
    resumed = torchrun(data_dir, out, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "from checkpoint-0000004 (step 4)" in resumed.stderr
    assert_bit_identical(reference["ddp"], out)


def test_the_main_rank_killed_mid_checkpoint_and_torchrun_restarts_it(data_dir, reference, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    done = torchrun(data_dir, out, fault="0:4:checkpoint", restarts=1)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torchrun restart 1: resuming from the newest checkpoint" in done.stderr
    assert "from checkpoint-0000002 (step 2)" in done.stderr  # the half-written checkpoint-4 was never taken
    assert_only_complete_checkpoints(out)
    assert not list(out.glob(".checkpoint-*"))
    assert_bit_identical(reference["ddp"], out)


def test_fsdp_a_rank_killed_mid_checkpoint_and_torchrun_restarts_it(data_dir, reference, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    done = torchrun(data_dir, out, "--set", "parallel=fsdp", fault="1:4:checkpoint", restarts=1)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torchrun restart 1" in done.stderr
    assert_only_complete_checkpoints(out)
    assert_bit_identical(reference["fsdp"], out)


def test_a_hung_rank_makes_the_survivor_stop_after_the_collective_timeout(data_dir, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    started = time.monotonic()
    done = torchrun(data_dir, out, fault="1:3:step:hang", timeout_s="5")
    assert done.returncode != 0
    assert time.monotonic() - started < 120
    lines = [line for line in done.stderr.splitlines() if line.startswith("bertkit: error:")]
    assert lines and "process 0 of 2: another process of the run stopped" in lines[0], done.stderr[-3000:]
    assert "the last complete checkpoint is" in lines[0] and "checkpoint-0000002" in lines[0]
