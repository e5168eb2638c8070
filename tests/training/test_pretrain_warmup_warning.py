"""`bertkit pretrain --set max_steps=20` keeps the default 1,000 warm-up steps: a one-line
warning says the learning rate never reaches its peak (a short smoke run otherwise looks stuck)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertkit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64", "--set", "progress=false",
        "--set", "tensorboard=false", "--set", "batch_size=4", "--set", "max_steps=2"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("warmup")
    assert main(["tokenizer", "train", "--vocab-size", "300", "--output", str(root / "tok"), "--no-progress",
                 str(FIXTURE)]) == 0
    assert main(["data", "build", "--tokenizer", str(root / "tok"), "--max-seq-length", "32", "--output",
                 str(root / "data"), "--no-progress", str(FIXTURE)]) == 0
    return root / "data"


@pytest.mark.parametrize("warmup, warned", [(None, True), ("2", True), ("1", False), ("0", False)])
def test_warmup_not_below_max_steps_warns(warmup, warned, data_dir, tmp_path, capsys):
    extra = [] if warmup is None else ["--set", f"warmup_steps={warmup}"]
    capsys.readouterr()
    assert main(["pretrain", "--preset", "tiny", "--data", str(data_dir), "--output-dir", str(tmp_path / "run"),
                 *TINY, *extra]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "warmup_steps" in line]
    if warned:
        expected = 1000 if warmup is None else int(warmup)
        assert lines == [f"bertkit: warning: warmup_steps {expected} >= max_steps 2: the learning rate never reaches "
                         "its peak 0.0001 (lower it with --set warmup_steps=N)"]
    else:
        assert lines == []
