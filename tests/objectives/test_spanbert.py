"""SpanBERT: boundary indices and SBO targets on hand-made spans, spans that never cross
special tokens or padding, the MLM + SBO loss, and `bertkit pretrain --objective spanbert`
end to end (transformers loads the backbone + MLM head as BertForMaskedLM)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import transformers
from _successor_data import build_data, check_finetunes_as_bert, pretrain

from bertkit.model.bert.config import BertConfig
from bertkit.data.collate import collate
from bertkit.data.dataset import PretrainingDataset
from bertkit.data.masking import Masker, MaskingConfig, example_rng
from bertkit.objectives.spanbert import SpanBertForPreTraining, span_boundaries

CLS, SEP, PAD = 2, 3, 0


def test_boundaries_of_hand_made_spans():
    # row 0: [CLS] a [b c d] e [f] [SEP]   spans 2..4 and 6..6
    # row 1: [CLS] [a b] c [SEP] [PAD]...  span 1..2
    labels = torch.full((2, 8), -100)
    labels[0, 2:5] = torch.tensor([12, 13, 14])
    labels[0, 6] = 16
    labels[1, 1:3] = torch.tensor([21, 22])
    positions, left, right, relative = span_boundaries(labels)
    assert positions.tolist() == [[0, 2], [0, 3], [0, 4], [0, 6], [1, 1], [1, 2]]
    assert left.tolist() == [1, 1, 1, 5, 0, 0]
    assert right.tolist() == [5, 5, 5, 7, 3, 3]
    assert relative.tolist() == [0, 1, 2, 0, 0, 1]


def test_sbo_predicts_span_tokens_from_their_boundaries():
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=50, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                    max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = SpanBertForPreTraining(config).eval()
    ids = torch.tensor([[CLS, 10, 4, 4, 4, 15, 4, SEP], [CLS, 4, 4, 23, SEP, PAD, PAD, PAD]])
    mask = (ids != PAD).long()
    labels = torch.full_like(ids, -100)
    labels[0, 2:5] = torch.tensor([12, 13, 14])
    labels[0, 6] = 16
    labels[1, 1:3] = torch.tensor([21, 22])
    with torch.no_grad():
        out = model(ids, torch.zeros_like(ids), mask, labels=labels)
        hidden = model.bert(ids, attention_mask=mask).last_hidden_state
        spans = [(0, 2, 1, 5, 0, 12), (0, 3, 1, 5, 1, 13), (0, 4, 1, 5, 2, 14), (0, 6, 5, 7, 0, 16),
                 (1, 1, 0, 3, 0, 21), (1, 2, 0, 3, 1, 22)]
        rows = torch.tensor([s[0] for s in spans])
        y = model.sbo(hidden[rows, torch.tensor([s[2] for s in spans])], hidden[rows, torch.tensor([s[3] for s in spans])],
                      torch.tensor([s[4] for s in spans]))
        expected = F.linear(y, model.bert.embeddings.word_embeddings.weight, model.sbo.bias)
        targets = torch.tensor([s[5] for s in spans])
    torch.testing.assert_close(out.sbo_logits, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.sbo_loss, F.cross_entropy(expected, targets), atol=1e-5, rtol=1e-5)
    mlm = model.cls.predictions(hidden[labels != -100], model.bert.embeddings.word_embeddings.weight)
    torch.testing.assert_close(out.mlm_loss, F.cross_entropy(mlm, targets), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, out.mlm_loss + out.sbo_loss)
    # the SBO head is a 2-layer GELU + LayerNorm network over [x_{s-1}; x_{e+1}; p_i]
    assert model.sbo.dense1.in_features == 3 * config.hidden_size


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("spanbert")


@pytest.fixture(scope="module")
def packed(data_root) -> Path:
    return build_data(data_root, "wordpiece", "packed")


def test_spans_never_cross_special_tokens_or_padding(packed):
    data = PretrainingDataset.open(packed, "train")
    tok = data.tokenizer()
    masker = Masker.from_tokenizer(MaskingConfig(strategy="span"), tok)
    special = torch.tensor(sorted(set(tok.all_special_ids)))
    seen_spans = inner_separators = 0
    for start in range(0, min(len(data), 160), 16):
        examples = []
        for index in range(start, min(start + 16, len(data))):
            example = dict(data[index])
            original = example["input_ids"]
            example["input_ids"], example["labels"] = masker(original, example_rng(7, 0, index))
            inner_separators += int((original[1:-1] == tok.sep_token_id).sum())
            examples.append(example)
        batch = collate(examples, tok.pad_token_id)
        labels, real = batch["labels"], batch["attention_mask"].bool()
        positions, left, right, _ = span_boundaries(labels)
        rows = positions[:, 0]
        original = labels[rows, positions[:, 1]]
        assert not torch.isin(original, special).any()  # no special token is ever in a span
        for boundary in (left, right):  # both boundary tokens are real, unmasked tokens of the same row
            assert (boundary >= 0).all() and (boundary < labels.shape[1]).all()
            assert real[rows, boundary].all()
            assert (labels[rows, boundary] == -100).all()
        # a span's tokens lie strictly between its boundaries: no [SEP] (document break) or padding inside
        ids = batch["input_ids"]
        for row, lo, hi in {(int(r), int(a), int(b)) for r, a, b in zip(rows, left, right)}:
            inside = ids[row, lo + 1:hi]
            assert real[row, lo + 1:hi].all() and not torch.isin(inside, torch.tensor([tok.sep_token_id, tok.cls_token_id])).any()
            seen_spans += 1
    assert seen_spans > 100 and inner_separators > 0  # packed data holds document breaks the spans respected


def test_pretrain_spanbert_end_to_end(packed, tmp_path):
    out = tmp_path / "run"
    assert pretrain("spanbert", packed, out) == 0
    assert json.loads((out / "run_config.json").read_text())["masking"] == "span"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "sbo_loss" in r][-1]
    assert np.isclose(train["loss"], train["mlm_loss"] + train["sbo_loss"], rtol=1e-3)  # the loop logs its own float sum
    assert any("eval_sbo_accuracy" in r for r in records)
    ref, info = transformers.BertForMaskedLM.from_pretrained(out / "final", output_loading_info=True)
    assert not info["missing_keys"] and all(k.startswith("sbo.") for k in info["unexpected_keys"])
    ours = SpanBertForPreTraining.from_pretrained(out / "final")
    ids = torch.tensor([[2, 40, 41, 42, 43, 3]])
    with torch.no_grad():
        hidden = ours.bert(ids).last_hidden_state
        mine = ours.cls.predictions(hidden, ours.bert.embeddings.word_embeddings.weight)
        torch.testing.assert_close(mine, ref.eval()(input_ids=ids).logits, atol=1e-5, rtol=1e-5)


def test_spanbert_refuses_paired_data_and_token_masking(data_root, packed, tmp_path, capsys):
    nsp = build_data(data_root, "wordpiece", "nsp")
    capsys.readouterr()
    assert pretrain("spanbert", nsp, tmp_path / "a") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "objective 'spanbert' needs 'packed'" in err
    assert pretrain("spanbert", packed, tmp_path / "b", "--set", "masking=token") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field 'masking' must be 'span' for objective 'spanbert'" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b" / "final").exists()


def test_checkpoint_finetunes_as_bert(tmp_path_factory, packed, capsys):
    check_finetunes_as_bert("spanbert", packed, tmp_path_factory.mktemp("finetune"), "SpanBertForPreTraining", capsys)
