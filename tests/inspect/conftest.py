"""Tiny checkpoints for the inspect and report tests: a masked-LM BERT (fill-mask on the
page) and a sequence classifier (a prediction on the page), 2 layers x 2 heads."""

from __future__ import annotations

from pathlib import Path

import pytest

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "animal", "didn", "'", "t", "cross", "street",
         "because", "it", "was", "too", "tired", ".", "cat", "sat", "a", "sitting", "##s", "word"]


def tiny_checkpoint(directory: Path, model_class, **fields) -> Path:
    import torch

    from bertkit import BertConfig, Tokenizer

    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=64, **fields)
    model_class(config).save_pretrained(directory)
    Tokenizer.from_wordpiece_vocab(VOCAB).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def mlm_dir(tmp_path_factory) -> Path:
    from bertkit import BertForPreTraining

    return tiny_checkpoint(tmp_path_factory.mktemp("inspect-mlm"), BertForPreTraining)


@pytest.fixture(scope="session")
def classifier_dir(tmp_path_factory) -> Path:
    from bertkit import BertForSequenceClassification

    return tiny_checkpoint(tmp_path_factory.mktemp("inspect-cls"), BertForSequenceClassification, num_labels=2,
                           id2label={0: "different", 1: "same"}, label2id={"different": 0, "same": 1})
