"""Fixtures of the serving tests: the tiny checkpoints and module-wide servers (_serving.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _serving import LABELS, running_server, save_model


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory, minilm_dir) -> dict[str, Path]:
    """family -> checkpoint: "pair" (a text-pair classifier with its bertkit_task.json), "tagging",
    "qa", "multiple_choice", "mlm" (BertForPreTraining: embed and fill-mask)."""
    from bertkit.model.bert import BertForPreTraining
    from bertkit.model.bert.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
                                          BertForSequenceClassification, BertForTokenClassification)
    from bertkit.tasks.programs import TaskSpec

    root = tmp_path_factory.mktemp("served")
    dirs = {
        "pair": save_model(root / "pair", BertForSequenceClassification, minilm_dir, LABELS["classification"]),
        "tagging": save_model(root / "tagging", BertForTokenClassification, minilm_dir, LABELS["tagging"], seed=1),
        "qa": save_model(root / "qa", BertForQuestionAnswering, minilm_dir, seed=2),
        "multiple_choice": save_model(root / "mc", BertForMultipleChoice, minilm_dir, seed=3),
        "mlm": save_model(root / "mlm", BertForPreTraining, minilm_dir, seed=4),
    }
    TaskSpec(family="classification", text_column="sentence1", pair_column="sentence2", has_pairs=True,
             max_seq_length=64).save(dirs["pair"])
    TaskSpec(family="qa", max_seq_length=64, doc_stride=16, max_query_length=16, squad_version=1).save(dirs["qa"])
    return dirs


@pytest.fixture(scope="module")
def mlm_server(model_dirs):
    with running_server(model_dirs["mlm"], max_client_batch_size=8, max_body_bytes=8192,
                        max_batch_tokens=300) as served:
        yield served


@pytest.fixture(scope="module")
def pair_server(model_dirs):
    with running_server(model_dirs["pair"]) as served:
        yield served
