"""Long documents in pre-training data: `bertkit data build --max-seq-length 4096 / 8192` on a
small fixture (packed instances fill the length with whole sentences; the NSP format's pairs run past 512), and
`bertkit pretrain --max-seq-length 4096` gives a fresh BigBird a 4,096-position table and takes
such data (a data length over the table is one line naming both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.data.dataset import PretrainingDataset

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"  # ~45k characters, ~17k tokens


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("longtok")
    assert main(["tokenizer", "train", "--vocab-size", "500", "--output", str(root / "tok"), "--no-progress",
                 "--threads", "1", str(CORPUS)]) == 0
    return root / "tok"


def build(tokenizer_dir, output, length, instance_format="packed"):
    assert main(["data", "build", "--tokenizer", str(tokenizer_dir), "--output", str(output), "--max-seq-length",
                 str(length), "--format", instance_format, "--eval-fraction", "0", "--no-progress", "--threads", "1",
                 str(CORPUS)]) == 0
    return PretrainingDataset.open(output)


@pytest.mark.parametrize("length", [4096, 8192])
def test_packed_instances_fill_4096_and_8192_tokens(length, tokenizer_dir, tmp_path):
    data = build(tokenizer_dir, tmp_path / f"d{length}", length)
    assert data.info.max_seq_length == length
    lengths = [len(data[i]["input_ids"]) for i in range(len(data))]
    assert max(lengths) <= length and len(lengths) >= 2
    assert sorted(lengths)[-2] > 0.9 * length  # whole sentences packed up to the length (the corpus's tail shorter)


def test_nsp_pairs_run_past_512_tokens(tokenizer_dir, tmp_path):
    data = build(tokenizer_dir, tmp_path / "nsp", 4096, "nsp")
    assert max(len(data[i]["input_ids"]) for i in range(len(data))) > 512


def test_pretrain_max_seq_length_sets_the_position_table(tokenizer_dir, tmp_path, capsys):
    data_dir = tmp_path / "d4096"
    build(tokenizer_dir, data_dir, 4096)
    run = ["pretrain", "--objective", "mlm", "--preset", "bigbird-tiny", "--data", str(data_dir), "--max-steps", "1",
           "--batch-size", "1", "--no-progress", "--threads", "1"]
    assert main([*run, "--max-seq-length", "4096", "--output-dir", str(tmp_path / "run")]) == 0
    config = json.loads((tmp_path / "run" / "final" / "config.json").read_text())
    assert config["max_position_embeddings"] == 4096 and config["model_type"] == "big_bird"
    capsys.readouterr()
    assert main([*run, "--max-seq-length", "2048", "--output-dir", str(tmp_path / "short")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "max_seq_length 4096 exceeds the model's max_position_embeddings 2048" in err


def test_pretrain_max_seq_length_must_be_positive(tmp_path, capsys):
    """The flag is named as the user typed it, before any data is read."""
    assert main(["pretrain", "--objective", "mlm", "--preset", "bigbird-tiny", "--data", str(tmp_path),
                 "--output-dir", str(tmp_path / "out"), "--max-seq-length", "0"]) != 0
    assert capsys.readouterr().err.strip() == "bertkit: error: --max-seq-length: must be a positive number of positions, got 0"
