"""Bad input to finetune / evaluate / predict: one `bertkit: error:` line naming the file
and line (or the field), exit status 1, and nothing already written is lost."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.errors import BertkitError

from conftest import QUIET

STEPS = ["--batch-size", "8", "--max-seq-length", "32", "--epochs", "1", *QUIET]


def error_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertkit: error: "), err
    return err[0].removeprefix("bertkit: error: ")


def digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def mrpc_run(tiny_model_dir, fixtures, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("errors") / "mrpc"
    mrpc = fixtures / "glue" / "MRPC" / "dev.tsv"
    assert main(["finetune", "glue", "--task", "mrpc", "--model", str(tiny_model_dir), "--train", str(mrpc),
                 "--dev", str(mrpc), "--output-dir", str(out), *STEPS]) == 0
    return out


def test_column_typo_and_task_typo(tiny_model_dir, fixtures, tmp_path, capsys):
    data = tmp_path / "train.csv"
    data.write_text("review,label\nGreat film,pos\nDull,neg\n", encoding="utf-8")
    out = tmp_path / "run"
    message = error_line(capsys, ["finetune", "classify", "--train", str(data), "--text-column", "reveiw",
                                  "--model", str(tiny_model_dir), "--output-dir", str(out), *STEPS])
    assert message.startswith(f"{data}:1: no column 'reveiw' (did you mean 'review'?)")
    assert not out.exists()
    message = error_line(capsys, ["finetune", "glue", "--task", "mrcp", "--model", str(tiny_model_dir), "--data",
                                  str(fixtures / "glue" / "MRPC"), "--output-dir", str(out), *STEPS])
    assert "'mrcp'" in message and "mrpc" in message
    message = error_line(capsys, ["finetune", "classify", "--train", str(data), "--text-column", "review",
                                  "--model", str(tiny_model_dir), "--output-dir", str(out), "--set", "epoch=2"])
    assert message == "--set: unknown field 'epoch' (did you mean 'epochs'?)"


def test_label_outside_label_set_and_empty_file(tiny_model_dir, fixtures, tmp_path, capsys):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("review,label\nGreat film,pos\nDull,neg\n", encoding="utf-8")
    dev.write_text("review,label\nFine,pos\nMeh,postive\n", encoding="utf-8")
    common = ["--text-column", "review", "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "run"), *STEPS]
    message = error_line(capsys, ["finetune", "classify", "--train", str(train), "--dev", str(dev), *common])
    assert message.startswith(f"{dev}:3: label 'postive' is not in the label map of the training file {train}")
    bad_glue = tmp_path / "dev.tsv"
    lines = (fixtures / "glue" / "MRPC" / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()
    fields = lines[2].split("\t")
    bad_glue.write_text("\n".join([lines[0], lines[1], "\t".join(["2", *fields[1:]])]) + "\n", encoding="utf-8")
    message = error_line(capsys, ["finetune", "glue", "--task", "mrpc", "--train", str(bad_glue),
                                  "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "run"), *STEPS])
    assert message.startswith(f"{bad_glue}:3: label '2' is not one of mrpc's labels")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    message = error_line(capsys, ["finetune", "classify", "--train", str(empty), *common])
    assert message == f"{empty}: empty file (no rows)"
    assert not (tmp_path / "run").exists()


def test_checkpoint_label_map_disagrees(mrpc_run, fixtures, tmp_path, capsys):
    rte = fixtures / "glue" / "RTE" / "dev.tsv"
    best = mrpc_run / "best"
    message = error_line(capsys, ["finetune", "glue", "--task", "rte", "--train", str(rte), "--model", str(best),
                                  "--output-dir", str(tmp_path / "rte"), *STEPS])
    assert message.startswith(f"{rte}:2: label ") and f"label map of {best}/config.json (not_equivalent, equivalent)" in message
    assert message.endswith("to train a new head instead add --set reinit_head=true")
    message = error_line(capsys, ["evaluate", "glue", "--model", str(best), "--data", str(rte), "--task", "rte"])
    assert message.startswith(f"{rte}:2: label ") and f"{best}/config.json" in message
    message = error_line(capsys, ["evaluate", "ner", "--model", str(best), "--data", str(rte)])
    assert message == f"{best}: a classification model; score it with `bertkit evaluate glue / classify`"
    # a fresh head on request
    assert main(["finetune", "glue", "--task", "rte", "--train", str(rte), "--model", str(best),
                 "--output-dir", str(tmp_path / "rte"), "--set", "reinit_head=true", *STEPS]) == 0
    assert "initialised fresh: classifier.bias, classifier.weight" in capsys.readouterr().err


def test_nothing_already_written_is_lost(mrpc_run, tiny_model_dir, fixtures, tmp_path, capsys):
    before = digest(mrpc_run)
    mrpc = fixtures / "glue" / "MRPC" / "dev.tsv"
    message = error_line(capsys, ["finetune", "glue", "--task", "mrpc", "--model", str(tiny_model_dir),
                                  "--train", str(mrpc), "--output-dir", str(mrpc_run), *STEPS])
    assert message == f"{mrpc_run}: already holds a fine-tuning run (best); pass --overwrite to replace it " \
                      "or choose another --output-dir"
    broken = tmp_path / "dev.tsv"
    broken.write_text(mrpc.read_text(encoding="utf-8") + "1\tonly two fields\n", encoding="utf-8")
    message = error_line(capsys, ["finetune", "glue", "--task", "mrpc", "--model", str(tiny_model_dir),
                                  "--train", str(mrpc), "--dev", str(broken), "--output-dir", str(mrpc_run),
                                  "--overwrite", *STEPS])
    assert message.startswith(f"{broken}:14: expected 5 tab-separated fields")
    assert digest(mrpc_run) == before


def test_predict_bad_input(mrpc_run, tiny_model_dir, capsys):
    best = mrpc_run / "best"
    message = error_line(capsys, ["predict", "--model", str(best), "only one text"])
    assert message == "this model classifies text pairs: give an even number of texts (got 1)"
    message = error_line(capsys, ["predict", "--model", str(tiny_model_dir), "text"])
    assert message.startswith(f"{tiny_model_dir}: not a fine-tuned model (config.json architectures: BertModel)")
    assert "BertForSequenceClassification" in message and "Roberta" not in message  # its own family's heads


def test_predict_on_a_family_without_heads_names_the_features_way(tmp_path, capsys):
    from bertkit.model.elmo import ElmoConfig
    from bertkit.tasks.programs import TaskSpec

    config = ElmoConfig()
    config.extra["architectures"] = ["ElmoBiLM"]
    with pytest.raises(BertkitError, match=r"ElmoBiLM\); elmo models have no task heads: .*--features scalar_mix"):
        TaskSpec.load(tmp_path, config)


def test_squad_answer_not_at_its_start(tiny_model_dir, fixtures, tmp_path, capsys):
    import json

    document = json.loads((fixtures / "squad_v2-handmade.json").read_text(encoding="utf-8"))
    document["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 40
    bad = tmp_path / "train.json"
    bad.write_text(json.dumps(document), encoding="utf-8")
    message = error_line(capsys, ["finetune", "squad", "--train", str(bad), "--model", str(tiny_model_dir),
                                  "--output-dir", str(tmp_path / "run"), *STEPS])
    assert message.startswith(f"{bad}: data[0].paragraphs[0].qas[0] (id hm-rail-1): answers[0]: answer '1887' "
                              "is not at answer_start 40")
    assert not (tmp_path / "run").exists()


def test_piqa_without_its_labels_file_names_the_fix(tiny_model_dir, fixtures, tmp_path, capsys):
    """PIQA keeps its labels in valid-labels.lst; a copy of valid.jsonl without it says where labels go."""
    piqa = tmp_path / "train.jsonl"
    piqa.write_bytes((fixtures / "piqa" / "valid.jsonl").read_bytes())
    message = error_line(capsys, ["finetune", "multiple-choice", "--train", str(piqa), "--model", str(tiny_model_dir),
                                  "--output-dir", str(tmp_path / "run"), *STEPS])
    assert message.startswith(f"{piqa}: no labels (an unlabelled test file?)")
    assert "train-labels.lst" in message and "--train-labels" in message
    run = tmp_path / "piqa-run"
    assert main(["finetune", "multiple-choice", "--train", str(fixtures / "piqa" / "valid.jsonl"), "--model",
                 str(tiny_model_dir), "--output-dir", str(run), "--set", "max_steps=1", *STEPS]) == 0
    capsys.readouterr()
    message = error_line(capsys, ["evaluate", "multiple-choice", "--model", str(run / "final"), "--data", str(piqa),
                                  "--no-progress"])
    assert message.startswith(f"{piqa}: no labels") and "(evaluate: --labels)" in message
