"""Left-to-right LM on the BERT backbone: causal attention (parity with transformers'
BertLMHeadModel run as a decoder), next-token labels, and `bertkit pretrain --objective ltr`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from _successor_data import build_data, check_finetunes_as_bert, pretrain

from bertkit.model.bert.config import BertConfig
from bertkit.objectives.ltr import BertLMHeadModel, causal_attention_mask, next_token_labels


def _config() -> BertConfig:
    return BertConfig.from_preset("tiny", vocab_size=60, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                                  max_position_embeddings=32)


def test_next_token_labels_and_causal_mask():
    assert next_token_labels(np.array([2, 7, 8, 3])).tolist() == [7, 8, 3, -100]
    mask = causal_attention_mask(torch.tensor([[1, 1, 1], [1, 1, 0]]), 3, torch.device("cpu"))
    assert mask.int().tolist() == [[[1, 0, 0], [1, 1, 0], [1, 1, 1]], [[1, 0, 0], [1, 1, 0], [1, 1, 0]]]


def test_a_position_never_sees_later_tokens():
    torch.manual_seed(0)
    model = BertLMHeadModel(_config()).eval()
    ids = torch.randint(5, 60, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = torch.randint(5, 60, (2, 4))
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_parity_with_transformers_decoder_both_ways(tmp_path):
    torch.manual_seed(1)
    ours = BertLMHeadModel(_config()).eval()
    with torch.no_grad():
        ours.cls.predictions.bias.normal_()
    ours.save_pretrained(tmp_path)
    ref, info = transformers.BertLMHeadModel.from_pretrained(tmp_path, is_decoder=True, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids = torch.randint(5, 60, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    real = mask.bool()
    labels = torch.tensor(np.stack([next_token_labels(row) for row in ids.numpy()]))
    labels[~real] = -100
    labels[1, 6] = -100  # the last real token of row 1 has no next token
    with torch.no_grad():
        got = ours(ids, attention_mask=mask)
        expected = ref.eval()(input_ids=ids, attention_mask=mask)
        torch.testing.assert_close(got.logits[real], expected.logits[real], atol=1e-5, rtol=1e-5)
        loss = ours(ids, attention_mask=mask, labels=labels).loss
        flat = expected.logits[labels != -100]
        torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(flat, labels[labels != -100]),
                                   atol=1e-5, rtol=1e-5)
    # and back: transformers' weights load into bertkit
    ref.save_pretrained(tmp_path / "hf")
    back = BertLMHeadModel.from_pretrained(tmp_path / "hf")
    assert back.loading_info == {"missing_keys": [], "unexpected_keys": []}
    with torch.no_grad():
        torch.testing.assert_close(back(ids, attention_mask=mask).logits[real], expected.logits[real],
                                   atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def nsp_data(tmp_path_factory) -> Path:
    return build_data(tmp_path_factory.mktemp("ltr"), "wordpiece", "nsp")


def test_pretrain_ltr_end_to_end(nsp_data, tmp_path):
    out = tmp_path / "run"
    assert pretrain("ltr", nsp_data, out) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("lm_accuracy" in r for r in records) and any("eval_lm_perplexity" in r for r in records)
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["architectures"] == ["BertLMHeadModel"] and config["model_type"] == "bert"
    _, info = transformers.BertLMHeadModel.from_pretrained(out / "final", is_decoder=True, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    _, info = transformers.BertModel.from_pretrained(out / "final", output_loading_info=True)
    assert set(info["missing_keys"]) == {"pooler.dense.weight", "pooler.dense.bias"}


def test_checkpoint_finetunes_as_bert(tmp_path_factory, nsp_data, capsys):
    check_finetunes_as_bert("ltr", nsp_data, tmp_path_factory.mktemp("finetune"), "BertLMHeadModel", capsys)
