"""BART served with continuous batching: its decoder positions are absolute, but its decode
steps give each row its own (`decoder_position_ids`), so requests that arrive while others
run join the running batch between steps, and each gets its unbatched answer."""

from __future__ import annotations


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
    from _serving import counting_joins, generate_concurrently, running_server

    loaded = load_generator(bart_dir, device="cpu")
    lengths = [4, 12, 6, 9, 3, 8]
    jobs = [(PROMPTS[i % len(PROMPTS)], n) for i, n in enumerate(lengths)]
    with running_server(bart_dir) as (base, state), counting_joins(state) as joined:
        answers = generate_concurrently(base, jobs, {"repetition_penalty": PENALTY})
    assert answers == [generate(loaded, prompt, max_new_tokens=n, repetition_penalty=PENALTY)[0] for prompt, n in jobs]
    assert max(joined) > 0  # some request joined rows that were already decoding
