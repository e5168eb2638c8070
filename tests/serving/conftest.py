"""Tiny checkpoints of every head bertkit serves (random weights, the real MiniLM tokenizer,
64 positions so long inputs are easy to make) and a real uvicorn server on a free loopback
port, in a thread of the test process (`running_server`)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

LABELS = {"classification": ["not_equivalent", "equivalent"], "tagging": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]}


def tiny_config(**overrides):
    from bertkit import BertConfig

    return BertConfig.from_preset("tiny", vocab_size=30522, hidden_size=32, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, **overrides)


def save_model(directory: Path, model_cls, tokenizer_dir: Path, labels=None, seed: int = 0) -> Path:
    from bertkit import Tokenizer

    config = tiny_config()
    if labels:
        config = config.with_labels(labels)
    torch.manual_seed(seed)
    model_cls(config).save_pretrained(directory)  # config.json names the architecture (the task family)
    Tokenizer.from_pretrained(tokenizer_dir).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory, minilm_dir) -> dict[str, Path]:
    """family -> checkpoint: "pair" (a text-pair classifier with its bertkit_task.json), "tagging",
    "qa", "multiple_choice", "mlm" (BertForPreTraining: embed and fill-mask)."""
    from bertkit.model.bert import BertForPreTraining
    from bertkit.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
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


@contextlib.contextmanager
def running_server(model_dir: Path, **limits):
    """A real uvicorn server for `model_dir` on a free loopback port: yields (base URL, app state)."""
    import uvicorn

    from bertkit.serving import ServeConfig, ServedModel, create_app

    app = create_app(ServedModel.load(model_dir), ServeConfig(port=0, **limits))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app.state.bertkit
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.fixture(scope="module")
def mlm_server(model_dirs):
    with running_server(model_dirs["mlm"], max_client_batch_size=8, max_body_bytes=4096,
                        max_batch_tokens=300) as served:
        yield served


@pytest.fixture(scope="module")
def pair_server(model_dirs):
    with running_server(model_dirs["pair"]) as served:
        yield served
