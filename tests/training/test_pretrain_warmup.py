"""Warm-up that suits the run's length: left unset, `warmup_steps` is `warmup_ratio` (1%, the
paper's 10k of 1M steps) of `max_steps`, so a short run reaches its peak lr; an explicit
`--set warmup_steps=N` still wins, and one that lasts the whole run is warned about in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64", "--set", "progress=false",
        "--set", "tensorboard=false", "--set", "batch_size=4", "--set", "log_steps=1"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("warmup")
    assert main(["tokenizer", "train", "--vocab-size", "300", "--output", str(root / "tok"), "--no-progress",
                 str(FIXTURE)]) == 0
    assert main(["data", "build", "--tokenizer", str(root / "tok"), "--max-seq-length", "32", "--output",
                 str(root / "data"), "--no-progress", str(FIXTURE)]) == 0
    return root / "data"


def pretrain(data_dir: Path, out: Path, max_steps: int, *extra: str) -> list[float]:
    """Run under the paper's recipe (the schedule's rules, not a family's values); the lr of every step."""
    assert main(["pretrain", "--recipe", "bert", "--preset", "tiny", "--data", str(data_dir), "--output-dir", str(out), *TINY,
                 "--set", f"max_steps={max_steps}", *extra]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["lr"] for r in records if "lr" in r]


@pytest.mark.parametrize("warmup, warned", [(None, False), ("2", True), ("1", False), ("0", False)])
def test_warmup_not_below_max_steps_warns(warmup, warned, data_dir, tmp_path, capsys):
    extra = [] if warmup is None else ["--set", f"warmup_steps={warmup}"]
    capsys.readouterr()
    pretrain(data_dir, tmp_path / "run", 2, *extra)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bertkit: warning")]
    if warned:
        assert lines == [f"bertkit: warning: warmup_steps {warmup} >= max_steps 2: the learning rate never reaches "
                         "its peak 0.0001 (lower it with --set warmup_steps=N, or leave it unset for warmup_ratio "
                         "0.01 of the run)"]
    else:
        assert lines == []


def test_a_short_run_reaches_its_peak_lr(data_dir, tmp_path):
    """Before, a 2-step run kept 1,000 warm-up steps: its lr peaked at 1e-7 of 1e-4."""
    assert max(pretrain(data_dir, tmp_path / "run", 2)) == pytest.approx(1e-4)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| 0.0001, 0 steps (warmup_ratio 0.01 of 2) |" in report


def test_warmup_ratio_and_steps_lay_out_the_schedule(data_dir, tmp_path):
    """10% of 10 steps warms up over 1 step then decays linearly to 0; an explicit warmup_steps wins."""
    lrs = pretrain(data_dir, tmp_path / "ratio", 10, "--set", "warmup_ratio=0.1", "--set", "lr=1e-3")
    assert lrs == pytest.approx([0.0] + [1e-3 * (10 - s) / 9 for s in range(1, 10)])
    assert "| 0.001, 1 step (warmup_ratio 0.1 of 10) |" in (tmp_path / "ratio" / "report.md").read_text()
    lrs = pretrain(data_dir, tmp_path / "steps", 10, "--set", "warmup_ratio=0.1", "--set", "warmup_steps=4",
                   "--set", "lr=1e-3")
    assert lrs[:5] == pytest.approx([0.0, 2.5e-4, 5e-4, 7.5e-4, 1e-3])
    assert "| 0.001, 4 steps |" in (tmp_path / "steps" / "report.md").read_text()
