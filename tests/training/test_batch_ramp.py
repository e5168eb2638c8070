"""The batch ramp (issue 19): the batch grows by accumulation from batch_ramp_start to
batch_size over batch_ramp_ratio of the run. The ramp function at its start, middle, end
and rounding; a ramped run takes each step's micro-batches from one data stream (nothing
skipped or repeated, each step's loss normalised over its whole batch) and logs the
step's batch; resume stays bit-exact (an old checkpoint without the stream position
too); bad fields fail naming themselves; a budget run ramps over its time."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.training import checkpoints as ckpt
from bertkit.training.distributed import DistContext
from bertkit.training.loop import Trainer
from bertkit.training.ramp import ramp_batch_size

from tests.training.test_loop import ToyModel, ToyProgram, config, train

RAMP = dict(batch_ramp_start=2, batch_ramp_ratio=0.5, micro_batch_size=2)  # 2 -> 8 sequences over 6 of 12 steps
# micro-batches per step under RAMP: 2 + 6 x min(step / 6, 1) sequences, to the nearest micro-batch (halves up)
RAMP_MICRO_BATCHES = [1, 2, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4]


@pytest.mark.parametrize("fraction, batch", [
    (0.0, 8), (-0.1, 8),  # the start (and never below it)
    (0.1, 16),  # 8 + 24 x 0.2 = 12.8 sequences -> 1.6 micro-batches of 8 -> 2
    (0.25, 24),  # the middle of the ramp: 20 sequences = 2.5 micro-batches -> a half rounds up to 3
    (0.5, 32), (0.9, 32), (1.2, 32),  # grown at the end of the ramp, and so to the end of the run
])
def test_ramp_grows_linearly_in_whole_micro_batches(fraction, batch):
    assert ramp_batch_size(fraction, start=8, end=32, ratio=0.5, unit=8) == batch


def test_ramp_over_the_whole_run_and_a_finer_micro_batch():
    assert [ramp_batch_size(f, 4, 16, 1.0, 4) for f in (0.0, 0.2, 0.5, 0.99, 1.0)] == [4, 8, 12, 16, 16]
    assert ramp_batch_size(0.125, 8, 32, 0.5, 4) == 16  # 14 sequences = 3.5 micro-batches of 4 -> 4


class RecordingProgram(ToyProgram):
    """The toy regression with each example's index in its batch; records every micro-batch's
    indices and the loss normaliser (the step's total weight) it was given."""

    def __init__(self, n: int = 20):
        super().__init__(n)
        self.seen: list[tuple[list[int], float]] = []
        self.prepared: list[int] = []  # every example the loop's data stream read

    def train_example(self, index, epoch):
        self.prepared.append(index)
        return {**super().train_example(index, epoch), "index": index}

    def compute_loss(self, model, batch, totals):
        self.seen.append((batch["index"].long().tolist(), totals["mse"]))
        return super().compute_loss(model, {k: v for k, v in batch.items() if k != "index"}, totals)


def stream(trainer: Trainer, count: int) -> list[int]:
    """The first `count` examples of the loop's data stream (epochs one after another)."""
    return [int(trainer._permutation(p // trainer.num_examples)[p % trainer.num_examples]) for p in range(count)]


def test_a_ramped_run_takes_the_stream_in_order_and_normalises_each_step(tmp_path):
    program = RecordingProgram(n=20)  # 80 sequences over 12 steps: epochs 0 to 3, never a multiple of a step
    model, result = train(tmp_path, program=program, log_steps=1, **RAMP)
    assert result.step == 12
    assert [r["batch_size"] for r in result.records if "loss" in r] == [2 * k for k in RAMP_MICRO_BATCHES]
    assert len(program.seen) == sum(RAMP_MICRO_BATCHES)  # one forward per micro-batch
    consumed = [i for indices, _ in program.seen for i in indices]
    trainer = Trainer(RecordingProgram(n=20), config(**RAMP), tmp_path / "unused")
    assert consumed == stream(trainer, 2 * sum(RAMP_MICRO_BATCHES))  # nothing skipped or repeated
    assert program.prepared == consumed  # and nothing prepared past the last step
    calls = iter(program.seen)
    for micro_batches in RAMP_MICRO_BATCHES:  # every micro-batch of a step shares the step's normaliser
        step = [next(calls) for _ in range(micro_batches)]
        weight = sum(1.0 + i % 3 for indices, _ in step for i in indices)
        assert {total for _, total in step} == {weight}
    # a step-count run's positions are a function of the step (describe_batch names them)
    assert trainer.samples_before(4) == 2 * sum(RAMP_MICRO_BATCHES[:4])
    first = 2 * sum(RAMP_MICRO_BATCHES[:3])
    named = ", ".join(f"0:{i}" for i in stream(trainer, first + 2 * RAMP_MICRO_BATCHES[3])[first:])
    assert trainer.describe_batch(3) == f"training examples (epoch:index) {named}"


def test_without_a_ramp_no_batch_is_logged(tmp_path):
    _, result = train(tmp_path, log_steps=1, max_steps=2)
    assert all("batch_size" not in r for r in result.records)


def test_ramp_to_full_batch_equals_no_ramp(tmp_path):
    """batch_ramp_start = batch_size is no ramp: the same micro-batches, bit-identical weights."""
    plain, _ = train(tmp_path / "a", micro_batch_size=2)
    flat, _ = train(tmp_path / "b", micro_batch_size=2, batch_ramp_start=8)
    for p, q in zip(plain.parameters(), flat.parameters()):
        assert torch.equal(p, q)


def resume_cut(tmp_path, program_factory, at: int, drop_position: bool = False) -> ToyModel:
    """A ramped run killed after step `at` and resumed from its checkpoint in a new Trainer."""
    train(tmp_path, program=program_factory(), save_steps=2, save_total_limit=10, **RAMP)
    for step, path in ckpt.list_checkpoints(tmp_path):
        if step > at:
            shutil.rmtree(path)  # as if killed after step `at`
    checkpoint = ckpt.latest_checkpoint(tmp_path)
    assert checkpoint.name == f"checkpoint-{at:07d}"
    if drop_position:  # a checkpoint from before the ramp: no stream position stored
        state = ckpt.load_training_state(checkpoint)
        del state["samples_seen"]
        ckpt.save_training_state(checkpoint, state)
    torch.manual_seed(123)
    model = ToyModel()
    model.load_state_dict(load_file(str(checkpoint / "model.safetensors")))
    Trainer(program_factory(), config(**RAMP), tmp_path).train(model, resume_from=checkpoint)
    return model


@pytest.mark.parametrize("drop_position", [False, True], ids=["stored-position", "old-checkpoint"])
def test_resume_mid_ramp_is_bit_identical(tmp_path, drop_position):
    reference, _ = train(tmp_path / "ref", program=RecordingProgram(), **RAMP)
    # step 4 is mid-ramp: 2 x (1+2+2+3) = 16 sequences consumed, not 4 x 8
    resumed = resume_cut(tmp_path / "cut", RecordingProgram, at=4, drop_position=drop_position)
    for p, q in zip(reference.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_checkpoint_stores_the_stream_position(tmp_path):
    train(tmp_path, save_steps=4, save_total_limit=10, **RAMP)
    seen = {step: ckpt.load_training_state(path)["samples_seen"] for step, path in ckpt.list_checkpoints(tmp_path)}
    assert seen == {4: 16, 8: 2 * sum(RAMP_MICRO_BATCHES[:8]), 12: 2 * sum(RAMP_MICRO_BATCHES)}


@pytest.mark.parametrize("fields, named", [
    (dict(batch_ramp_start=0), "batch_ramp_start"),
    (dict(batch_ramp_start=16), "batch_ramp_start"),  # larger than batch_size 8
    (dict(batch_ramp_start=3, micro_batch_size=2), "batch_ramp_start"),
    (dict(batch_ramp_start=2, batch_ramp_ratio=0.0), "batch_ramp_ratio"),
    (dict(batch_ramp_start=2, batch_ramp_ratio=1.5), "batch_ramp_ratio"),
    (dict(batch_ramp_start=2.5), "batch_ramp_start"),
])
def test_bad_ramp_fields_are_named(fields, named):
    with pytest.raises(ConfigError, match=f"field '{named}'"):
        config(**fields)


def test_batch_must_be_whole_micro_batches_of_the_ramp_start():
    # the micro-batch defaults to the ramp's start: batch_size 8 is no multiple of 3
    with pytest.raises(ConfigError, match=r"field 'batch_size' \(8\) must be a multiple of micro_batch_size x processes \(3 x 1\)"):
        Trainer(ToyProgram(), config(batch_ramp_start=3), "/nonexistent")
    # under two processes the start must be whole micro-batches of both
    two = DistContext(rank=0, world_size=2)
    with pytest.raises(ConfigError, match=r"field 'batch_ramp_start' \(2\) must be a multiple of .* \(2 x 2\)"):
        Trainer(ToyProgram(), config(batch_ramp_start=2, micro_batch_size=2), "/nonexistent", ctx=two)
    trainer = Trainer(ToyProgram(), config(batch_ramp_start=4), "/nonexistent", ctx=two)
    assert trainer.micro_batch == 2 and trainer.describe_accumulation() == "1..2"


def test_bad_ramp_on_the_command_line_is_one_line(tmp_path, capsys):
    assert main(["pretrain", "--data", str(tmp_path), "--output-dir", str(tmp_path / "o"),
                 "--set", "batch_ramp_ratio=2"]) != 0
    err = capsys.readouterr().err.strip()
    assert "field 'batch_ramp_ratio' must be in (0, 1], got 2" in err and "\n" not in err


class StepClock:
    """A budget run's clock that the program moves: one second per micro-batch computed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def timed_program(clock: StepClock) -> RecordingProgram:
    """A RecordingProgram whose every micro-batch costs one second of `clock`."""
    program = RecordingProgram(n=20)
    compute = program.compute_loss

    def timed(model, batch, totals):
        clock.now += 1.0
        return compute(model, batch, totals)

    program.compute_loss = timed
    return program


def budget_config(**overrides):
    return config(**{**dict(max_steps=1000, budget_seconds=40.0, warmup_steps=None, warmup_ratio=0.1, log_steps=1),
                     **RAMP, **overrides})


def test_a_budget_run_ramps_over_its_time(tmp_path):
    clock = StepClock()
    program = timed_program(clock)
    cfg = budget_config()
    torch.manual_seed(0)
    result = Trainer(program, cfg, tmp_path, clock=clock).train(ToyModel())
    assert result.budget_ended and result.step < 1000
    batches = [r["batch_size"] for r in result.records if "loss" in r]
    assert batches[0] == 2 and batches[-1] == 8 and batches == sorted(batches)
    # each step's batch is the ramp's at the fraction of the time spent by the step before
    spent = np.cumsum([0] + [b // 2 for b in batches[:-1]])  # one second per micro-batch
    assert batches == [ramp_batch_size(s / 40.0, 2, 8, 0.5, 2) for s in spent]
    consumed = [i for indices, _ in program.seen for i in indices]
    assert consumed == stream(Trainer(RecordingProgram(n=20), cfg, tmp_path / "unused"), sum(batches))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from tests.training.test_resume import build_data

    return build_data(tmp_path_factory.mktemp("ramp"), "data", 400)


def test_pretrain_logs_the_steps_batch_and_the_report_names_the_ramp(data, tmp_path):
    from tests.training.test_resume import pretrain_args

    out = tmp_path / "run"
    assert main(pretrain_args(data, out, "--set", "max_steps=4", "--set", "batch_ramp_start=2")) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # micro-batches of 2: 2 + 6 x min(step / 2, 1) sequences -> 2, 5 (2.5 micro-batches, rounded up to 6), 8, 8
    assert [r["batch_size"] for r in rows if "loss" in r] == [2, 6, 8, 8]
    report = (out / "report.md").read_text()
    assert "2 -> 8 sequences over the first 50% of 4 steps" in report and "2 x 1..4 x 1" in report


def test_two_process_budget_run_ramps_together(data, tmp_path):
    """Under torchrun each process takes its micro-batches of every step: the step's count
    comes from the budget fraction the main process shares (the same all-reduce as the lr),
    so the processes accumulate alike and end together."""
    import os
    import subprocess
    import sys

    from tests.training.test_budget import budget_args
    from tests.training.test_multiprocess_faults import BOUND, free_port

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
           "-m", "bertkit", *budget_args(data, out, "4s", "--set", "budget_evals=2", "--set", "batch_ramp_start=2",
                                         "--set", "batch_ramp_ratio=0.3")]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    batches = [r["batch_size"] for r in rows if "loss" in r]
    assert batches[0] == 2 and batches == sorted(batches) and set(batches) <= {2, 4, 6, 8}
    assert "micro-batch x accumulation x processes | 1 x 1..4 x 2" in (out / "report.md").read_text()


def test_a_resumed_budget_run_continues_the_stream_and_the_ramp(tmp_path):
    """A budget run's step sizes follow its clock, not its step: the checkpoint's stream
    position and time spent make the resumed part take the very next examples."""
    clock = StepClock()
    first = timed_program(clock)
    torch.manual_seed(0)
    model = ToyModel()
    Trainer(first, budget_config(max_steps=5), tmp_path, clock=clock).train(model)  # cut by the step cap
    checkpoint = ckpt.latest_checkpoint(tmp_path)
    state = ckpt.load_training_state(checkpoint)
    before = sum(len(indices) for indices, _ in first.seen)
    spent = clock.now  # one second per micro-batch: 2 x 5 sequences would be 10
    assert state["samples_seen"] == before == 2 * spent and state["elapsed_seconds"] == spent < 10
    second_clock = StepClock()
    second = timed_program(second_clock)
    result = Trainer(second, budget_config(), tmp_path, clock=second_clock).train(model, resume_from=checkpoint)
    assert result.budget_ended
    consumed = [i for program in (first, second) for indices, _ in program.seen for i in indices]
    assert consumed == stream(Trainer(RecordingProgram(n=20), budget_config(), tmp_path / "unused"), len(consumed))
    resumed = [r["batch_size"] for r in result.records if "loss" in r and r["step"] > 5]
    assert resumed[0] == ramp_batch_size(spent / 40.0, 2, 8, 0.5, 2)  # the ramp where the time spent left it
