"""A SQuAD run's report.md lists the dev answer files it writes beside best/ (dev_predictions.json,
and dev_na_probs.json for v2.0), the inputs of `bertkit evaluate squad --predictions`."""

from __future__ import annotations

import pytest

from bertkit.cli import main

from conftest import QUIET


@pytest.mark.parametrize("version", [1, 2])
def test_report_lists_dev_answer_files(version, tiny_model_dir, fixtures, tmp_path):
    train, dev = (("squad_train-v1.1.json", "squad_dev-v1.1.json") if version == 1
                  else ("squad_v2-handmade.json", "squad_v2-handmade.json"))
    run = tmp_path / "squad"
    assert main(["finetune", "squad", "--train", str(fixtures / train), "--dev", str(fixtures / dev),
                 "--model", str(tiny_model_dir), "--output-dir", str(run), "--max-seq-length", "64",
                 "--doc-stride", "16", "--batch-size", "8", "--set", "max_steps=2", *QUIET]) == 0
    files = (run / "report.md").read_text().split("## Files", 1)[1].split("##", 1)[0]
    assert (run / "dev_predictions.json").is_file() and "`dev_predictions.json`" in files
    assert (run / "dev_na_probs.json").is_file() == (version == 2) == ("`dev_na_probs.json`" in files)


def test_no_dev_no_answer_files_listed(tiny_model_dir, fixtures, tmp_path):
    run = tmp_path / "squad"
    assert main(["finetune", "squad", "--train", str(fixtures / "squad_v2-handmade.json"),
                 "--model", str(tiny_model_dir), "--output-dir", str(run), "--max-seq-length", "64",
                 "--doc-stride", "16", "--batch-size", "8", "--set", "max_steps=2", *QUIET]) == 0
    assert not (run / "dev_predictions.json").exists()
    assert "dev_predictions" not in (run / "report.md").read_text()
