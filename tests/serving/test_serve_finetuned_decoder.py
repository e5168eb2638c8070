"""A fine-tuned GPT classifier is served as what it was fine-tuned for: /info says it serves
predict, and `POST /` (what huggingface_hub's text_classification sends) classifies, as TEI's
root does for a classifier, instead of generating from the classifier's body."""

from __future__ import annotations

import httpx
import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")

LABELS = ["negative", "positive"]


@pytest.fixture(scope="module")
def gpt_classifier(tmp_path_factory):
    """A tiny GPT-2 checkpoint saved with transformers' GPT2ForSequenceClassification head (what
    `bertkit finetune` saves for a GPT classifier), over the GPT tokenizer of the generation tests."""
    import torch
    from _gpt_checkpoint import build_gpt_checkpoint

    from bertkit import GPT2Config
    from bertkit.model.gpt import GPT2ForSequenceClassification

    directory = build_gpt_checkpoint(tmp_path_factory.mktemp("gpt-classifier"))
    config = GPT2Config.from_pretrained(directory).with_labels(LABELS)
    config.pad_token_id = config.eos_token_id
    torch.manual_seed(0)
    GPT2ForSequenceClassification(config).save_pretrained(directory)
    return directory


def test_a_fine_tuned_gpt_classifier_serves_predict(gpt_classifier):
    from _serving import running_server

    with running_server(gpt_classifier) as (base, _):
        info = httpx.get(base + "/info").json()
        assert info["task"] == "classification" and info["serves"] == "predict"
        expected = httpx.post(base + "/predict", json={"inputs": "A man is playing."}).json()
        assert [e["label"] for e in expected] and {e["label"] for e in expected} == set(LABELS)
        assert httpx.post(base + "/", json={"inputs": "A man is playing."}).json() == expected
        top = huggingface_hub.InferenceClient(model=base).text_classification("A man is playing.")
        assert top.label == expected[0]["label"] and top.score == pytest.approx(expected[0]["score"], abs=1e-6)
