"""`--resume` does what the command line says or says why not (bertkit.training.resume):
saved paths resolve from any working directory, allowed changes are applied and named,
others refused in one line naming each field and its saved value, a copied run writes
only into the copy, the checkpoint and step are named, an unreadable newest checkpoint
falls back to the newest readable one; `--init-from` names the heads that start fresh."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64"]
QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]


def build_data(root: Path, name: str, vocab_size: int) -> Path:
    tok = root / f"tok-{name}"
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", str(vocab_size), "--output", str(tok),
                 "--no-progress", str(FIXTURE)]) == 0
    data = root / name
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--output", str(data),
                 "--eval-fraction", "0.2", str(FIXTURE)]) == 0
    return data


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """`main`: the data the runs train on; `same`: a copy at another path (the same tokenizer);
    `other`: data built with another tokenizer."""
    root = tmp_path_factory.mktemp("resume")
    main_data = build_data(root, "data", 400)
    same = root / "data-copy"
    shutil.copytree(main_data, same)
    return {"root": root, "main": main_data, "same": same, "other": build_data(root, "other", 300)}


def pretrain_args(data: Path | str, out: Path | str, *extra: str) -> list[str]:
    return ["pretrain", "--preset", "tiny", "--data", str(data), "--output-dir", str(out), *TINY, *QUIET,
            "--set", "batch_size=8", "--set", "warmup_steps=2", "--set", "lr=1e-3", "--set", "save_steps=1",
            "--set", "save_total_limit=3", "--set", "log_steps=1", *extra]


def resume(out: Path | str, *extra: str) -> list[str]:
    return ["pretrain", "--output-dir", str(out), "--resume", *QUIET, *extra]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "final" / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def one_line_error(capsys) -> str:
    message = capsys.readouterr().err.strip()
    assert message.startswith("bertkit: error: ") and "\n" not in message, message
    return message


def test_relative_paths_resume_from_another_working_directory(data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(data["root"])
    out = tmp_path / "run"
    assert main(pretrain_args("data", out, "--set", "max_steps=2")) == 0
    saved = json.loads((out / "run_config.json").read_text())
    assert saved["data"] == str(data["main"]) and saved["output_dir"] == str(out)  # stored absolute
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(resume(out, "--data", str(data["main"]), "--set", "max_steps=3")) == 0
    err = capsys.readouterr().err
    assert "data" not in err.split("applies", 1)[-1]  # the same data, named the same after resolving: no change
    # a run saved by an older bertkit with a relative path: an explicit --data replaces it (same tokenizer)
    saved = json.loads((out / "run_config.json").read_text())
    (out / "run_config.json").write_text(json.dumps({**saved, "data": "data"}))
    assert main(resume(out, "--data", str(data["main"]), "--set", "max_steps=4")) == 0
    err = capsys.readouterr().err
    assert f"resume applies from the command line: max_steps 4 (saved 3), data {data['main']} (saved " in err
    assert json.loads((out / "run_config.json").read_text())["data"] == str(data["main"])


def test_allowed_changes_are_applied_and_named(data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(pretrain_args(data["main"], out, "--set", "max_steps=2")) == 0
    capsys.readouterr()
    assert main(resume(out, "--data", str(data["same"]), "--set", "max_steps=4", "--set", "lr=5e-4")) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "applies" in line]
    assert lines == [f"bertkit: resume applies from the command line: max_steps 4 (saved 2), lr 0.0005 (saved 0.001), "
                     f"data {data['same']} (saved {data['main']})"]
    config = json.loads((out / "run_config.json").read_text())
    assert (config["max_steps"], config["lr"], config["data"]) == (4, 5e-4, str(data["same"]))
    # the new peak lr from the resumed step on: step 3 is past the 2 warm-up steps, decaying over 4
    lr = {r["step"]: r["lr"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "lr" in r}
    assert lr[3] == pytest.approx(5e-4) and lr[4] == pytest.approx(5e-4 / 2)
    assert "resumed from | checkpoint-0000002 (step 2); changed: max_steps 4 (saved 2)" in (out / "report.md").read_text()


def test_other_changes_are_refused_in_one_line(data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(pretrain_args(data["main"], out, "--set", "max_steps=2")) == 0
    before = (out / "run_config.json").read_text()
    capsys.readouterr()
    assert main(resume(out, "--objective", "electra", "--preset", "base", "--data", str(data["other"]),
                       "--set", "model.hidden_size=64")) == 1
    message = one_line_error(capsys)
    for part in ("objective electra (saved mlm_nsp)", "preset base (saved tiny)", "model.hidden_size 64 (saved 32)",
                 f"data {data['other']} (saved {data['main']}; built with another tokenizer than the checkpoint's)"):
        assert part in message, part
    assert (out / "run_config.json").read_text() == before and not (out / "checkpoint-0000003").exists()
    assert main(resume(out, "--set", "max_steps=1")) == 1
    assert "field 'max_steps' 1 is below the step of checkpoint-0000002 (2)" in one_line_error(capsys)


def test_a_copied_run_writes_only_into_the_copy(data, tmp_path, capsys):
    original = tmp_path / "original"
    assert main(pretrain_args(data["main"], original, "--set", "max_steps=2")) == 0
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    shutil.rmtree(copy / "final")
    snapshot = {p: p.read_bytes() for p in original.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(resume(copy, "--set", "max_steps=3")) == 0
    assert {p: p.read_bytes() for p in original.rglob("*") if p.is_file()} == snapshot
    assert not (original / "checkpoint-0000003").exists() and (copy / "checkpoint-0000003").is_dir()
    assert json.loads((copy / "run_config.json").read_text())["output_dir"] == str(copy)
    assert (copy / "report.md").read_text().startswith("# Pre-training run: copy")
    assert f"resuming {copy} from checkpoint-0000002 (step 2)" in capsys.readouterr().err


@pytest.mark.parametrize("damaged", ["training_state.pt", "model.safetensors"])
def test_an_unreadable_newest_checkpoint_falls_back_to_the_newest_readable(data, tmp_path, capsys, damaged):
    straight = tmp_path / "straight"
    assert main(pretrain_args(data["main"], straight, "--set", "max_steps=3")) == 0
    out = tmp_path / "cut"
    shutil.copytree(straight, out)  # the same run, killed after writing checkpoint 3 ...
    shutil.rmtree(out / "final")
    path = out / "checkpoint-0000003" / damaged
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # ... cut short on a disk that lost data
    capsys.readouterr()
    assert main(resume(out)) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bertkit:")]
    assert err[0].startswith(f"bertkit: warning: {path}: ")
    assert "bytes, the manifest records" in err[0]  # a cut file fails the manifest's size check first
    assert err[0].endswith("; resuming from the newest readable checkpoint, checkpoint-0000002")
    assert err[1] == f"bertkit: resuming {out} from checkpoint-0000002 (step 2)"
    assert_same_weights(straight, out)  # checkpoint 2 to the end: the uninterrupted run's weights


def test_no_readable_checkpoint_is_one_line(data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(pretrain_args(data["main"], out, "--set", "max_steps=1")) == 0
    (out / "checkpoint-0000001" / "training_state.pt").write_bytes(b"not a checkpoint")
    capsys.readouterr()
    assert main(resume(out)) == 1
    assert "no checkpoint in" in one_line_error(capsys)


def test_init_from_without_heads_names_the_fresh_heads(data, tmp_path, capsys):
    from bertkit import BertForPreTraining, Tokenizer

    base = tmp_path / "base"
    assert main(pretrain_args(data["main"], base, "--set", "max_steps=1")) == 0
    encoder = tmp_path / "encoder"  # an encoder-only checkpoint (no MLM/NSP heads), as most published ones
    BertForPreTraining.from_pretrained(base / "final").bert.save_pretrained(encoder)
    Tokenizer.from_pretrained(base / "final").save_pretrained(encoder)
    capsys.readouterr()
    out = tmp_path / "adapt"
    assert main(["pretrain", "--init-from", str(encoder), "--data", str(data["main"]), "--output-dir", str(out), *QUIET,
                 "--set", "max_steps=1", "--set", "batch_size=8"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "initialised fresh" in line]
    assert len(notes) == 1 and notes[0].startswith(f"bertkit: BertForPreTraining from {encoder}: initialised fresh: ")
    for head in ("cls.predictions.transform.dense.weight", "cls.seq_relationship.weight"):
        assert head in notes[0]
        assert head in (out / "report.md").read_text().split("| initialised fresh |")[1].splitlines()[0]
    assert "bert.encoder" not in notes[0]


def test_general_distillation_resume_shares_the_rules(data, tmp_path, monkeypatch, capsys):
    from bertkit import BertConfig, BertForPreTraining, Tokenizer

    tokenizer = Tokenizer.from_pretrained(data["main"] / "tokenizer")
    teacher = tmp_path / "teacher"
    torch.manual_seed(0)
    BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                              num_attention_heads=2, intermediate_size=64,
                                              max_position_embeddings=64)).save_pretrained(teacher)
    tokenizer.save_pretrained(teacher)
    monkeypatch.chdir(tmp_path)
    common = ["--no-progress", "--set", "tensorboard=false", "--batch-size", "4", "--set", "warmup_steps=1"]
    assert main(["distill", "--teacher", "teacher", "--data", str(data["main"]), "--output-dir", "run",
                 "--student-layers", "1", "--max-steps", "2", "--set", "save_steps=1", *common]) == 0
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "run", copy)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["distill", "--output-dir", str(copy), "--resume", "--student-layers", "2", *common]) == 1
    assert "student_layers 2 (saved 1)" in one_line_error(capsys)
    assert main(["distill", "--output-dir", str(copy), "--resume", "--max-steps", "3", *common]) == 0
    err = capsys.readouterr().err
    assert f"resuming {copy} from checkpoint-0000002 (step 2)" in err and "max_steps 3 (saved 2)" in err
    assert (copy / "checkpoint-0000003").is_dir() and not (tmp_path / "run" / "checkpoint-0000003").exists()
