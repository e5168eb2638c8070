"""on_nonfinite=stop|skip: a NaN/inf loss or gradient names the step, the batch's data
positions and the parameter; skips are counted and bounded; fp16 loss-scale overflows
are GradScaler's business, not failures."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.training.loop import Trainer, first_nonfinite_gradient
from tests.training.test_loop import ToyModel, ToyProgram, config, train

POISONED = 37  # the data index whose input holds inf


class PoisonedData(ToyProgram):
    """One training example carries inf in its input: the loss of its batch is not finite."""

    def train_example(self, index, epoch):
        example = super().train_example(index, epoch)
        if index == POISONED:
            example = {**example, "x": np.full(4, np.inf, dtype=np.float32)}
        return example


class InfGradient(ToyProgram):
    """At the `at`-th forward the gradient of layers.1.bias becomes inf; the loss stays finite."""

    def __init__(self, at: int, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def compute_loss(self, model, batch, totals):
        self.calls += 1
        out = model(batch["x"])
        if self.calls == self.at:
            bias = model.layers[1].bias
            handles = []

            def poison(grad):
                handles.pop().remove()
                return grad * float("inf")

            handles.append(bias.register_hook(poison))
        err = (out - batch["y"]) ** 2 * batch["w"]
        return err.sum() / totals["mse"], {"sq_err": float(err.sum().detach()), "weight": float(batch["w"].sum())}


def poisoned_step(program, cfg) -> int:
    """The 1-based step whose batch holds the poisoned example (epoch 0)."""
    trainer = Trainer(program, cfg, "/nonexistent")
    for step in range(cfg.max_steps):
        if f"0:{POISONED}," in trainer.describe_batch(step, shown=64) + ",":
            return step + 1
    raise AssertionError("the poisoned example is not in the first epoch's steps")


def test_inf_in_a_batch_stops_naming_the_step_and_the_example(tmp_path):
    program = PoisonedData()
    step = poisoned_step(program, config())
    with pytest.raises(BertkitError) as caught:
        train(tmp_path, program=program)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"step {step}: the loss is ")
    assert re.search(rf"training examples \(epoch:index\) .*\b0:{POISONED}\b", message)


def test_inf_gradient_names_the_first_parameter(tmp_path):
    with pytest.raises(BertkitError, match=r"step 3: the gradient of layers\.1\.bias is non-finite; the batch held "
                                           r"training examples"):
        train(tmp_path, program=InfGradient(at=3))


def test_skip_counts_the_steps_logs_them_and_keeps_weights_finite(tmp_path):
    model, result = train(tmp_path, program=InfGradient(at=5), on_nonfinite="skip")
    assert result.skipped_steps == 1
    assert all(torch.isfinite(p).all() for p in model.parameters())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert {"step": 5, "nonfinite_skipped": 1} in records


def test_skip_stops_after_the_limit_in_a_row(tmp_path):
    class AlwaysNan(ToyProgram):
        def compute_loss(self, model, batch, totals):
            loss, stats = super().compute_loss(model, batch, totals)
            return loss * float("nan"), stats

    with pytest.raises(BertkitError, match=r"step 3: 3 steps in a row skipped \(nonfinite_skip_limit\)"):
        train(tmp_path, program=AlwaysNan(), on_nonfinite="skip", nonfinite_skip_limit=3)


def test_a_good_step_resets_the_count_in_a_row(tmp_path):
    class NanEveryOther(ToyProgram):
        def compute_loss(self, model, batch, totals):
            loss, stats = super().compute_loss(model, batch, totals)
            return (loss * float("nan") if self.calls % 2 else loss), stats

    _, result = train(tmp_path, program=NanEveryOther(), on_nonfinite="skip", nonfinite_skip_limit=2)
    assert result.skipped_steps == 6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 with GradScaler needs a CUDA device")
def test_fp16_overflow_is_the_scalers_skip_not_a_failure(tmp_path):  # pragma: no cover - GPU only
    from bertkit.training.distributed import setup

    torch.manual_seed(0)  # on the GPU, as `bertkit pretrain` places it (a bare Trainer stays on the CPU)
    model = ToyModel(0.1)
    result = Trainer(InfGradient(at=3), config(precision="fp16"), tmp_path, ctx=setup()).train(model)
    # GradScaler also skips its first steps while its scale (2^16) comes down: seen 4 on an H100
    assert result.step == 12 and result.skipped_steps == 0 and result.amp_skipped_steps >= 1
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_amp_overflow_is_told_apart_from_a_nonfinite_loss():
    """The rule itself, on CPU: with a loss scaler, an inf gradient under a finite loss is
    not a problem (GradScaler skips); a non-finite loss always is."""
    trainer = Trainer(ToyProgram(), config(), "/nonexistent")
    model = ToyModel()
    scaler = object()
    inf = torch.tensor(float("inf"))
    assert trainer._nonfinite_problem(1.0, inf, model, scaler) is None
    assert trainer._nonfinite_problem(float("nan"), inf, model, scaler) == "the loss is nan (non-finite)"
    model.layers[0].weight.grad = torch.full_like(model.layers[0].weight, float("nan"))
    assert trainer._nonfinite_problem(1.0, inf, model, None).startswith("the gradient of layers.0.weight")
    assert first_nonfinite_gradient(model) == "layers.0.weight"


def test_old_run_configs_field_name_still_reads():
    from bertkit.training.config import with_legacy_fields

    assert with_legacy_fields({"nonfinite": "skip"}) == {"on_nonfinite": "skip"}
