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


def generate_concurrently(base: str, jobs: list[tuple[str, int]], parameters: dict | None = None,
                          spacing: float = 0.02) -> list[str]:
    """POST /generate for each (prompt, max_new_tokens) job from its own thread, arrivals
    `spacing` seconds apart (spread over a running batch's steps); the generated texts, in order."""
    import httpx

    answers: list = [None] * len(jobs)

    def ask(i, prompt, n):
        time.sleep(spacing * i)
        answers[i] = httpx.post(base + "/generate", json={"inputs": prompt, "parameters": {
            "max_new_tokens": n, **(parameters or {})}}, timeout=120).json()["generated_text"]

    threads = [threading.Thread(target=ask, args=(i, *job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@contextlib.contextmanager
def counting_joins(state, step_seconds: float = 0.05):
    """A list that gets, at every admission of new generation requests, how many rows were
    already decoding (> 0: a request joined a running batch). Each decoding step takes at
    least `step_seconds`, so a busy machine cannot finish one request before the next arrives."""
    stepper, runners = state.batcher.stepper, state.batcher.runners
    joined: list[int] = []
    admit, step = runners["generate"], stepper.step
    runners["generate"] = lambda jobs: (joined.append(len(stepper.rows)), admit(jobs))[1]
    stepper.step = lambda: (time.sleep(step_seconds), step())[1]
    try:
        yield joined
    finally:
        runners["generate"], stepper.step = admit, step


@contextlib.contextmanager
def a_full_generation_queue(base: str, state, prompts: list[str], running_tokens: int):
    """With one slot and a queue of one: a stream of `running_tokens` takes the slot, a second
    request waits in the queue, a third is refused with 429. Yields (answers, waiting thread):
    answers["waiting"] is the second request's response once the thread ends; the stream is
    cut when the block exits, which frees the slot for it."""
    import httpx

    with httpx.stream("POST", base + "/generate_stream",
                      json={"inputs": prompts[0], "parameters": {"max_new_tokens": running_tokens}}) as running:
        lines = running.iter_lines()  # kept: a dropped iterator may close the stream
        next(line for line in lines if line.startswith("data:"))  # the one slot is taken
        answers: dict = {}
        waiting = threading.Thread(target=lambda: answers.update(waiting=httpx.post(
            base + "/generate", json={"inputs": prompts[1], "parameters": {"max_new_tokens": 3}}, timeout=120)))
        waiting.start()
        deadline = time.monotonic() + 30
        while state.batcher.depth < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        refused = httpx.post(base + "/generate", json={"inputs": prompts[2]}, timeout=30)
        assert refused.status_code == 429 and refused.json()["error_type"] == "overloaded"
        yield answers, waiting
