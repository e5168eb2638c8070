"""`bertkit evaluate squad` end to end through bertkit.cli.main: one JSON object on stdout, one-line errors."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from bertkit.cli import main

SHARED_DATA = Path(os.environ.get("BERTKIT_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
DEV_V11 = SHARED_DATA / "squad" / "dev-v1.1.json"

V2_DATA = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [
    {"id": "q1", "question": "?", "is_impossible": False, "answers": [{"text": "Denver Broncos", "answer_start": 0}]},
    {"id": "q2", "question": "?", "is_impossible": False, "answers": [{"text": "Carolina", "answer_start": 0}]},
    {"id": "q3", "question": "?", "is_impossible": True, "answers": []},
]}]}]}


def write_json(path: Path, obj) -> str:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return str(path)


@pytest.mark.skipif(not DEV_V11.exists(), reason="shared SQuAD dev-v1.1.json not available")
def test_squad_v11_real_dev_set(tmp_path, capsys):
    dataset = json.loads(DEV_V11.read_text(encoding="utf-8"))
    predictions = {qa["id"]: qa["answers"][0]["text"]
                   for article in dataset["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]}
    preds = write_json(tmp_path / "preds.json", predictions)
    assert main(["evaluate", "squad", "--data", str(DEV_V11), "--predictions", preds]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    assert json.loads(out) == {"exact_match": 100.0, "f1": 100.0}


def test_squad_v2_with_na_probs_and_missing_prediction(tmp_path, capsys):
    data = write_json(tmp_path / "dev-v2.0.json", V2_DATA)
    preds = write_json(tmp_path / "preds.json", {"q1": "Denver Broncos", "q3": "Santa Clara"})
    na = write_json(tmp_path / "na.json", {"q1": 0.2, "q3": 0.7})
    assert main(["evaluate", "squad", "--data", data, "--predictions", preds, "--na-prob", na]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
                            "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    # q1 right, q2 missing (0), q3 wrong; best: answer q1 only (threshold 0.2) -> q1 and q3 right
    assert result["exact"] == pytest.approx(100 / 3) and result["total"] == 3
    assert result["best_exact"] == pytest.approx(200 / 3) and result["best_exact_thresh"] == 0.2
    assert "bertkit: warning: 1 of 3 questions have no prediction and score 0 (first: q2)" in captured.err


def test_squad_version_override_and_threshold(tmp_path, capsys):
    data = write_json(tmp_path / "dev.json", V2_DATA)
    preds = write_json(tmp_path / "preds.json", {"q1": "Denver Broncos", "q2": "Carolina", "q3": "Santa Clara"})
    na = write_json(tmp_path / "na.json", {"q1": 0.2, "q2": 0.1, "q3": 0.7})
    assert main(["evaluate", "squad", "--data", data, "--predictions", preds, "--na-prob", na,
                 "--na-prob-thresh", "0.5", "--version", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["exact"] == pytest.approx(100.0)  # q3 (0.7 > 0.5) -> "no answer"


@pytest.mark.parametrize("setup,message", [
    (lambda d: (d / "missing.json", None), r"missing.json: no such file"),
    (lambda d: (d / "data.json", "{not json"), r"data.json: not valid JSON \(line 1, column 2"),
    (lambda d: (d / "data.json", '{"version": "1.1"}'), r"data.json: not a SQuAD dataset"),
])
def test_bad_dataset_file_is_one_line_error(tmp_path, capsys, setup, message):
    path, content = setup(tmp_path)
    if content is not None:
        path.write_text(content, encoding="utf-8")
    preds = write_json(tmp_path / "preds.json", {})
    assert main(["evaluate", "squad", "--data", str(path), "--predictions", preds]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertkit: error: ") and len(err.strip().splitlines()) == 1
    assert re.search(message, err)


@pytest.mark.parametrize("content,message", [
    ('["a", "b"]', r"preds.json: expected a JSON object mapping question ids to answer texts, got a JSON array"),
    ('{"q1": 3}', r"preds.json: prediction for 'q1' is not a string \(got JSON number\)"),
    (b'{"q1": "\xff"}', r"preds.json: not valid UTF-8"),
])
def test_bad_predictions_file_is_one_line_error(tmp_path, capsys, content, message):
    data = write_json(tmp_path / "dev.json", V2_DATA)
    preds = tmp_path / "preds.json"
    preds.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["evaluate", "squad", "--data", data, "--predictions", str(preds)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err)


def test_na_prob_with_v1_scoring_and_bad_na_file(tmp_path, capsys):
    v1 = {"version": "1.1", "data": [{"paragraphs": [{"qas": [{"id": "q1", "answers": [{"text": "x"}]}]}]}]}
    data, preds = write_json(tmp_path / "v1.json", v1), write_json(tmp_path / "preds.json", {"q1": "x"})
    na = write_json(tmp_path / "na.json", {"q1": 0.5})
    assert main(["evaluate", "squad", "--data", data, "--predictions", preds, "--na-prob", na]) == 1
    assert "--na-prob applies to SQuAD v2.0 scoring" in capsys.readouterr().err
    bad_na = write_json(tmp_path / "bad_na.json", {"q1": "high"})
    assert main(["evaluate", "squad", "--data", data, "--predictions", preds, "--na-prob", bad_na]) == 1
    assert "bad_na.json: no-answer probability for 'q1' is 'high', expected a number" in capsys.readouterr().err


def test_evaluate_without_task_prints_help(capsys):
    assert main(["evaluate"]) == 2
    assert "squad" in capsys.readouterr().out


def test_squad_help_says_each_routes_threshold_unit(capsys):
    """v2.0 thresholds: --model gives a null-score difference, --predictions with --na-prob the file's unit
    (a probability for dev_na_probs.json); --help says which route prints which."""
    with pytest.raises(SystemExit):
        main(["evaluate", "squad", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "with --model a score difference, null score minus best span score" in text
    assert "best_exact_thresh_unit and best_f1_thresh_unit" in text
    assert "with --predictions and --na-prob the unit of the --na-prob file, as the official script" in text
