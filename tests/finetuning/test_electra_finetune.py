"""An ELECTRA pre-training folder (discriminator + generator/) fine-tunes through
`bertkit finetune classify`, `ner` and `multiple-choice`: the discriminator's encoder is
loaded, the HF head (e.g. classifier.dense/out_proj) starts fresh, best/ loads in
transformers' class of the same name with equal logits, and predict/evaluate read it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers

from bertkit.cli import main
from bertkit.model.electra.config import generator_config
from bertkit.model.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from bertkit.tokenization import Tokenizer

from conftest import stdout_jsonl
from test_finetune_cli import STEPS, assert_hf_logits_equal, write_reviews

FRESH = "classifier.dense.bias, classifier.dense.weight, classifier.out_proj.bias, classifier.out_proj.weight"


@pytest.fixture(scope="module")
def electra_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A folder laid out as `bertkit pretrain --objective electra` writes final/."""
    vocab_size = json.loads((tiny_model_dir / "config.json").read_text())["vocab_size"]
    config = ElectraConfig.from_dict(dict(vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=128))
    directory = tmp_path_factory.mktemp("electra") / "final"
    torch.manual_seed(0)
    ElectraForPreTraining(config).save_pretrained(directory)
    ElectraForMaskedLM(generator_config(config, 0.25)).save_pretrained(directory / "generator")
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    tokenizer.save_pretrained(directory)
    tokenizer.save_pretrained(directory / "generator")
    return directory


def test_electra_discriminator_finetunes_on_classify(electra_dir, fixtures, tmp_path, capsys):
    data = tmp_path / "reviews.csv"
    write_reviews(data, fixtures)
    assert main(["finetune", "classify", "--train", str(data), "--dev", str(data), "--text-column", "review",
                 "--label-column", "label", "--model", str(electra_dir), "--output-dir", str(tmp_path / "cls"),
                 "--epochs", "1", *STEPS]) == 0
    out = capsys.readouterr()
    assert f"initialised fresh: {FRESH}" in out.err
    best = Path(out.out.split(" model: ")[1].split()[0])
    config = json.loads((best / "config.json").read_text())
    assert config["architectures"] == ["ElectraForSequenceClassification"] and config["model_type"] == "electra"
    assert config["id2label"] == {"0": "bad", "1": "good"}
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = tokenizer(["A fine sentence, truly.", "Sentence bad a."], padding=True, return_tensors="pt")
    assert_hf_logits_equal(best, transformers.ElectraForSequenceClassification, dict(inputs))
    # the encoder really came from the discriminator: its weights moved from there, the head is new
    start = ElectraForPreTraining.from_pretrained(electra_dir).electra.state_dict()
    tuned = transformers.ElectraForSequenceClassification.from_pretrained(best).electra.state_dict()
    assert not torch.equal(start["encoder.layer.0.attention.self.query.weight"],
                           tuned["encoder.layer.0.attention.self.query.weight"])
    assert torch.allclose(start["embeddings.position_embeddings.weight"], tuned["embeddings.position_embeddings.weight"],
                          atol=0.05)

    assert main(["evaluate", "classify", "--model", str(best), "--data", str(data), "--no-progress"]) == 0
    (result,) = stdout_jsonl(capsys.readouterr().out)
    correct = result["accuracy"] * result["examples"] / 100  # percent scale: 100 x correct / examples
    assert 0.0 <= result["accuracy"] <= 100.0 and correct == pytest.approx(round(correct))
    assert main(["predict", "--model", str(best), "A fine sentence."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in ("bad", "good")


def test_electra_discriminator_finetunes_on_ner(electra_dir, fixtures, tmp_path, capsys):
    conll = fixtures / "conll2003"
    assert main(["finetune", "ner", "--train", str(conll / "eng.testa"), "--dev", str(conll / "eng.testa"),
                 "--model", str(electra_dir), "--output-dir", str(tmp_path / "ner"), "--epochs", "1", *STEPS]) == 0
    out = capsys.readouterr()
    assert "initialised fresh: classifier.bias, classifier.weight" in out.err
    best = Path(out.out.split(" model: ")[1].split()[0])
    assert json.loads((best / "config.json").read_text())["architectures"] == ["ElectraForTokenClassification"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = tokenizer([["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]], is_split_into_words=True,
                       padding=True, return_tensors="pt")
    assert_hf_logits_equal(best, transformers.ElectraForTokenClassification, dict(inputs))


def test_electra_discriminator_finetunes_on_multiple_choice(electra_dir, fixtures, tmp_path, capsys):
    """HF's ElectraForMultipleChoice head (sequence_summary.summary, classifier) starts fresh on
    the discriminator's encoder; best/ loads in transformers with equal logits; evaluate reads it."""
    data = fixtures / "commonsenseqa" / "dev.jsonl"
    assert main(["finetune", "multiple-choice", "--train", str(data), "--dev", str(data), "--model", str(electra_dir),
                 "--output-dir", str(tmp_path / "mc"), "--epochs", "1", *STEPS]) == 0
    out = capsys.readouterr()
    assert ("initialised fresh: classifier.bias, classifier.weight, sequence_summary.summary.bias, "
            "sequence_summary.summary.weight") in out.err
    best = Path(out.out.split(" model: ")[1].split()[0])
    assert json.loads((best / "config.json").read_text())["architectures"] == ["ElectraForMultipleChoice"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    enc = tokenizer(["Where is money kept?"] * 3, ["bank", "the public library", "mall"], padding=True,
                    return_tensors="pt")
    assert_hf_logits_equal(best, transformers.ElectraForMultipleChoice, {k: v[None] for k, v in enc.items()})
    assert main(["evaluate", "multiple-choice", "--model", str(best), "--data", str(data), "--no-progress"]) == 0
    (result,) = stdout_jsonl(capsys.readouterr().out)
    assert result["examples"] == 10 and result["accuracy"] in [10.0 * k for k in range(11)]  # percent of 10
