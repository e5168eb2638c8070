"""collate: padding values per key, built attention mask, dtypes, multiple-of-8 rounding,
scalar keys; and a masked batch that BertForPreTraining accepts as is."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertkit.data.collate import collate
from bertkit.data.masking import Masker, MaskingConfig, example_rng

PAD = 7


def example(length: int, nsp: int, start: int = 10) -> dict:
    ids = np.arange(start, start + length, dtype=np.int32)  # shards may store int32
    return {
        "input_ids": ids,
        "token_type_ids": (np.arange(length) >= length // 2).astype(np.int8),
        "labels": np.where(np.arange(length) % 3 == 0, ids, -100).astype(np.int64),
        "next_sentence_label": nsp,
    }


def test_padding_values_mask_dtypes_and_rounding():
    examples = [example(5, 0), example(11, 1, start=40), example(3, 1, start=90)]
    batch = collate(examples, pad_token_id=PAD)
    assert set(batch) == {"input_ids", "token_type_ids", "labels", "next_sentence_label", "attention_mask"}
    assert batch["input_ids"].shape == (3, 16)  # longest 11 rounded up to 16
    for name in ("input_ids", "token_type_ids", "labels", "attention_mask", "next_sentence_label"):
        assert batch[name].dtype == torch.int64, name
    expected_ids = np.full((3, 16), PAD)
    expected_types = np.zeros((3, 16), dtype=np.int64)
    expected_labels = np.full((3, 16), -100)
    expected_mask = np.zeros((3, 16), dtype=np.int64)
    for row, ex in enumerate(examples):
        n = len(ex["input_ids"])
        expected_ids[row, :n] = ex["input_ids"]
        expected_types[row, :n] = ex["token_type_ids"]
        expected_labels[row, :n] = ex["labels"]
        expected_mask[row, :n] = 1
    assert np.array_equal(batch["input_ids"].numpy(), expected_ids)
    assert np.array_equal(batch["token_type_ids"].numpy(), expected_types)
    assert np.array_equal(batch["labels"].numpy(), expected_labels)
    assert np.array_equal(batch["attention_mask"].numpy(), expected_mask)
    assert batch["next_sentence_label"].tolist() == [0, 1, 1]


@pytest.mark.parametrize("multiple, width", [(None, 11), (1, 11), (8, 16), (4, 12), (11, 11), (64, 64)])
def test_pad_to_multiple_of(multiple, width):
    batch = collate([example(11, 0), example(2, 1)], pad_token_id=PAD, pad_to_multiple_of=multiple)
    assert batch["input_ids"].shape == (2, width)
    assert batch["attention_mask"].sum(1).tolist() == [11, 2]


def test_other_keys_scalars_and_given_attention_mask():
    examples = [
        {"input_ids": np.array([1, 2, 3]), "weights": np.array([0.5, 1.0, 2.0]), "score": 0.25, "label": np.int64(3),
         "attention_mask": np.array([1, 1, 0]), "special": np.array([True, False, True])},
        {"input_ids": np.array([4]), "weights": np.array([3.0]), "score": 1.5, "label": np.int64(-100),
         "attention_mask": np.array([1]), "special": np.array([True])},
    ]
    batch = collate(examples, pad_token_id=0, pad_to_multiple_of=None)
    assert batch["weights"].dtype == torch.float32 and batch["weights"].tolist() == [[0.5, 1.0, 2.0], [3.0, 0.0, 0.0]]
    assert batch["score"].dtype == torch.float32 and batch["score"].tolist() == [0.25, 1.5]
    assert batch["label"].dtype == torch.int64 and batch["label"].tolist() == [3, -100]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 0, 0]]  # the given one, padded with 0
    assert batch["special"].dtype == torch.bool and batch["special"].tolist() == [[True, False, True], [True, False, False]]


def test_errors():
    with pytest.raises(ValueError, match="at least one"):
        collate([], pad_token_id=0)
    with pytest.raises(ValueError, match="input_ids"):
        collate([{"labels": np.array([1])}], pad_token_id=0)
    with pytest.raises(ValueError, match="keys"):
        collate([example(3, 0), {"input_ids": np.array([1])}], pad_token_id=0)
    bad = example(4, 0)
    bad["labels"] = bad["labels"][:3]
    with pytest.raises(ValueError, match="'labels' has 3 positions, input_ids has 4"):
        collate([bad], pad_token_id=0)
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        collate([example(3, 0)], pad_token_id=0, pad_to_multiple_of=0)


def test_masked_batch_feeds_bert_for_pretraining(tiny_config):
    from bertkit import BertForPreTraining

    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    masker = Masker(MaskingConfig(), vocab_size=tiny_config.vocab_size, mask_token_id=4, special_ids=[0, 1, 2, 3, 4])
    rng = np.random.default_rng(0)
    examples = []
    for i, length in enumerate((9, 30, 17)):
        ids = np.concatenate(([2], rng.integers(5, tiny_config.vocab_size, size=length - 2), [3]))
        masked, labels = masker(ids, example_rng(0, 0, i))
        examples.append({"input_ids": masked, "token_type_ids": np.zeros(length, np.int64), "labels": labels,
                         "next_sentence_label": i % 2})
    batch = collate(examples, pad_token_id=0)
    assert batch["input_ids"].shape == (3, 32)
    with torch.no_grad():
        out = model(**batch)
        assert torch.isfinite(out.loss)
        # the padding is invisible: each row's logits at its masked positions equal the example run alone
        start = 0
        for example in examples:
            alone = collate([example], pad_token_id=0, pad_to_multiple_of=None)
            logits = model(**alone).prediction_logits  # (N_i, V)
            assert torch.allclose(out.prediction_logits[start : start + len(logits)], logits, atol=1e-5)
            start += len(logits)
        assert start == len(out.prediction_logits)
