"""Helpers of the serving tests: tiny checkpoints of every head bertkit serves (random
weights, the real MiniLM tokenizer, 64 positions so long inputs are easy to make) and a
real uvicorn server on a free loopback port, in a thread of the test process
(`running_server`)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

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
