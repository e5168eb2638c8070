"""One scale: every family's scores in percent (against scikit-learn x 100), report.md and
the plots say so, the best checkpoint is the one the fraction scale picked, and a QA run on
a KorQuAD 1.0 file is scored (and reported) with KorQuAD's rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bertkit.cli import main
from bertkit.evaluation.metrics import axis_label, format_metric, is_percent_metric, percent, percentages
from bertkit.tasks.multiple_choice import multiple_choice_metrics
from bertkit.tasks.programs import TaskData, TaskSpec

from conftest import QUIET, read_jsonl


def test_percent_helpers():
    assert percent(0.8166) == pytest.approx(81.66) and percent(3, 4) == 75.0
    assert percentages({"f1": 0.5, "accuracy": 1.0}) == {"f1": 50.0, "accuracy": 100.0}
    for name in ("accuracy", "eval_f1", "mcc", "spearmanr", "combined", "f1_macro", "HasAns_exact", "best_f1",
                 "exact_match", "eval_mlm_accuracy", "disc_precision", "disc_recall", "span_accuracy"):
        assert is_percent_metric(name), name
    for name in ("loss", "eval_loss", "mse", "mlm_perplexity", "best_f1_thresh", "total", "replaced_fraction",
                 "soft_loss", "lr"):
        assert not is_percent_metric(name), name
    assert format_metric("eval_f1", 81.6612) == "81.66" and format_metric("loss", 0.412734) == "0.4127"
    assert axis_label(["accuracy", "eval_accuracy"]) == "percent (0-100)" and axis_label(["loss", "f1"]) is None


def test_multiple_choice_accuracy_is_percent():
    from sklearn.metrics import accuracy_score

    rng = np.random.default_rng(0)
    outputs = list(rng.normal(size=(12, 4)))
    labels = rng.integers(0, 4, size=12)
    data = TaskData("mc", [None] * 12, [{"labels": int(y)} for y in labels])
    ours = multiple_choice_metrics(data, outputs)
    assert ours["accuracy"] == pytest.approx(100 * accuracy_score(labels, np.stack(outputs).argmax(-1)))


def test_classification_run_writes_percent_everywhere(tiny_model_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC" / "dev.tsv"
    out = tmp_path / "run"
    assert main(["finetune", "glue", "--task", "mrpc", "--model", str(tiny_model_dir), "--train", str(mrpc),
                 "--dev", str(mrpc), "--output-dir", str(out), "--epochs", "2", "--batch-size", "8",
                 "--max-seq-length", "32", "--lr", "1e-3", *QUIET]) == 0
    capsys.readouterr()
    evals = [r for r in read_jsonl(out / "metrics.jsonl") if "eval_accuracy" in r]
    examples = 12
    for record in evals:  # accuracy = 100 x correct / examples; F1 and combined on the same scale
        assert record["eval_accuracy"] * examples / 100 == pytest.approx(round(record["eval_accuracy"] * examples / 100))
        assert record["eval_combined"] == pytest.approx((record["eval_f1"] + record["eval_accuracy"]) / 2)
    best = json.loads((out / "best" / "best_metrics.json").read_text())
    # the fraction scale's choice: the first evaluation with the highest F1 (x 100 is monotone)
    fractions = [r["eval_f1"] / 100 for r in evals]
    assert best["step"] == evals[int(np.argmax(fractions))]["step"]
    report = (out / "report.md").read_text()
    assert f"| best value | {best['eval_f1']:.2f} |" in report
    assert f"| {best['eval_accuracy']:.2f} |" in report  # the per-evaluation table
    assert "Scale: quality scores (accuracy, F1" in report and "percentages on 0-100" in report
    assert main(["evaluate", "glue", "--model", str(out / "best"), "--data", str(mrpc), "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["f1"] == pytest.approx(best["eval_f1"]) and result["accuracy"] == pytest.approx(best["eval_accuracy"])


KORQUAD = ["--max-seq-length", "64", "--doc-stride", "16", "--batch-size", "4", "--lr", "1e-3", "--set", "max_steps=2",
           *QUIET]


def test_korquad_dev_file_is_scored_and_reported_with_korquads_rule(tiny_model_dir, fixtures, tmp_path, capsys):
    # outside fixtures/tasks, whose text makes the tiny model's vocabulary (Hangul would change every other run)
    data = fixtures.parent / "korquad_v1.0-handmade.json"
    out = tmp_path / "korquad"
    assert main(["finetune", "squad", "--train", str(data), "--dev", str(data), "--model", str(tiny_model_dir),
                 "--output-dir", str(out), *KORQUAD]) == 0
    capsys.readouterr()
    report = (out / "report.md").read_text()
    assert "| dev scoring | KorQuAD 1.0's official rule (character-level F1) (korquad; the dev file's version: " \
           "KorQuAD_v1.0_dev) |" in report
    summary = json.loads((out / "best" / "best_metrics.json").read_text())
    files = ["--data", str(data), "--predictions", str(out / "dev_predictions.json")]
    assert main(["evaluate", "squad", *files]) == 0  # the file's version picks KorQuAD's rule
    official = json.loads(capsys.readouterr().out)
    assert official["f1"] == pytest.approx(summary["eval_f1"])
    assert main(["evaluate", "squad", "--model", str(out / "best"), "--data", str(data), "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == pytest.approx(summary["eval_f1"])
    assert main(["evaluate", "squad", *files, "--metric", "squad"]) == 0
    squad = json.loads(capsys.readouterr().out)
    assert main(["evaluate", "squad", "--model", str(out / "best"), "--data", str(data), "--no-progress",
                 "--metric", "squad"]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == pytest.approx(squad["f1"])
