"""`bertkit finetune text2text`, `evaluate text2text` and `predict` end to end on a tiny random
T5 (a Unigram tokenizer with sentinels trained on a fixture), plus the commands' bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bertkit.cli import main

from conftest import FIXTURES, QUIET

AUSTEN = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
WORDS = "a good fine long short old young great small house room sister letter day".split()


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory) -> Path:
    """A 2-layer, d_model-32 random T5ForConditionalGeneration with a 300-token Unigram
    tokenizer (100 sentinels) trained on the Austen fixture."""
    import torch

    from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
    from bertkit.tokenization import Tokenizer

    root = tmp_path_factory.mktemp("t2t")
    assert main(["tokenizer", "train", "--algorithm", "unigram", "--vocab-size", "300", "--sentinels", "100",
                 "--output", str(root / "tok"), str(AUSTEN)]) == 0
    tokenizer = Tokenizer.from_pretrained(root / "tok")
    torch.manual_seed(0)
    config = T5Config(vocab_size=tokenizer.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      decoder_start_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id)
    model_dir = root / "t5"
    T5ForConditionalGeneration(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


def toy_pairs(path: Path, count: int, seed: int) -> Path:
    """A 2-label mapping: "miss ..." -> yes, "mister ..." -> no (chance: 50% exact match)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        label = rng.choice(["yes", "no"])
        body = " ".join(rng.choice(WORDS) for _ in range(4))
        rows.append({"input": f"{'miss' if label == 'yes' else 'mister'} {body}", "output": label})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def toy_run(t5_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    train, dev = toy_pairs(root / "train.jsonl", 64, 0), toy_pairs(root / "dev.jsonl", 32, 1)
    out = root / "run"
    assert main(["finetune", "text2text", "--train", str(train), "--dev", str(dev), "--source-field", "input",
                 "--target-field", "output", "--model", str(t5_dir), "--output-dir", str(out), "--epochs", "8",
                 "--batch-size", "16", "--lr", "3e-3", *QUIET]) == 0
    return out


def test_finetune_learns_the_toy_task_and_keeps_the_best_model(toy_run, capsys):
    best = json.loads((toy_run / "best" / "best_metrics.json").read_text())
    assert best["metric_for_best"] == "exact_match"
    task = json.loads((toy_run / "best" / "bertkit_task.json").read_text())
    assert task["family"] == "text2text" and task["text2text_task"] == "pairs"
    assert task["max_target_length"] is not None  # from the data: what predict generates at most
    report = (toy_run / "report.md").read_text()
    assert "text-to-text (pairs: input -> output)" in report and "dev_predictions.jsonl" in report
    predictions = [json.loads(line) for line in (toy_run / "dev_predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 32 and set(predictions[0]) == {"source", "target", "generated_text"}
    assert (toy_run / "loss.png").is_file() and (toy_run / "dev_exact_match.png").is_file()
    capsys.readouterr()
    assert main(["evaluate", "text2text", "--model", str(toy_run / "best"), "--data",
                 str(toy_run.parent / "dev.jsonl"), "--no-progress"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    scores = json.loads(out[0])
    assert set(scores) == {"exact_match", "f1", "examples"} and scores["examples"] == 32
    assert scores["exact_match"] > 75.0  # chance is 50
    metrics = [json.loads(line) for line in (toy_run / "metrics.jsonl").read_text().splitlines()]
    assert max(r["eval_exact_match"] for r in metrics if "eval_exact_match" in r) == best["eval_exact_match"]
    assert scores["exact_match"] == pytest.approx(best["eval_exact_match"])  # evaluate scores best/ as training did


def test_predict_generates_text_from_a_text2text_best_model(toy_run, capsys):
    capsys.readouterr()
    assert main(["predict", "--model", str(toy_run / "best"), "miss a good day", "mister old house"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [line["text"] for line in lines] == ["miss a good day", "mister old house"]
    assert all(set(line) == {"text", "generated_text"} for line in lines)
    assert sum(line["generated_text"] == want for line, want in zip(lines, ["yes", "no"])) >= 1


def test_glue_task_end_to_end_reports_the_official_metric_and_invalid_outputs(t5_dir, tmp_path, capsys):
    rte = FIXTURES / "glue" / "RTE" / "dev.tsv"
    out = tmp_path / "rte"
    assert main(["finetune", "text2text", "--task", "glue", "--glue-task", "rte", "--train", str(rte), "--dev",
                 str(rte), "--model", str(t5_dir), "--output-dir", str(out), "--epochs", "1", "--batch-size", "16",
                 "--max-seq-length", "64", *QUIET]) == 0
    assert "| epoch | step | accuracy | invalid |" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main(["evaluate", "text2text", "--model", str(out / "best"), "--task", "glue", "--glue-task", "rte",
                 "--data", str(rte.parent), "--no-progress"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert set(scores) == {"accuracy", "invalid", "examples"}
    assert 0 <= scores["invalid"] <= scores["examples"]


def test_a_target_longer_than_the_limit_is_cut_with_one_warning_and_counted(t5_dir, tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    rows = [{"input": "say a lot", "output": "the sister wrote a long letter to the house every day"},
            {"input": "say little", "output": "no"}, {"input": "say more", "output": "a long letter to the sister"}]
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["finetune", "text2text", "--train", str(train), "--dev", str(train), "--max-target-length", "5",
                 "--model", str(t5_dir), "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 *QUIET]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [f"bertkit: warning: {train}: 2 of 3 targets are longer than max_target_length "
                        "(5 tokens) and were cut"]
    assert "| train targets cut to 5 tokens | 2 |" in (out / "report.md").read_text()


def error_line(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertkit: error: "), err
    return err[0].removeprefix("bertkit: error: ")


def test_bad_input_is_one_line(t5_dir, tiny_model_dir, tmp_path, capsys):
    pairs = toy_pairs(tmp_path / "p.jsonl", 4, 0)
    common = ["--output-dir", str(tmp_path / "run"), *QUIET]
    line = error_line(capsys, ["finetune", "text2text", "--train", str(pairs), "--model", str(tiny_model_dir),
                               *common])
    assert line.startswith(f"{tiny_model_dir}") and "text2text" in line  # a BERT cannot generate
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"input": "ok", "output": "y"}\n{"input": "", "output": "y"}\n')
    assert error_line(capsys, ["finetune", "text2text", "--train", str(empty), "--model", str(t5_dir), *common]) \
        == f"{empty}:2: empty source (field 'input'), nothing to generate from"
    latin = tmp_path / "latin.tsv"
    latin.write_bytes(b"input\toutput\nok\ty\ncaf\xe9\ty\n")
    assert error_line(capsys, ["finetune", "text2text", "--train", str(latin), "--model", str(t5_dir),
                               *common]).startswith(f"{latin}:3: ")
    assert "--glue-task" in error_line(capsys, ["finetune", "text2text", "--task", "glue", "--data",
                                                str(FIXTURES / "glue" / "RTE"), "--model", str(t5_dir), *common])


@pytest.mark.parametrize("task, train, keys", [
    ("squad", "squad_train-v1.1.json", {"exact_match", "f1", "examples"}),
    ("ner", "conll2003/eng.testa", {"precision", "recall", "f1", "invalid", "examples"}),
])
def test_squad_and_ner_run_through_their_readers_and_official_scores(t5_dir, tmp_path, capsys, task, train, keys):
    dev = FIXTURES / ("squad_dev-v1.1.json" if task == "squad" else train)
    out = tmp_path / task
    assert main(["finetune", "text2text", "--task", task, "--train", str(FIXTURES / train), "--dev", str(dev),
                 "--model", str(t5_dir), "--output-dir", str(out), "--max-seq-length", "96", "--set", "max_steps=2",
                 *QUIET]) == 0
    capsys.readouterr()
    assert main(["evaluate", "text2text", "--model", str(out / "best"), "--data", str(dev), "--no-progress"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == keys
