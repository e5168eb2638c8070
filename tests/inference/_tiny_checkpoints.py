"""Tiny seeded checkpoints of each kind a user loads for inference (shared by the precision
and ONNX export tests): a bare encoder, a masked LM and one head model per task family,
with MiniLM's real WordPiece tokenizer so texts tokenize as in use."""

from __future__ import annotations

from pathlib import Path

import torch

HEADS = {  # task family -> (bertkit head class, label names)
    "classification": ("BertForSequenceClassification", ["neg", "pos"]),
    "tagging": ("BertForTokenClassification", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
    "qa": ("BertForQuestionAnswering", None),
    "multiple_choice": ("BertForMultipleChoice", None),
}


def tiny_config(labels=None):
    from bertkit import BertConfig

    config = BertConfig.from_preset("tiny", vocab_size=30522, hidden_size=32, num_attention_heads=4,
                                    intermediate_size=64, max_position_embeddings=128)
    return config.with_labels(labels) if labels else config


def save_tiny(directory: Path, class_name: str, minilm_dir: Path, labels=None, seed: int = 0) -> Path:
    """A seeded tiny `class_name` ("BertModel", "BertForPreTraining", a head class) saved with
    MiniLM's tokenizer in `directory`."""
    import bertkit
    from bertkit import Tokenizer

    torch.manual_seed(seed)
    getattr(bertkit, class_name)(tiny_config(labels)).save_pretrained(directory)
    Tokenizer.from_pretrained(minilm_dir).save_pretrained(directory)
    return directory
