"""BART through the existing task families, from a tiny random BartForConditionalGeneration
with a `--layout bart` byte-level BPE tokenizer: text-to-text in every format
`finetune text2text` offers (pairs JSONL / TSV, GLUE, SQuAD, NER) with `evaluate text2text`,
GLUE classification on the decoder's last EOS state, SQuAD with BartForQuestionAnswering.
Each best/ checkpoint loads in transformers' class and computes the same outputs.
Truncation never cuts EOS: the template adds `</s>` after the text is cut."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from bertkit.cli import main

from conftest import FIXTURES, QUIET

AUSTEN = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory) -> Path:
    """A 2+2-layer, d_model-32 random BartForConditionalGeneration and a 600-token bbpe tokenizer."""
    from bertkit import BartConfig, BartForConditionalGeneration, Tokenizer

    root = tmp_path_factory.mktemp("bart-ft")
    assert main(["tokenizer", "train", "--algorithm", "bbpe", "--vocab-size", "600", "--layout", "bart",
                 "--output", str(root / "tok"), "--no-progress", str(AUSTEN)]) == 0
    tokenizer = Tokenizer.from_pretrained(root / "tok")
    torch.manual_seed(0)
    config = BartConfig.from_preset("bart-tiny", vocab_size=tokenizer.vocab_size, d_model=32, encoder_ffn_dim=64,
                                    decoder_ffn_dim=64, max_position_embeddings=512, forced_bos_token_id=0)
    model_dir = root / "bart"
    BartForConditionalGeneration(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


def _best(out: Path) -> Path:
    return out / "best"


def _pairs(path: Path, rows: int = 12) -> Path:
    words = "a good fine long short old young great small house room sister".split()
    lines = [{"input": f"miss {words[i % 12]} {words[(3 * i) % 12]}", "output": words[i % 12]} for i in range(rows)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


@pytest.mark.parametrize("task", ["pairs-jsonl", "pairs-tsv", "glue", "squad", "ner"])
def test_text2text_every_format_trains_evaluates_and_loads_in_transformers(bart_dir, tmp_path, capsys, task):
    out = tmp_path / task
    if task.startswith("pairs"):
        train = _pairs(tmp_path / "p.jsonl")
        if task == "pairs-tsv":
            rows = [json.loads(line) for line in train.read_text().splitlines()]
            train = tmp_path / "p.tsv"
            train.write_text("input\toutput\n" + "".join(f"{r['input']}\t{r['output']}\n" for r in rows))
        flags, dev = ["--train", str(train), "--dev", str(train)], train
    elif task == "glue":
        dev = FIXTURES / "glue" / "RTE" / "dev.tsv"
        flags = ["--task", "glue", "--glue-task", "rte", "--train", str(dev), "--dev", str(dev)]
    elif task == "squad":
        dev = FIXTURES / "squad_dev-v1.1.json"
        flags = ["--task", "squad", "--train", str(FIXTURES / "squad_train-v1.1.json"), "--dev", str(dev)]
    else:
        dev = FIXTURES / "conll2003" / "eng.testa"
        flags = ["--task", "ner", "--train", str(dev), "--dev", str(dev)]
    assert main(["finetune", "text2text", *flags, "--model", str(bart_dir), "--output-dir", str(out),
                 "--max-seq-length", "96", "--batch-size", "8", "--set", "max_steps=2", *QUIET]) == 0
    capsys.readouterr()
    extra = ["--task", "glue", "--glue-task", "rte", "--data", str(dev.parent)] if task == "glue" else ["--data", str(dev)]
    if task == "pairs-jsonl":
        extra += ["--task", "pairs"]
    if task in ("squad", "ner", "pairs-tsv"):
        extra = ["--data", str(dev)] + (["--task", "pairs"] if task == "pairs-tsv" else [])
    assert main(["evaluate", "text2text", "--model", str(_best(out)), *extra, "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["examples"] > 0
    config = json.loads((_best(out) / "config.json").read_text())
    assert config["architectures"] == ["BartForConditionalGeneration"]
    _, info = transformers.BartForConditionalGeneration.from_pretrained(_best(out), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_text2text_long_targets_are_cut_and_bad_input_is_one_line(bart_dir, tmp_path, capsys):
    train = tmp_path / "long.jsonl"
    rows = [{"input": "say a lot", "output": "the sister wrote a long letter to the house every day"},
            {"input": "say little", "output": "no"}]
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["finetune", "text2text", "--train", str(train), "--dev", str(train), "--max-target-length", "5",
                 "--model", str(bart_dir), "--output-dir", str(tmp_path / "run"), "--epochs", "1", "--max-seq-length", "64", "--batch-size",
                 "2", *QUIET]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [f"bertkit: warning: {train}: 1 of 2 targets are longer than max_target_length "
                        "(5 tokens) and were cut"]
    latin = tmp_path / "latin.tsv"
    latin.write_bytes(b"input\toutput\nok\ty\ncaf\xe9\ty\n")
    capsys.readouterr()
    assert main(["finetune", "text2text", "--train", str(latin), "--model", str(bart_dir), "--output-dir",
                 str(tmp_path / "latin"), *QUIET]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bertkit: error: {latin}:3: ")


def test_classification_truncation_keeps_eos_last(bart_dir):
    from bertkit import Tokenizer
    from bertkit.tasks.classification import ClassificationExample, encode

    tokenizer = Tokenizer.from_pretrained(bart_dir)
    long = " ".join(["the sister wrote a long letter"] * 20)
    examples = [ClassificationExample(text=long, pair=long, label="1", source="x:1"),
                ClassificationExample(text="short", pair=long, label="0", source="x:2")]
    for feature in encode(examples, tokenizer, 24, {"0": 0, "1": 1}):
        ids = feature["input_ids"].tolist()
        assert len(ids) == 24 and ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
        assert ids.count(tokenizer.eos_token_id) == 2  # <s> A </s> B </s>: every row alike


def _same_in_transformers(best: Path, ours_class, theirs_class, batch: dict, keys: tuple[str, ...]) -> None:
    ours = ours_class.from_pretrained(best).eval()
    theirs = theirs_class.from_pretrained(best).eval()
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    for key in keys:
        torch.testing.assert_close(getattr(a, key), getattr(b, key), atol=1e-5, rtol=1e-5)


def test_glue_classification_on_the_last_eos_loads_in_transformers(bart_dir, tmp_path, capsys):
    from bertkit import BartForSequenceClassification, Tokenizer

    mrpc = FIXTURES / "glue" / "MRPC"
    out = tmp_path / "mrpc"
    capsys.readouterr()
    assert main(["finetune", "glue", "--task", "MRPC", "--model", str(bart_dir), "--data", str(mrpc), "--train",
                 str(mrpc / "dev.tsv"), "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 "--max-seq-length", "48", "--set", "max_steps=2", *QUIET]) == 0
    best = Path(capsys.readouterr().out.split("best model: ")[1].split()[0])
    assert json.loads((best / "config.json").read_text())["architectures"] == ["BartForSequenceClassification"]
    tokenizer = Tokenizer.from_pretrained(best)
    enc = tokenizer(["the sister wrote", "a letter"], ["to the house", "every day and night"], padding=True,
                    return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    _same_in_transformers(best, BartForSequenceClassification, transformers.BartForSequenceClassification, batch,
                          ("logits",))


def test_squad_with_bart_question_answering_loads_in_transformers(bart_dir, tmp_path, capsys):
    from bertkit import BartForQuestionAnswering

    out = tmp_path / "squad"
    capsys.readouterr()
    assert main(["finetune", "squad", "--train", str(FIXTURES / "squad_train-v1.1.json"), "--dev",
                 str(FIXTURES / "squad_dev-v1.1.json"), "--model", str(bart_dir), "--output-dir", str(out),
                 "--epochs", "1", "--batch-size", "4", "--max-seq-length", "128", "--doc-stride", "32",
                 "--set", "max_steps=2", *QUIET]) == 0
    best = Path(capsys.readouterr().out.split("best model: ")[1].split()[0])
    assert json.loads((best / "config.json").read_text())["architectures"] == ["BartForQuestionAnswering"]
    ids = torch.tensor(np.array([[0, 50, 60, 70, 2, 2, 80, 90, 2]]))
    _same_in_transformers(best, BartForQuestionAnswering, transformers.BartForQuestionAnswering,
                          {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, ("start_logits", "end_logits"))
