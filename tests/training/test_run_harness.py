"""The run harness on the loop's toy program: the order of its steps (run_config.json, notes,
on_start, train, report), resuming from a checkpoint bit-identically, an error from the
Trainer before anything is written or said, and the process group left to a caller that
passes its own."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from bertkit.errors import ConfigError
from bertkit.training import checkpoints as ckpt
from bertkit.training import run as harness
from bertkit.training.config import RUN_CONFIG_FILE, read_run_config
from bertkit.training.distributed import DistContext
from bertkit.training.resume import Resumption
from bertkit.training.run import run_training
from test_loop import ToyModel, ToyProgram, config


def test_steps_run_in_order_and_the_config_is_saved(tmp_path):
    events: list[str] = []
    training = config(max_steps=4)

    def on_start(saved):
        assert saved is training and (tmp_path / RUN_CONFIG_FILE).is_file()
        events.append("on_start")

    def report(run):
        events.append(f"report {run.result.step} {run.trainer.micro_batch}")
        assert run.seconds > 0 and (tmp_path / "final").is_dir()

    torch.manual_seed(0)
    finished = run_training(training, ToyProgram(), ToyModel(), training, tmp_path, notes=["a note"],
                            notify=lambda line: events.append(f"note {line}"), on_start=on_start, report=report)
    assert events == ["note a note", "on_start", "report 4 8"]
    assert finished.result.step == 4
    assert json.loads((tmp_path / RUN_CONFIG_FILE).read_text()) == dataclasses.asdict(training)
    assert read_run_config(tmp_path) == (tmp_path / RUN_CONFIG_FILE, {**dataclasses.asdict(training), "eval_seed": 3})


def test_resumption_continues_bit_identically_and_says_so_first(tmp_path):
    torch.manual_seed(0)
    reference = ToyModel()
    run_training(config(), ToyProgram(), reference, config(), tmp_path / "ref")
    torch.manual_seed(0)
    run_training(config(save_total_limit=5), ToyProgram(), ToyModel(), config(save_total_limit=5), tmp_path / "cut")
    for _, path in ckpt.list_checkpoints(tmp_path / "cut")[2:]:
        shutil.rmtree(path)  # as if killed after step 8
    checkpoint = ckpt.latest_checkpoint(tmp_path / "cut")
    model = ToyModel()
    model.load_state_dict(load_file(str(checkpoint / "model.safetensors")))
    lines: list[str] = []
    run_training(config(), ToyProgram(), model, config(), tmp_path / "cut",
                 resumption=Resumption(checkpoint, 8, config()), notes=["after"], notify=lines.append)
    assert lines == [f"resuming {tmp_path / 'cut'} from checkpoint-0000008 (step 8)", "after"]
    for p, q in zip(reference.parameters(), model.parameters()):
        assert torch.equal(p, q)


def test_a_trainer_error_comes_before_any_file_or_note(tmp_path):
    said: list[str] = []
    bad = config(batch_size=8, micro_batch_size=3)
    with pytest.raises(ConfigError, match="batch_size"):
        run_training(bad, ToyProgram(), ToyModel(), bad, tmp_path / "run", notes=["x"], notify=said.append,
                     on_start=said.append)
    assert said == [] and not (tmp_path / "run").exists()


def test_the_process_group_is_the_callers_when_given(tmp_path, monkeypatch):
    torn: list[int] = []
    monkeypatch.setattr(harness, "teardown", lambda: torn.append(1))
    run_training(config(max_steps=1), ToyProgram(), ToyModel(), config(max_steps=1), tmp_path / "a",
                 ctx=DistContext())
    assert torn == []
    run_training(config(max_steps=1), ToyProgram(), ToyModel(), config(max_steps=1), tmp_path / "b")
    assert torn == [1]


def test_more_processes_than_gpus_is_a_one_line_error(monkeypatch):
    """torchrun --nproc-per-node 2 on a one-GPU machine: process 1 has no GPU of its own
    (seen on an H100 machine as CUDA's 'invalid device ordinal' traceback)."""
    from bertkit.errors import BertkitError
    from bertkit.training.distributed import setup

    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(BertkitError, match=r"^process 1 of torchrun's --nproc-per-node has no GPU: this machine has 1 "
                                           r"\(.*CUDA_VISIBLE_DEVICES= to train on the CPU\)$"):
        setup()
