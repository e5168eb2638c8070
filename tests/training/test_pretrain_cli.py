"""`bertkit pretrain` end to end on a tiny model: checkpoints that transformers loads,
resume after SIGKILL to bit-identical weights, two-process DDP equal to one process,
and one-line errors on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _sigkill import kill_after_checkpoint
from safetensors.torch import load_file

from bertkit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64"]
QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]


def run_cli(args: list[str], capsys=None) -> int:
    return main(args)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pretrain")
    tok = root / "tok"
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "400", "--output", str(tok),
                 "--no-progress", str(FIXTURE)]) == 0
    data = root / "data"
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--output", str(data),
                 "--eval-fraction", "0.2", str(FIXTURE)]) == 0
    return data


def pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--preset", "tiny", "--data", str(data), "--output-dir", str(out), *TINY, *QUIET,
            "--set", "batch_size=8", "--set", "warmup_steps=2", "--set", "lr=1e-3", *extra]


def read_metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_pretrain_writes_checkpoints_transformers_loads(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(pretrain_args(data_dir, out, "--set", "max_steps=6", "--set", "save_steps=3", "--set", "eval_steps=3",
                              "--set", "log_steps=2")) == 0
    final = out / "final"
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        assert (final / name).is_file(), name
    assert (out / "report.md").is_file() and (out / "loss.png").is_file() and (out / "mlm_accuracy.png").is_file()
    records = read_metrics(out)
    assert [r["step"] for r in records if "loss" in r] == [2, 4, 6]
    assert any("eval_mlm_accuracy" in r and "eval_mlm_perplexity" in r and "eval_nsp_accuracy" in r for r in records)
    assert {"loss", "lr", "tok/s", "mlm_accuracy", "nsp_accuracy"} <= set(records[0])

    import transformers

    reference = transformers.BertForPreTraining.from_pretrained(final)
    tokenizer = transformers.AutoTokenizer.from_pretrained(final)
    from bertkit import BertForPreTraining, Tokenizer

    ours = BertForPreTraining.from_pretrained(final)
    batch = Tokenizer.from_pretrained(final)(["Emma was handsome and clever.", "She walked in."], padding=True, return_tensors="pt")
    assert tokenizer(["Emma was handsome and clever."])["input_ids"][0] == batch["input_ids"][0].tolist()
    with torch.no_grad():
        theirs = reference(**{k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")})
        mine = ours(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"])
    real = batch["attention_mask"].bool()  # padding positions: the unpadded path leaves zeros there
    torch.testing.assert_close(mine.prediction_logits[real], theirs.prediction_logits[real], atol=1e-4, rtol=1e-4)
    assert main(["fill-mask", "--model", str(final), "Emma was [MASK]."]) == 0
    assert len(list(out.glob("checkpoint-*"))) == 2 and (out / "checkpoint-0000006" / "training_state.pt").is_file()


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def test_sigkill_then_resume_ends_bit_identical(data_dir, tmp_path):
    steps = ["--set", "max_steps=40", "--set", "save_steps=5", "--set", "eval_steps=20", "--set", "save_total_limit=3"]
    reference = tmp_path / "ref"
    assert main(pretrain_args(data_dir, reference, *steps)) == 0

    killed = tmp_path / "killed"
    kill_after_checkpoint(pretrain_args(data_dir, killed, *steps), killed, "checkpoint-0000010")
    assert main(pretrain_args(data_dir, killed, *steps, "--resume")) == 0
    ref, resumed = _weights(reference / "final"), _weights(killed / "final")
    assert ref.keys() == resumed.keys()
    for key in ref:
        assert torch.equal(ref[key], resumed[key]), key


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_processes_match_one_process(data_dir, tmp_path, parallel):
    common = ["--set", "max_steps=4", "--set", "log_steps=1", "--set", "save_steps=100", "--set", "eval_steps=100",
              "--set", "model.hidden_dropout_prob=0", "--set", "model.attention_probs_dropout_prob=0"]
    single = tmp_path / "single"
    assert main(pretrain_args(data_dir, single, *common)) == 0
    double = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(29517 + (parallel == "fsdp")),
           "-m", "bertkit", *pretrain_args(data_dir, double, *common, "--set", f"parallel={parallel}")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    one = [r["loss"] for r in read_metrics(single) if "loss" in r]
    two = [r["loss"] for r in read_metrics(double) if "loss" in r]
    assert len(one) == len(two) == 4
    assert two == pytest.approx(one, rel=1e-5)
    a, b = _weights(single / "final"), _weights(double / "final")
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-5, rtol=1e-4)


def test_errors_are_one_line(data_dir, tmp_path, capsys):
    def error(args: list[str]) -> str:
        assert main(args) == 1
        message = capsys.readouterr().err.strip()
        assert message.startswith("bertkit: error: ") and "\n" not in message
        return message

    out = tmp_path / "run"
    assert "no checkpoint to resume from" in error(pretrain_args(data_dir, out, "--resume"))
    assert "unknown field 'lrr' (did you mean 'lr'?)" in error(pretrain_args(data_dir, out, "--set", "lrr=1"))
    assert "field 'masking' must be one of" in error(pretrain_args(data_dir, out, "--set", "masking=words"))
    assert "no such" in error(pretrain_args(tmp_path / "nothing", out))
    assert main(pretrain_args(data_dir, out, "--set", "max_steps=1")) == 0
    capsys.readouterr()  # that run's own output (its warm-up warning)
    assert "already holds a run" in error(pretrain_args(data_dir, out, "--set", "max_steps=1"))
    # a model whose vocabulary is not the one the data was built with
    other = tmp_path / "other"
    from bertkit import BertConfig, BertForPreTraining

    BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=999, hidden_size=32, num_attention_heads=2,
                                              intermediate_size=64)).save_pretrained(other)
    message = error(pretrain_args(data_dir, tmp_path / "adapt", "--init-from", str(other)))
    assert "tokenizer of" in message and "999" in message
    # the run folder written before the error is intact
    assert (out / "final" / "model.safetensors").is_file()


def test_continued_pretraining_from_a_checkpoint(data_dir, tmp_path):
    base = tmp_path / "base"
    assert main(pretrain_args(data_dir, base, "--set", "max_steps=2")) == 0
    adapted = tmp_path / "adapt"
    assert main(["pretrain", "--init-from", str(base / "final"), "--data", str(data_dir), "--output-dir", str(adapted),
                 *QUIET, "--set", "max_steps=2", "--set", "batch_size=8"]) == 0
    config = json.loads((adapted / "final" / "config.json").read_text())
    assert config["hidden_size"] == 32 and config["architectures"] == ["BertForPreTraining"]


def test_the_flags_users_type_set_their_fields(data_dir, tmp_path):
    """--max-steps, --lr, --batch-size and --seed are the fields max_steps, lr, batch_size and seed;
    --set still wins over a flag (pretrain_args sets batch_size=8 and lr=1e-3)."""
    out = tmp_path / "flags"
    assert main(["pretrain", "--preset", "tiny", "--data", str(data_dir), "--output-dir", str(out), *TINY, *QUIET,
                 "--max-steps", "2", "--lr", "3e-4", "--batch-size", "4", "--seed", "7", "--set", "warmup_steps=1"]) == 0
    saved = json.loads((out / "run_config.json").read_text())
    assert (saved["max_steps"], saved["lr"], saved["batch_size"], saved["seed"]) == (2, 3e-4, 4, 7)
    assert main(pretrain_args(data_dir, tmp_path / "set_wins", "--max-steps", "1", "--lr", "3e-4")) == 0
    assert json.loads((tmp_path / "set_wins" / "run_config.json").read_text())["lr"] == 1e-3
