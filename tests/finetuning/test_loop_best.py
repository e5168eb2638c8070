"""The shared loop's fine-tuning extensions on a toy program: best/ written at the best
evaluation (and only then), early stopping with a clean end, the best value carried
through a resume, and the program's epoch_order hook."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from bertkit.errors import ConfigError
from bertkit.training.config import TrainingConfig
from bertkit.training.loop import Trainer
from bertkit.training.program import TrainingProgram


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x):
        return self.linear(x).squeeze(-1)

    def save_pretrained(self, directory: Path, state_dict=None) -> None:
        state = state_dict or self.state_dict()
        save_file({k: v.detach().contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))


class ScriptedProgram(TrainingProgram):
    """Regression whose evaluations report a scripted 'score' sequence (one per evaluation)."""

    def __init__(self, scores: list[float], n: int = 16):
        self.x = np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32)
        self.y = self.x.sum(1)
        self.scores = list(scores)
        self.seen: list[tuple[int, bool]] = []
        self.orders: list[int] = []

    def num_train_examples(self):
        return len(self.x)

    def train_example(self, index, epoch):
        return {"x": self.x[index], "y": self.y[index]}

    def collate(self, examples):
        return {k: torch.tensor(np.array([e[k] for e in examples])) for k in examples[0]}

    def epoch_order(self, permutation, epoch, global_batch):
        self.orders.append(epoch)
        return np.sort(permutation)  # a deterministic regrouping: identity order

    def loss_counts(self, batch):
        return {"n": float(len(batch["y"]))}

    def compute_loss(self, model, batch, totals):
        loss = ((model(batch["x"]) - batch["y"]) ** 2).sum() / totals["n"]
        return loss, {}

    def summarize(self, stats):
        return {}

    def evaluate(self, model, ctx, batch_size, max_batches):
        return {"score": self.scores.pop(0), "loss": 1.0}

    def on_evaluate(self, step, metrics, improved):
        self.seen.append((step, improved))

    def save_pretrained(self, model, directory, state_dict=None):
        model.save_pretrained(directory, state_dict)


def config(**overrides) -> TrainingConfig:
    values = dict(max_steps=8, batch_size=4, lr=0.05, warmup_steps=0, log_steps=1, eval_steps=2, save_steps=100,
                  progress=False, tensorboard=False, metric_for_best="score")
    return TrainingConfig(**{**values, **overrides})


def test_best_dir_holds_the_best_evaluation(tmp_path):
    program = ScriptedProgram([0.2, 0.7, 0.5, 0.6])
    result = Trainer(program, config(), tmp_path).train(Toy())
    assert program.seen == [(2, True), (4, True), (6, False), (8, False)]
    assert (result.best_step, result.best_metric, result.best_dir) == (4, 0.7, tmp_path / "best")
    summary = json.loads((tmp_path / "best" / "best_metrics.json").read_text())
    assert summary["step"] == 4 and summary["metric_for_best"] == "score" and summary["eval_score"] == 0.7
    # best/ holds the weights after step 4, not the final ones
    best = load_file(tmp_path / "best" / "model.safetensors")
    final = load_file(tmp_path / "final" / "model.safetensors")
    assert not torch.equal(best["linear.weight"], final["linear.weight"])
    assert program.orders[0] == 0  # the epoch_order hook was asked for epoch 0
    assert not list(tmp_path.glob(".best.*"))


def test_lower_is_better_for_a_loss_and_explicit_override(tmp_path):
    program = ScriptedProgram([3.0, 1.0, 2.0, 4.0])
    result = Trainer(program, config(metric_for_best="eval_score", greater_is_better=False), tmp_path).train(Toy())
    assert (result.best_step, result.best_metric) == (4, 1.0)
    assert config(metric_for_best="eval_loss").best_is_greater() is False
    assert config(metric_for_best="f1").best_is_greater() is True


def test_early_stopping_stops_cleanly(tmp_path):
    program = ScriptedProgram([0.5, 0.4, 0.3, 0.9, 0.9], n=8)
    cfg = config(max_steps=20, early_stopping_patience=2, save_checkpoints=True, save_steps=2)
    result = Trainer(program, cfg, tmp_path).train(Toy())
    assert result.stopped_early and result.step == 6  # evaluations at 2 (best), 4, 6: two without improvement
    assert result.best_step == 2 and (tmp_path / "final" / "model.safetensors").is_file()
    assert (tmp_path / "checkpoint-0000006" / "training_state.pt").is_file()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in records) == 6


def test_resume_compares_with_the_saved_best(tmp_path):
    first = ScriptedProgram([0.9, 0.1])
    Trainer(first, config(max_steps=4, save_steps=2), tmp_path).train(Toy())
    second = ScriptedProgram([0.5])
    model = Toy()
    result = Trainer(second, config(max_steps=6, save_steps=2), tmp_path).train(
        model, resume_from=tmp_path / "checkpoint-0000004")
    assert second.seen == [(6, False)]
    assert result.best_step == 2 and result.best_metric == 0.9
    assert json.loads((tmp_path / "best" / "best_metrics.json").read_text())["step"] == 2


def test_missing_metric_and_patience_without_metric_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="reports no 'f1'; it reports loss, score"):
        Trainer(ScriptedProgram([0.1]), config(metric_for_best="f1", max_steps=2), tmp_path).train(Toy())
    with pytest.raises(ConfigError, match="early_stopping_patience.*metric_for_best"):
        TrainingConfig(early_stopping_patience=2)
    with pytest.raises(ConfigError, match="must be positive"):
        TrainingConfig(metric_for_best="f1", early_stopping_patience=0)


def test_without_checkpoints_only_final_and_best_are_written(tmp_path):
    Trainer(ScriptedProgram([0.1, 0.2]), config(max_steps=4, save_steps=2, save_checkpoints=False), tmp_path).train(Toy())
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["best", "final"]
