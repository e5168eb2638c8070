"""`bertkit evaluate squad --model DIR`: the scoring version comes from the dataset file (as
with --predictions and as --help says), not from the version the model was fine-tuned on."""

from __future__ import annotations

import json

from bertkit.cli import main

from conftest import QUIET

V1_KEYS = {"exact_match", "f1"}
V2_KEYS = {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1",
           "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
           "best_exact_thresh_unit", "best_f1_thresh_unit"}  # --model: thresholds are null-score differences


def _finetune_v1(tiny_model_dir, fixtures, output_dir) -> str:
    assert main(["finetune", "squad", "--train", str(fixtures / "squad_train-v1.1.json"),
                 "--model", str(tiny_model_dir), "--output-dir", str(output_dir), "--max-seq-length", "64",
                 "--doc-stride", "16", "--batch-size", "8", "--set", "max_steps=2", *QUIET]) == 0
    return str(output_dir / "final")


def _evaluate(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["evaluate", "squad", *args, "--no-progress"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    return json.loads(line)


def test_v1_model_scores_a_v2_file_as_v2_and_a_v11_file_as_v11(tiny_model_dir, fixtures, tmp_path, capsys):
    model = _finetune_v1(tiny_model_dir, fixtures, tmp_path / "squad1")
    v2 = _evaluate(capsys, "--model", model, "--data", str(fixtures / "squad_v2-handmade.json"))
    assert set(v2) == V2_KEYS and v2["NoAns_total"] > 0  # was: "no answers (a SQuAD v1.1 question needs one ...)"
    v1 = _evaluate(capsys, "--model", model, "--data", str(fixtures / "squad_dev-v1.1.json"))
    assert set(v1) == V1_KEYS
    forced = _evaluate(capsys, "--model", model, "--data", str(fixtures / "squad_dev-v1.1.json"), "--version", "2")
    assert "exact_match" not in forced and forced["HasAns_total"] == forced["total"]  # v2.0 keys, all answerable
