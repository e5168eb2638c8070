"""Long-document classification end to end: `bertkit finetune classify --max-seq-length 4096`
on a BigBird and 8192 on a ModernBERT (tiny, random weights, texts of ~2,500 tokens), then
the served checkpoint's /predict and /embed take a 2,500-token input whole (--no-truncate):
their limits are the checkpoint's max_position_embeddings, not 512."""

from __future__ import annotations

import json

import pytest
import torch

from bertkit.cli import main

WORDS = "the letter was read again by her sister before the evening walk".split()
TEXT_TOKENS = 2500


def long_text(i: int) -> str:
    words = [WORDS[(i + k) % len(WORDS)] for k in range(TEXT_TOKENS - 40)]
    return " ".join(words + ["indeed"] * (40 if i % 2 else 0))  # the label's cue at the end of the document


def save_tiny(directory, family: str, minilm_dir):
    from bertkit import BigBirdConfig, BigBirdForMaskedLM, ModernBertConfig, ModernBertForMaskedLM, Tokenizer

    torch.manual_seed(0)
    if family == "bigbird":
        model = BigBirdForMaskedLM(BigBirdConfig.from_preset("bigbird-tiny", vocab_size=30522, hidden_size=32,
                                                             intermediate_size=64, max_position_embeddings=4096))
    else:
        model = ModernBertForMaskedLM(ModernBertConfig.from_preset(
            "modernbert-tiny", vocab_size=30522, pad_token_id=0, cls_token_id=101, sep_token_id=102, bos_token_id=None,
            eos_token_id=None, hidden_size=32, intermediate_size=48, max_position_embeddings=8192))
    model.save_pretrained(directory)
    Tokenizer.from_pretrained(minilm_dir).save_pretrained(directory)
    return directory


@pytest.mark.parametrize("family, length", [("bigbird", 4096), ("modernbert", 8192)])
def test_classify_and_serve_whole_long_documents(family, length, minilm_dir, tmp_path):
    from fastapi.testclient import TestClient

    from bertkit import Tokenizer
    from bertkit.serving import ServeConfig, ServedModel, create_app

    base = save_tiny(tmp_path / "base", family, minilm_dir)
    train = tmp_path / "long.jsonl"
    train.write_text("".join(json.dumps({"text": long_text(i), "label": ["plain", "cue"][i % 2]}) + "\n"
                             for i in range(2)))
    tokens = len(Tokenizer.from_pretrained(minilm_dir)(long_text(1))["input_ids"])
    assert 2000 < tokens < length
    assert main(["finetune", "classify", "--text-column", "text", "--train", str(train), "--model", str(base),
                 "--output-dir", str(tmp_path / "run"), "--max-seq-length", str(length), "--epochs", "1",
                 "--batch-size", "2", "--no-progress", "--threads", "1"]) == 0
    final = tmp_path / "run" / "final"
    assert json.loads((final / "bertkit_task.json").read_text())["max_seq_length"] == length

    served = ServedModel.load(final)
    assert (served.predict_limit, served.embed_limit) == (length, length)
    with TestClient(create_app(served, ServeConfig(port=0, truncate=False))) as client:
        info = client.get("/info").json()
        assert info["max_input_length"]["predict"] == length and info["max_input_length"]["embed"] == length
        predicted = client.post("/predict", json={"inputs": [long_text(1)]})
        assert predicted.status_code == 200, predicted.text
        assert {p["label"] for p in predicted.json()[0]} == {"plain", "cue"}
        embedded = client.post("/embed", json={"inputs": [long_text(1)]})
        assert embedded.status_code == 200, embedded.text
        assert len(embedded.json()[0]) == 32
        too_long = client.post("/embed", json={"inputs": [" ".join(["word"] * (length + 10))]})
        assert too_long.status_code in (400, 413, 422) and str(length) in too_long.text  # refused, naming the limit
