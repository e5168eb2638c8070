"""BART served with continuous batching: its decoder positions are absolute, but its decode
steps give each row its own (`decoder_position_ids`), so requests that arrive while others
run join the running batch between steps, and each gets its unbatched answer."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from bertkit.inference.generation import generate, load_generator

PROMPTS = ["The cute dog walks in the", "A cat", "Rain fell on the quiet town all day long and",
           "They walked to the park and"]
PENALTY = 1.5  # random BART's greedy repeats one token; the penalty makes the rows' texts, and positions, matter


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory):
    from _bart_checkpoint import build_bart_checkpoint

    return build_bart_checkpoint(tmp_path_factory.mktemp("bart"))


def test_concurrent_bart_generations_join_the_running_batch_and_equal_their_unbatched_answer(bart_dir):
    from _serving import running_server

    loaded = load_generator(bart_dir, device="cpu")
    with running_server(bart_dir) as (base, state):
        stepper, runners = state.batcher.stepper, state.batcher.runners
        joined = []  # rows already running when requests were admitted
        admit = runners["generate"]
        runners["generate"] = lambda jobs: (joined.append(len(stepper.rows)), admit(jobs))[1]
        lengths = [4, 12, 6, 9, 3, 8]
        jobs = [(PROMPTS[i % len(PROMPTS)], n) for i, n in enumerate(lengths)]
        answers = [None] * len(jobs)

        def ask(i, prompt, n):
            time.sleep(0.02 * i)  # arrivals spread over the running batch's steps
            answers[i] = httpx.post(base + "/generate", json={"inputs": prompt, "parameters": {
                "max_new_tokens": n, "repetition_penalty": PENALTY}}, timeout=120).json()["generated_text"]

        threads = [threading.Thread(target=ask, args=(i, *job)) for i, job in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert answers == [generate(loaded, prompt, max_new_tokens=n, repetition_penalty=PENALTY)[0] for prompt, n in jobs]
    assert max(joined) > 0  # some request joined rows that were already decoding
