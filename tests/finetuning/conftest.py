"""Fixtures for the fine-tuning tests: a tiny random BERT (a bare backbone, like the real
MiniLM checkpoint, so every head starts fresh) with a small WordPiece vocabulary built
from the task fixtures, and helpers to run the CLI in-process."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
QUIET = ["--no-progress", "--set", "tensorboard=false"]


def _fixture_text() -> str:
    parts = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.rglob("*")) if p.is_file()]
    return "\n".join(parts).lower()


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


def _fixture_vocab() -> list[str]:
    """A small WordPiece vocabulary (~700 tokens) covering the task fixtures."""
    text = _fixture_text()
    words = Counter(w for w in re.findall(r"\w+|[^\w\s]", text) if len(w) > 1)
    chars = sorted({c for c in text if not c.isspace()})
    vocab = SPECIALS + chars + [f"##{c}" for c in chars if c.isalnum()]
    return vocab + [w for w, _ in words.most_common(500) if w not in vocab]


def _tiny_checkpoint(directory: Path, model_class, **fields) -> Path:
    """A 2-layer, hidden-32 `model_class` checkpoint + tokenizer in the HF layout."""
    import torch

    from bertkit import BertConfig, Tokenizer

    vocab = _fixture_vocab()
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(vocab), hidden_size=32, num_attention_heads=2,
                                    intermediate_size=64, max_position_embeddings=128, **fields)
    model_class(config).save_pretrained(directory)
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer, hidden-32 BertModel checkpoint + tokenizer (~700 tokens) in the HF layout."""
    from bertkit import BertModel

    return _tiny_checkpoint(tmp_path_factory.mktemp("tiny-bert"), BertModel)


@pytest.fixture(scope="session")
def tiny_pre_ln_dir(tmp_path_factory) -> Path:
    """As `tiny_model_dir`, a pre-LN BertForPreTraining (saved in transformers' roberta-prelayernorm layout)."""
    from bertkit import BertForPreTraining

    return _tiny_checkpoint(tmp_path_factory.mktemp("tiny-pre-ln-bert"), BertForPreTraining, pre_layer_norm=True)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def stdout_jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
