"""ELMo's feature path from a pre-trained biLM: embed's layer choices, NER and classification on a
frozen biLM with cached representations and a trained ScalarMix, evaluate from best/."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONLL = FIXTURES / "tasks" / "conll2003" / "eng.testa"
QUIET = ["--no-progress", "--set", "tensorboard=false"]


@pytest.fixture(scope="module")
def elmo_dir(tmp_path_factory) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "objectives"))
    from _successor_data import build_data

    root = tmp_path_factory.mktemp("elmo")
    data = build_data(root, "wordpiece", "packed")
    out = root / "run"
    assert main(["pretrain", "--objective", "bilm", "--preset", "elmo-tiny", "--data", str(data), "--output-dir",
                 str(out), "--set", "progress=false", "--set", "tensorboard=false", "--set", "batch_size=8",
                 "--set", "max_steps=2", "--set", "eval_steps=2", "--set", "softmax_words=100"]) == 0
    return out / "final"


def test_embed_layer_choices(elmo_dir, tmp_path):
    from bertkit import ElmoBiLM, embed
    from bertkit.data.words import TokenWords
    from bertkit.tokenization import Tokenizer

    texts = ["The bank raised rates.", "Rates fell"]
    everything = embed(texts, model=str(elmo_dir), layers="all")
    assert everything.shape == (2, 3, 32)
    torch.testing.assert_close(embed(texts, model=str(elmo_dir), layers="top"), everything[:, 2])
    torch.testing.assert_close(embed(texts, model=str(elmo_dir), layers="average"), everything.mean(1))
    torch.testing.assert_close(embed(texts, model=str(elmo_dir), layers="scalar_mix"), everything.mean(1))  # uniform
    words = TokenWords(Tokenizer.from_pretrained(elmo_dir)).text_words(texts)
    assert words[0] == ["the", "bank", "raised", "rates", "."]
    hidden, _ = ElmoBiLM.from_pretrained(elmo_dir).embed_words(words)
    torch.testing.assert_close(torch.from_numpy(everything[0]), hidden[0, :, :5].mean(1), atol=1e-6, rtol=1e-5)
    assert main(["embed", "--model", str(elmo_dir), "--layers", "scalar_mix", "The bank raised rates.", "-o",
                 str(tmp_path / "vecs.npy")]) == 0
    assert np.load(tmp_path / "vecs.npy").shape == (1, 32)


def test_embed_an_empty_text_is_one_line(elmo_dir, capsys):
    assert main(["embed", "--model", str(elmo_dir), "The bank.", "  "]) != 0
    assert capsys.readouterr().err.strip() == "bertkit: error: texts[1]: an empty sentence (no words to represent): '  '"


def test_ner_on_a_frozen_elmo_then_evaluate(elmo_dir, tmp_path, capsys):
    out = tmp_path / "ner"
    assert main(["finetune", "ner", "--train", str(CONLL), "--dev", str(CONLL), "--model", str(elmo_dir),
                 "--features", "scalar_mix", "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 "--lstm-hidden-size", "8", *QUIET]) == 0
    best = json.loads((out / "best" / "best_metrics.json").read_text())
    described = json.loads((out / "best" / "feature_tagger.json").read_text())
    assert described["features"] == "scalar_mix" and described["num_hidden_states"] == 3
    from safetensors.torch import load_file

    keys = load_file(out / "best" / "feature_tagger.safetensors")
    assert "scalar_mix.gamma" in keys and "scalar_mix.scalar_parameters.2" in keys  # the mix trained with the task
    capsys.readouterr()
    assert main(["evaluate", "ner", "--model", str(out / "best"), "--data", str(CONLL)]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scored["f1"] == pytest.approx(best["eval_f1"], abs=1e-6)  # best/ scores as it did on dev


def test_classification_on_a_frozen_elmo_then_evaluate(elmo_dir, tmp_path, capsys):
    table = tmp_path / "train.csv"
    rows = [("text", "label")] + [(f"the film was {w} and {w}", w) for w in ("good", "bad") * 8]
    with table.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    out = tmp_path / "cls"
    assert main(["finetune", "classify", "--train", str(table), "--dev", str(table), "--text-column", "text",
                 "--label-column", "label", "--model", str(elmo_dir), "--features", "scalar_mix", "--output-dir",
                 str(out), "--epochs", "1", "--batch-size", "4", "--lstm-hidden-size", "8", *QUIET]) == 0
    capsys.readouterr()
    assert main(["evaluate", "classify", "--model", str(out / "best"), "--data", str(table)]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scored["examples"] == 16 and 0 <= scored["accuracy"] <= 100
