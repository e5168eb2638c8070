"""A forced BOS (BART's `forced_bos_token_id`: the first new token `generate` writes) is not
part of the served stream: as transformers' and TGI's streams, the server neither emits it
as a token nor counts it in generated_tokens; the text and the other tokens are `generate`'s."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bertkit.inference.generation import encode_prompts, generate, load_generator
from bertkit.serving.generation import DecodeLoop, GenerationJob

BOS = 0


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    from _bart_checkpoint import build_bart_checkpoint

    loaded = load_generator(build_bart_checkpoint(tmp_path_factory.mktemp("bart")), device="cpu")
    loaded.model.config.forced_bos_token_id = BOS  # as facebook/bart-*'s config
    return loaded


def served(loaded, prompt: str, max_new_tokens: int) -> list[dict]:
    """The events of one request decoded by the server's loop."""
    events: list[dict] = []
    ids, settings = loaded.model.resolve_decoding(encode_prompts(loaded, [prompt])[0],
                                                  max_new_tokens=max_new_tokens, repetition_penalty=1.5)
    loop = DecodeLoop(loaded, max_batch_tokens=4096, max_batch_requests=8)
    loop.admit([SimpleNamespace(items=[GenerationJob(ids, settings, events.append)])])
    while loop.active:
        loop.step()
    return events


def test_a_forced_bos_is_neither_emitted_nor_counted(loaded):
    from bertkit.inference.generation import run_generation

    prompt, n = "The cute dog walks in the", 8
    events = served(loaded, prompt, n)
    tokens = [event["token"] for event in events if event["type"] == "token"]
    end = events[-1]
    assert end["type"] == "end"
    expected = run_generation(loaded, [prompt], max_new_tokens=n, repetition_penalty=1.5).sequences[0]
    assert expected[1] == BOS  # generate writes the forced BOS after the decoder start token
    assert [token["id"] for token in tokens] == expected[2:]  # the stream: what follows it
    assert tokens[0]["id"] != BOS or not tokens[0]["special"]
    assert end["generated_tokens"] == len(tokens) == len(expected) - 2
    assert end["generated_text"] == generate(loaded, prompt, max_new_tokens=n, repetition_penalty=1.5)[0]


def test_a_forced_eos_at_the_length_limit_ends_for_length(loaded):
    """BART's forced_eos_token_id fills the last allowed position: TGI calls that end `length`, and an
    answer that ended before the limit on its own EOS stays `eos_token`."""
    eos = loaded.model.config.eos_token_id
    loaded.model.config.forced_eos_token_id = eos
    try:
        events = served(loaded, "The cute dog walks in the", 3)
    finally:
        loaded.model.config.forced_eos_token_id = None
    end = events[-1]
    tokens = [event["token"] for event in events if event["type"] == "token"]
    assert [token["id"] for token in tokens][-1] == eos and len(tokens) == 2  # BOS (not emitted), one token, EOS
    assert end["finish_reason"] == "length"
