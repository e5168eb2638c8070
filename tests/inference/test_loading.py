"""A fine-tuned checkpoint loaded once: the family's head model, its tokenizer, label names
and task settings; its outputs carry logits and, for an encoder, no generated sequences;
`predict` and `evaluate` take the loaded model instead of a directory."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertkit
from bertkit.inference.loading import LoadedModel, load_finetuned
from bertkit.inference.outputs import InferenceOutputs

TEXTS = ["A gem of a film.", "Dull, and far too long for what it has to say.", "Fine."]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, minilm_dir):
    from bertkit import BertConfig, BertForSequenceClassification, Tokenizer

    directory = tmp_path_factory.mktemp("sst2-like")
    config = BertConfig.from_preset("tiny", vocab_size=30522, hidden_size=32, num_attention_heads=2,
                                    intermediate_size=64, max_position_embeddings=64).with_labels(["neg", "pos"])
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(directory)  # config.json names the architecture
    Tokenizer.from_pretrained(minilm_dir).save_pretrained(directory)
    (directory / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{['neg', 'pos'][i % 2]}\n" for i, t in
                                                                   enumerate(TEXTS)), encoding="utf-8")
    return directory


def _reference_probs(loaded: LoadedModel) -> np.ndarray:
    batch = loaded.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = loaded.model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"]).logits
    return logits.softmax(-1).numpy()


def test_loaded_once_with_head_labels_and_task_settings(classifier_dir):
    loaded = load_finetuned(classifier_dir, device="cpu")
    assert type(loaded.model).__name__ == "BertForSequenceClassification"
    assert loaded.id2label == {0: "neg", 1: "pos"}
    assert loaded.spec.family == "classification" and loaded.spec.max_seq_length == 64
    assert loaded.backbone is loaded.model.bert

    module = loaded.program_cls.module()
    from bertkit.tasks.classification import ClassificationExample

    features = module.encode([ClassificationExample(t, None, None, "<t>") for t in TEXTS], loaded.tokenizer, 64, None)
    outputs = loaded.run(features, batch_size=2)
    assert isinstance(outputs, InferenceOutputs) and outputs.sequences is None  # an encoder generates nothing
    probs = np.stack([np.exp(row) / np.exp(row).sum() for row in outputs.logits])
    np.testing.assert_allclose(probs, _reference_probs(loaded), atol=1e-5)

    predictions = bertkit.predict(bertkit.Predictor(loaded, batch_size=2), TEXTS)
    assert [p["label"] for p in predictions] == [["neg", "pos"][i] for i in probs.argmax(1)]
    np.testing.assert_allclose([p["scores"]["pos"] for p in predictions], probs[:, 1], atol=1e-5)


def test_evaluate_takes_the_loaded_model(classifier_dir):
    loaded = load_finetuned(classifier_dir, device="cpu")
    result = bertkit.evaluate(loaded, classifier_dir / "dev.tsv", text_column="sentence", label_column="label")
    predicted = _reference_probs(loaded).argmax(1)
    assert result["examples"] == 3
    assert result["accuracy"] == pytest.approx(100 * float(np.mean(predicted == np.arange(3) % 2)))  # percent
