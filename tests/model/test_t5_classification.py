"""T5's encoder as a sequence classifier (the `classification` task family's head for T5)."""

from __future__ import annotations

import torch

from bertkit.finetuning import load_task_model
from bertkit.model.families import architecture_task_families, model_inputs, task_model_class
from bertkit.model.t5 import T5Config, T5EncoderForSequenceClassification, T5ForConditionalGeneration

SIZES = dict(vocab_size=60, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=4, dropout_rate=0.0,
             feed_forward_proj="gated-gelu", tie_word_embeddings=False)


def test_the_head_starts_from_a_pretrained_t5_and_round_trips(tmp_path):
    torch.manual_seed(0)
    pretrained = T5ForConditionalGeneration(T5Config(**SIZES))
    pretrained.save_pretrained(tmp_path / "t5")
    config = T5Config(**SIZES).with_labels(["no", "yes", "maybe"])
    model_cls = task_model_class(config, "classification")
    assert model_cls is T5EncoderForSequenceClassification
    model, fresh = load_task_model(model_cls, tmp_path / "t5", config, keep_head=False)
    assert fresh == sorted(k for k in model.state_dict() if k.startswith("classification_head."))
    assert torch.equal(model.transformer.encoder.block[1].layer[1].DenseReluDense.wo.weight,
                       pretrained.encoder.block[1].layer[1].DenseReluDense.wo.weight)
    assert torch.equal(model.transformer.shared.weight, pretrained.shared.weight)

    model.eval()
    ids = torch.randint(2, 60, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    labels = torch.tensor([2, 0])
    with torch.no_grad():
        out = model(**model_inputs(model, {"input_ids": ids, "attention_mask": mask}), labels=labels)
        alone = model(input_ids=ids[1:, :4]).logits  # the padded row without its padding
    assert out.logits.shape == (2, 3) and out.loss.ndim == 0
    torch.testing.assert_close(out.logits[1:], alone, atol=1e-5, rtol=1e-5)

    model.save_pretrained(tmp_path / "clf")
    back, info = T5EncoderForSequenceClassification.from_pretrained(tmp_path / "clf", output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []} and back.config.id2label[2] == "maybe"
    assert architecture_task_families()["T5EncoderForSequenceClassification"] == "classification"
    with torch.no_grad():
        torch.testing.assert_close(back(input_ids=ids, attention_mask=mask).logits, out.logits)


def test_regression_with_one_label():
    torch.manual_seed(0)
    model = T5EncoderForSequenceClassification(T5Config.from_dict({**SIZES, "num_labels": 1}))
    out = model(input_ids=torch.randint(2, 60, (3, 5)), labels=torch.tensor([0.5, 1.0, 4.0]))
    assert out.logits.shape == (3, 1)
    out.loss.backward()
    assert model.transformer.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.grad is not None
