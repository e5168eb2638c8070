"""Fixtures for the task-data tests: the cut files and the real MiniLM tokenizer (bertkit and HF)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def tokenizer(minilm_dir):
    from bertkit import Tokenizer

    return Tokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="session")
def hf_tokenizer(minilm_dir):
    import transformers

    return transformers.BertTokenizerFast.from_pretrained(minilm_dir)
