"""The shared loop on a toy program: accumulation, non-finite losses, checkpoints, schedule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from bertkit.errors import BertkitError, ConfigError
from bertkit.training import checkpoints as ckpt
from bertkit.training.config import TrainingConfig, apply_overrides, parse_set_arguments
from bertkit.training.loop import Trainer
from bertkit.training.optim import Lamb, linear_schedule, parameter_groups
from bertkit.training.program import TrainingProgram


class ToyModel(nn.Module):
    def __init__(self, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 8), nn.Linear(8, 1)])
        self.LayerNorm = nn.LayerNorm(8)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.layers[1](self.dropout(torch.relu(self.LayerNorm(self.layers[0](x))))).squeeze(-1)

    def save_pretrained(self, directory: Path, state_dict=None) -> None:
        save_file({k: v.contiguous() for k, v in (state_dict or self.state_dict()).items()}, str(directory / "model.safetensors"))


class ToyProgram(TrainingProgram):
    """Regression with a per-example weight, so normalisation by global counts matters."""

    def __init__(self, n: int = 64, nan_at: int | None = None):
        rng = np.random.default_rng(0)
        self.x = rng.normal(size=(n, 4)).astype(np.float32)
        self.y = (self.x @ np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)).astype(np.float32)
        self.nan_at = nan_at
        self.calls = 0

    def num_train_examples(self):
        return len(self.x)

    def train_example(self, index, epoch):
        noise = np.random.default_rng([7, epoch, index]).normal() * 0.01
        return {"x": self.x[index], "y": self.y[index] + noise, "w": 1.0 + index % 3}

    def collate(self, examples):
        return {k: torch.tensor(np.array([e[k] for e in examples]), dtype=torch.float32) for k in examples[0]}

    def loss_counts(self, batch):
        return {"mse": float(batch["w"].sum())}

    def compute_loss(self, model, batch, totals):
        self.calls += 1
        err = (model(batch["x"]) - batch["y"]) ** 2 * batch["w"]
        loss = err.sum() / totals["mse"]
        if self.nan_at is not None and self.calls == self.nan_at:
            loss = loss * float("nan")
        return loss, {"sq_err": float(err.sum().detach()), "weight": float(batch["w"].sum())}

    def summarize(self, stats):
        return {"mse": stats["sq_err"] / stats["weight"]} if stats.get("weight") else {}

    def save_pretrained(self, model, directory, state_dict=None):
        model.save_pretrained(directory, state_dict)


def config(**overrides) -> TrainingConfig:
    values = dict(max_steps=12, batch_size=8, lr=0.05, warmup_steps=2, log_steps=4, eval_steps=100, save_steps=4,
                  progress=False, tensorboard=False, seed=3)
    values.update(overrides)
    return TrainingConfig(**values)


def train(tmp_path: Path, program=None, dropout: float = 0.1, **overrides) -> tuple[ToyModel, object]:
    torch.manual_seed(0)
    model = ToyModel(dropout)
    result = Trainer(program or ToyProgram(), config(**overrides), tmp_path).train(model)
    return model, result


def test_accumulation_gives_the_same_weights_as_one_batch(tmp_path):
    # dropout masks are drawn per micro-batch, so compare without dropout
    whole, _ = train(tmp_path / "a", dropout=0.0)
    accumulated, _ = train(tmp_path / "b", dropout=0.0, micro_batch_size=2)
    for p, q in zip(whole.parameters(), accumulated.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_loss_decreases_and_final_model_is_written(tmp_path):
    _, result = train(tmp_path, max_steps=40)
    losses = [r["loss"] for r in result.records]
    assert losses[-1] < 0.2 * losses[0]
    assert (tmp_path / "final" / "model.safetensors").is_file()
    assert [step for step, _ in ckpt.list_checkpoints(tmp_path)] == [36, 40]  # save_total_limit=2
    metrics = [r for r in result.records if "mse" in r]
    assert metrics and all(np.isfinite(r["mse"]) for r in metrics)


def test_resume_from_checkpoint_is_bit_identical(tmp_path):
    reference, _ = train(tmp_path / "ref")
    # an interrupted run: 8 of 12 steps, then a new process picks up checkpoint-8
    train(tmp_path / "cut", max_steps=12, save_steps=4, save_total_limit=5)
    for _, path in ckpt.list_checkpoints(tmp_path / "cut")[2:]:
        import shutil

        shutil.rmtree(path)  # as if killed after step 8
    checkpoint = ckpt.latest_checkpoint(tmp_path / "cut")
    assert checkpoint.name == "checkpoint-0000008"
    torch.manual_seed(123)
    model = ToyModel()
    model.load_state_dict(load_file(str(checkpoint / "model.safetensors")))
    Trainer(ToyProgram(), config(), tmp_path / "cut").train(model, resume_from=checkpoint)
    for p, q in zip(reference.parameters(), model.parameters()):
        assert torch.equal(p, q)


def test_nonfinite_loss_stops_with_the_step_and_the_last_checkpoint(tmp_path):
    with pytest.raises(BertkitError, match=r"step 6: the loss is nan .*checkpoint-0000004"):
        train(tmp_path, program=ToyProgram(nan_at=6))
    assert ckpt.latest_checkpoint(tmp_path).name == "checkpoint-0000004"


def test_nonfinite_loss_skip_policy_skips_the_step(tmp_path):
    model, result = train(tmp_path, program=ToyProgram(nan_at=6), on_nonfinite="skip")
    assert result.skipped_steps == 1
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_incomplete_checkpoint_folders_are_ignored(tmp_path):
    train(tmp_path, max_steps=4)
    partial = tmp_path / ".checkpoint-0000008.abc.tmp"
    partial.mkdir()
    (tmp_path / "checkpoint-0000012").mkdir()  # no training_state.pt: not complete
    assert ckpt.latest_checkpoint(tmp_path).name == "checkpoint-0000004"
    ckpt.sweep_incomplete(tmp_path)
    assert not partial.exists()


def test_batch_size_must_split_over_micro_batches(tmp_path):
    with pytest.raises(ConfigError, match="batch_size"):
        Trainer(ToyProgram(), config(batch_size=8, micro_batch_size=3), tmp_path)


def test_linear_schedule_warms_up_then_decays_to_zero():
    param = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=1.0)
    sched = linear_schedule(opt, warmup_steps=4, max_steps=12)
    lrs = []
    for _ in range(12):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[:5] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert lrs[8] == pytest.approx(0.5) and sched.get_last_lr()[0] == 0.0


def test_no_weight_decay_on_biases_and_layer_norms():
    decay, no_decay = parameter_groups(ToyModel(), 0.01)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert {p.ndim for p in decay["params"]} == {2}
    assert len(no_decay["params"]) == 4  # two biases + LayerNorm weight and bias


def test_lamb_step_is_adam_direction_scaled_by_trust_ratio():
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(5, 3))
    g = torch.randn(5, 3)
    w.grad = g.clone()
    before = w.detach().clone()
    Lamb([w], lr=0.1, eps=1e-6).step()
    adam = g / (g.abs() + 1e-6)  # first step: m_hat = g, sqrt(v_hat) = |g|
    expected = before - 0.1 * adam * before.norm() / adam.norm()
    torch.testing.assert_close(w.detach(), expected)


def test_config_overrides_name_the_field():
    cfg = apply_overrides(TrainingConfig(), parse_set_arguments(["lr=5e-4", "max_steps=2000", "micro_batch_size=null"]))
    assert cfg.lr == 5e-4 and cfg.max_steps == 2000 and cfg.micro_batch_size is None
    with pytest.raises(ConfigError, match=r"unknown field 'lrr' \(did you mean 'lr'\?\)"):
        apply_overrides(TrainingConfig(), {"lrr": "1"})
    with pytest.raises(ConfigError, match="'max_steps' expects int"):
        apply_overrides(TrainingConfig(), {"max_steps": "many"})
    with pytest.raises(ConfigError, match="'optimizer' must be one of adamw, lamb"):
        apply_overrides(TrainingConfig(), {"optimizer": "sgd"})
    with pytest.raises(ConfigError, match="key=value"):
        parse_set_arguments(["lr"])


def test_bf16_autocast_trains_on_cpu_and_fp16_needs_a_gpu(tmp_path):
    model, result = train(tmp_path / "bf16", precision="bf16", max_steps=8)
    assert all(np.isfinite(r["loss"]) for r in result.records)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32
    with pytest.raises(ConfigError, match="fp16 with loss scaling needs a GPU"):
        train(tmp_path / "fp16", precision="fp16")


def test_lamb_optimizer_trains(tmp_path):
    _, result = train(tmp_path, optimizer="lamb", lr=0.02, max_steps=40)
    assert result.records[-1]["loss"] < 0.5 * result.records[0]["loss"]


def test_plot_file_names_come_from_panel_titles_safely():
    from bertkit.training.reporting import plot_file_stem

    assert plot_file_stem("MLM accuracy") == "mlm_accuracy"
    assert plot_file_stem("Replaced tokens: precision / recall") == "replaced_tokens_precision_recall"
    assert plot_file_stem("Next-token accuracy") == "next_token_accuracy"
    assert plot_file_stem("/") == "plot"
