"""`bertkit finetune` end to end for each task family on a tiny random BERT: a few steps
from the CLI, best/ in the HF layout that transformers loads under the matching class
with equal logits, the report and plots, `bertkit evaluate` reproducing the dev score
recorded with best/, and `bertkit predict` printing JSONL."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import torch
import transformers

from bertkit.cli import main
from bertkit.inference.loading import load_finetuned
from bertkit.inference.prediction import Predictor

from conftest import QUIET, stdout_jsonl

STEPS = ["--batch-size", "8", "--max-seq-length", "32", "--seed", "3", "--lr", "1e-3", *QUIET]
BEST_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "bertkit_task.json",
              "best_metrics.json")


def finetune(capsys, *args: str) -> Path:
    assert main(["finetune", *args]) == 0
    out = capsys.readouterr()
    assert "initialised fresh: classifier.bias, classifier.weight" in out.err
    return Path(out.out.split(" model: ")[1].split()[0])  # "best model: DIR" ("final model: DIR" without dev)


def evaluate(capsys, *args: str) -> dict:
    assert main(["evaluate", *args, "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


def check_run(best: Path, metric: str, classification: bool) -> dict:
    run = best.parent
    for name in BEST_FILES:
        assert (best / name).is_file(), name
    for name in ("report.md", "loss.png", f"dev_{metric}.png", "metrics.jsonl", "run_config.json"):
        assert (run / name).is_file(), name
    assert (run / "confusion_matrix.png").is_file() == classification
    report = (run / "report.md").read_text()
    assert "| initialised fresh | classifier.bias, classifier.weight |" in report
    assert f"![dev_{metric}](dev_{metric}.png)" in report
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any(f"eval_{metric}" in r for r in records) and any("loss" in r for r in records)
    return json.loads((best / "best_metrics.json").read_text())


def assert_hf_logits_equal(best: Path, hf_class, inputs: dict) -> None:
    ours = load_finetuned(best, device="cpu").model
    theirs = hf_class.from_pretrained(best).eval()
    with torch.no_grad():
        mine = ours(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"], attention_mask=inputs["attention_mask"]).logits
        reference = theirs(**inputs).logits
    assert mine.shape == reference.shape
    if mine.dim() == 3:  # per-token logits: padding positions are zero on bertkit's unpadded path
        real = inputs["attention_mask"].bool()
        mine, reference = mine[real], reference[real]
    torch.testing.assert_close(mine, reference, atol=1e-4, rtol=1e-4)


def test_glue_mrpc(tiny_model_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC"
    best = finetune(capsys, "glue", "--task", "MRPC", "--model", str(tiny_model_dir), "--data", str(mrpc),
                    "--train", str(mrpc / "dev.tsv"), "--output-dir", str(tmp_path / "mrpc"), "--epochs", "2", *STEPS)
    summary = check_run(best, "f1", classification=True)
    config = json.loads((best / "config.json").read_text())
    assert config["id2label"] == {"0": "not_equivalent", "1": "equivalent"}  # GLUE names, not the file's 0/1
    assert config["label2id"] == {"not_equivalent": 0, "equivalent": 1}
    assert config["architectures"] == ["BertForSequenceClassification"]
    # epoch 2 = step 4 (marked **best** when it is): evaluated every epoch
    assert re.search(r"\| 2( \*\*best\*\*)? \| 4 \|", (tmp_path / "mrpc" / "report.md").read_text())

    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = tokenizer(["The cat sat.", "Shares rose 5 % on Monday ."], ["A cat was sitting.", "Stocks fell ."],
                       padding=True, return_tensors="pt")
    assert_hf_logits_equal(best, transformers.BertForSequenceClassification, dict(inputs))

    result = evaluate(capsys, "glue", "--model", str(best), "--data", str(mrpc))
    assert set(result) == {"f1", "accuracy", "combined", "loss", "examples"} and result["examples"] == 12
    assert result["f1"] == pytest.approx(summary["eval_f1"], abs=1e-9)  # the dev score best/ was chosen on

    assert main(["predict", "--model", str(best), "The cat sat.", "A cat was sitting."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["text"] == "The cat sat." and line["pair"] == "A cat was sitting."
    assert line["label"] in ("not_equivalent", "equivalent") and line["score"] == pytest.approx(max(line["scores"].values()))
    assert sum(line["scores"].values()) == pytest.approx(1.0)


def write_reviews(path: Path, fixtures: Path) -> None:
    """A CSV with text and string labels, cut from the CoLA fixture (quotes and commas kept by csv)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "review", "label"])
        for i, line in enumerate((fixtures / "glue" / "CoLA" / "dev.tsv").read_text().splitlines()):
            fields = line.split("\t")
            writer.writerow([i, fields[3] + ", truly", "good" if fields[1] == "1" else "bad"])


def test_classify_csv(tiny_model_dir, fixtures, tmp_path, capsys):
    data = tmp_path / "reviews.csv"
    write_reviews(data, fixtures)
    best = finetune(capsys, "classify", "--train", str(data), "--dev", str(data), "--text-column", "review",
                    "--label-column", "label", "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "cls"),
                    "--epochs", "1", *STEPS)
    summary = check_run(best, "accuracy", classification=True)
    assert json.loads((best / "config.json").read_text())["id2label"] == {"0": "bad", "1": "good"}
    result = evaluate(capsys, "classify", "--model", str(best), "--data", str(data))
    assert set(result) == {"accuracy", "f1_macro", "loss", "examples"}
    assert result["accuracy"] == pytest.approx(summary["eval_accuracy"])

    assert main(["predict", "--model", str(best), "A fine sentence.", "Sentence bad a."]) == 0
    lines = stdout_jsonl(capsys.readouterr().out)
    assert [line["text"] for line in lines] == ["A fine sentence.", "Sentence bad a."]
    assert all(line["label"] in ("bad", "good") and set(line["scores"]) == {"bad", "good"} for line in lines)


def test_glue_stsb_regression(tiny_model_dir, fixtures, tmp_path, capsys):
    sts = fixtures / "glue" / "STS-B"
    best = finetune(capsys, "glue", "--task", "sts-b", "--model", str(tiny_model_dir), "--train", str(sts / "dev.tsv"),
                    "--dev", str(sts / "dev.tsv"), "--output-dir", str(tmp_path / "sts"), "--epochs", "1", *STEPS)
    check_run(best, "spearmanr", classification=False)
    config = json.loads((best / "config.json").read_text())
    assert config["problem_type"] == "regression" and len(config["id2label"]) == 1
    result = evaluate(capsys, "glue", "--model", str(best), "--data", str(sts))
    assert {"pearson", "spearmanr", "combined", "mse"} <= set(result)
    assert main(["predict", "--model", str(best), "A man plays.", "A man is playing."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert set(line) == {"text", "pair", "score"}


def test_ner(tiny_model_dir, fixtures, tmp_path, capsys):
    conll = fixtures / "conll2003"
    best = finetune(capsys, "ner", "--train", str(conll / "eng.testa"), "--dev", str(conll / "eng.testa"),
                    "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "ner"), "--epochs", "1", *STEPS)
    summary = check_run(best, "f1", classification=False)
    config = json.loads((best / "config.json").read_text())
    assert config["id2label"]["0"] == "O" and "B-PER" in config["label2id"] and "I-PER" in config["label2id"]
    assert json.loads((best / "bertkit_task.json").read_text())["scheme"] == "IOB1"

    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = tokenizer([["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]], is_split_into_words=True,
                       padding=True, return_tensors="pt")
    assert_hf_logits_equal(best, transformers.BertForTokenClassification, dict(inputs))

    # the IOB1 file the model was chosen on reproduces the recorded score; its IOB2 copy scores the same
    result = evaluate(capsys, "ner", "--model", str(best), "--data", str(conll / "eng.testa"))
    assert set(result) == {"precision", "recall", "f1", "accuracy", "loss", "examples"}
    assert result["f1"] == pytest.approx(summary["eval_f1"])
    iob2 = evaluate(capsys, "ner", "--model", str(best), "--data", str(conll / "iob2" / "valid.txt"))
    assert iob2["f1"] == pytest.approx(result["f1"]) and iob2["examples"] == result["examples"]

    text = "John Smith lives in Paris."
    assert main(["predict", "--model", str(best), text]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["words"] == ["John", "Smith", "lives", "in", "Paris", "."] and len(line["tags"]) == 6
    for entity in line["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["text"]


def test_ner_entities_have_character_spans(tiny_model_dir, fixtures, tmp_path, capsys):
    """Force every word to B-PER: in the model's IOB1 output every word is its own entity."""
    conll = fixtures / "conll2003"
    best = finetune(capsys, "ner", "--train", str(conll / "iob2" / "valid.txt"), "--model", str(tiny_model_dir),
                    "--output-dir", str(tmp_path / "ner2"), "--set", "max_steps=1", *STEPS)
    assert best.name == "final" and not (best.parent / "best").exists()
    predictor = Predictor.from_pretrained(best, device="cpu")
    with torch.no_grad():
        predictor.loaded.model.classifier.bias[predictor.loaded.config.label2id["B-PER"]] = 100.0
    text = "  Peter Blackburn, of the E.U. (Brussels)  "
    (result,) = predictor(text)
    assert result["words"] == ["Peter", "Blackburn", ",", "of", "the", "E.U", ".", "(", "Brussels", ")"]
    assert result["tags"] == ["B-PER"] * 10  # trained on IOB2: output in IOB2
    assert [e["text"] for e in result["entities"]] == result["words"]
    assert all(text[e["start"]:e["end"]] == e["text"] and e["type"] == "PER" and e["score"] > 0.99
               for e in result["entities"])
    (words,) = predictor([("Peter", "Blackburn")])  # a list of words: spans into the words joined by spaces
    assert [(e["start"], e["end"]) for e in words["entities"]] == [(0, 5), (6, 15)]


def test_multiple_choice(tiny_model_dir, fixtures, tmp_path, capsys):
    data = fixtures / "commonsenseqa" / "dev.jsonl"
    best = finetune(capsys, "multiple-choice", "--train", str(data), "--dev", str(data), "--model",
                    str(tiny_model_dir), "--output-dir", str(tmp_path / "mc"), "--epochs", "1", *STEPS)
    summary = check_run(best, "accuracy", classification=False)
    assert json.loads((best / "config.json").read_text())["architectures"] == ["BertForMultipleChoice"]

    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    choices = ["bank", "library", "mall"]
    enc = tokenizer(["Where is money kept?"] * 3, choices, padding=True, return_tensors="pt")
    assert_hf_logits_equal(best, transformers.BertForMultipleChoice, {k: v[None] for k, v in enc.items()})

    result = evaluate(capsys, "multiple-choice", "--model", str(best), "--data", str(data))
    assert set(result) == {"accuracy", "loss", "examples"} and result["examples"] == 10
    assert result["accuracy"] == pytest.approx(summary["eval_accuracy"])

    assert main(["predict", "--model", str(best), "Where is money kept?", *choices]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["context"] == "Where is money kept?" and line["choices"] == choices
    assert line["label"] in (0, 1, 2) and len(line["scores"]) == 3 and sum(line["scores"]) == pytest.approx(1.0)
    # PIQA: labels from the sibling valid-labels.lst, two choices
    piqa = evaluate(capsys, "multiple-choice", "--model", str(best), "--data", str(fixtures / "piqa" / "valid.jsonl"))
    assert piqa["examples"] == 10 and piqa["accuracy"] in [10.0 * k for k in range(11)]  # percent of 10


SQUAD = ["--max-seq-length", "64", "--doc-stride", "16", "--batch-size", "8", "--lr", "1e-3", "--set", "max_steps=3",
         *QUIET]


@pytest.mark.parametrize("version", [1, 2])
def test_squad(version, tiny_model_dir, fixtures, tmp_path, capsys):
    train, dev = (("squad_train-v1.1.json", "squad_dev-v1.1.json") if version == 1
                  else ("squad_v2-handmade.json", "squad_v2-handmade.json"))
    train, dev = fixtures / train, fixtures / dev
    assert main(["finetune", "squad", "--version", str(version), "--train", str(train), "--dev", str(dev),
                 "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "squad"), *SQUAD]) == 0
    assert "initialised fresh: qa_outputs.bias, qa_outputs.weight" in capsys.readouterr().err
    best = tmp_path / "squad" / "best"
    for name in BEST_FILES:
        assert (best / name).is_file(), name
    summary = json.loads((best / "best_metrics.json").read_text())
    task = json.loads((best / "bertkit_task.json").read_text())
    assert (task["family"], task["squad_version"], task["doc_stride"], task["max_seq_length"]) == ("qa", version, 16, 64)
    assert (tmp_path / "squad" / "report.md").is_file() and (tmp_path / "squad" / "dev_f1.png").is_file()

    ours = load_finetuned(best, device="cpu").model
    theirs = transformers.BertForQuestionAnswering.from_pretrained(best).eval()
    inputs = dict(transformers.AutoTokenizer.from_pretrained(best)(
        ["When did it open?", "Who?"], ["The railway opened in 1887.", "Ann Lee ran."], padding=True,
        return_tensors="pt"))
    with torch.no_grad():
        mine, reference = ours(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"], attention_mask=inputs["attention_mask"]), theirs(**inputs)
    real = inputs["attention_mask"].bool()  # bertkit scores padding as impossible answers (finfo.min)
    torch.testing.assert_close(mine.start_logits[real], reference.start_logits[real], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(mine.end_logits[real], reference.end_logits[real], atol=1e-4, rtol=1e-4)
    assert bool((mine.start_logits[~real] == torch.finfo(torch.float32).min).all())

    assert main(["evaluate", "squad", "--model", str(best), "--data", str(dev), "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    keys = {"exact_match", "f1"} if version == 1 else {
        "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total",
        "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"}
    # v2.0: the thresholds' unit (a null-score difference here, a probability on the official route)
    units = {"best_exact_thresh_unit", "best_f1_thresh_unit"} if version == 2 else set()
    assert set(result) == keys | units
    assert result["f1"] == pytest.approx(summary["eval_f1"])  # the saved threshold reproduces the dev score
    if version == 2:
        assert result["f1"] == pytest.approx(result["best_f1"])  # the threshold was chosen on this file
        assert result["best_f1_thresh_unit"] == result["best_exact_thresh_unit"] == "null score minus best span score"
        assert result["best_f1_thresh"] == pytest.approx(task["null_threshold"])
        report = (tmp_path / "squad" / "report.md").read_text()
        assert "## No-answer threshold unit" in report and "null score minus best span score" in report
    files = ["--predictions", str(tmp_path / "squad" / "dev_predictions.json")]
    if version == 2:
        files += ["--na-prob", str(tmp_path / "squad" / "dev_na_probs.json")]
    assert main(["evaluate", "squad", "--data", str(dev), *files]) == 0
    official = json.loads(capsys.readouterr().out)
    assert official["f1"] == pytest.approx(result["f1"])
    assert set(official) == keys  # the official script's keys only
    if version == 2:  # the official sweep over dev_na_probs.json = sigmoid(difference): a probability
        assert 0.0 <= official["best_f1_thresh"] <= 1.0

    context = "The Kestrel Valley railway opened in 1887 to carry slate."
    assert main(["predict", "--model", str(best), "When did the railway open?", context]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["question"] == "When did the railway open?" and 0.0 <= line["score"] <= 1.0
    if line["start"] is None:
        assert version == 2 and line["answer"] == "" and line["no_answer"]
    else:
        assert context[line["start"]:line["end"]] == line["answer"] != ""
