"""Decoder-only models (GPT-2 and GPT-1) served with continuous batching: TGI's /generate and
OpenAI's completions answer with the continuation `bertkit generate` writes for the same
settings (greedy, and seeded sampling: each request draws from its own seeded generator);
requests that arrive while others run join the running batch between steps and each gets
its unbatched answer; a stream cut by its client frees its slot; a full queue is 429."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from bertkit.inference.generation import generate, load_generator

huggingface_hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")

PROMPT = "The cute dog walks in the"
PROMPTS = ["The cute dog walks in the", "A cat", "Rain fell on the quiet town all day long and",
           "They walked to the park and"]


@pytest.fixture(scope="module", params=["gpt2", "openai-gpt"])
def gpt_dir(request, tmp_path_factory):
    from _gpt_checkpoint import build_gpt_checkpoint

    return build_gpt_checkpoint(tmp_path_factory.mktemp(request.param), model_type=request.param, n_positions=256)


@pytest.fixture(scope="module")
def gpt_loaded(gpt_dir):
    return load_generator(gpt_dir, device="cpu")


@pytest.fixture(scope="module")
def gpt_server(gpt_dir):
    from _serving import running_server

    with running_server(gpt_dir) as served:
        yield served


def test_tgi_and_openai_clients_get_bertkit_generate_continuation(gpt_server, gpt_loaded):
    base, _ = gpt_server
    expected = generate(gpt_loaded, PROMPT, max_new_tokens=8, return_full_text=False)[0]
    assert expected
    client = huggingface_hub.InferenceClient(model=base)
    assert client.text_generation(PROMPT, max_new_tokens=8) == expected
    streamed = list(client.text_generation(PROMPT, max_new_tokens=8, stream=True))
    assert "".join(streamed) == expected
    assert client.text_generation(PROMPT, max_new_tokens=8, return_full_text=True) == PROMPT + expected
    completion = openai.OpenAI(base_url=f"{base}/v1", api_key="none").completions.create(
        model="m", prompt=PROMPT, max_tokens=8, temperature=0)  # 0: greedy
    assert completion.choices[0].text == expected


def test_seeded_sampling_and_repetition_penalty_equal_generate(gpt_server, gpt_loaded):
    base, _ = gpt_server
    client = huggingface_hub.InferenceClient(model=base)
    options = dict(max_new_tokens=10, do_sample=True, temperature=0.8, top_k=20, top_p=0.9, repetition_penalty=1.3)
    for seed in (3, 4):
        expected = generate(gpt_loaded, PROMPTS[1], seed=seed, return_full_text=False, **options)[0]
        assert client.text_generation(PROMPTS[1], seed=seed, **options) == expected


def test_concurrent_generations_join_the_running_batch_and_equal_their_unbatched_answer(gpt_server, gpt_loaded):
    from _serving import counting_joins, generate_concurrently

    base, state = gpt_server
    lengths = [5, 17, 9, 13, 3, 11, 7, 15]
    jobs = [(PROMPTS[i % len(PROMPTS)], n) for i, n in enumerate(lengths)]
    with counting_joins(state) as joined:
        answers = generate_concurrently(base, jobs)
    assert answers == [generate(gpt_loaded, prompt, max_new_tokens=n, return_full_text=False)[0]
                       for prompt, n in jobs]
    assert max(joined) > 0  # some request joined rows that were already decoding


def test_a_stream_cut_by_its_client_frees_its_slot(gpt_dir):
    from _serving import running_server

    with running_server(gpt_dir, max_batch_requests=1) as (base, state):
        state.served.generator.model.config.eos_token_id = None  # only the client's leaving can end it early
        stepper = state.batcher.stepper
        steps = []
        step = stepper.step
        stepper.step = lambda: (steps.append(time.sleep(0.005)), step())[1]  # 240 steps: over a second
        with httpx.stream("POST", base + "/generate_stream",
                          json={"inputs": PROMPTS[0], "parameters": {"max_new_tokens": 240}}) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    break  # one token, then the client goes away
        deadline = time.monotonic() + 30
        while stepper.active:
            assert time.monotonic() < deadline, "the abandoned row still runs"
            time.sleep(0.02)
        assert len(steps) < 120  # it left long before its 240 tokens
        answer = httpx.post(base + "/generate", json={"inputs": PROMPTS[1], "parameters": {"max_new_tokens": 4}},
                            timeout=60)
        assert answer.status_code == 200  # the one slot is free again


def test_generation_beyond_the_queue_is_429_and_beyond_the_budget_413(gpt_dir):
    from _serving import a_full_generation_queue, running_server

    with running_server(gpt_dir, max_batch_requests=1, max_queue=1, max_batch_tokens=200) as (base, state):
        state.served.generator.model.config.eos_token_id = None
        stepper, permits = state.batcher.stepper, threading.Semaphore(2)  # two steps, then wait for more
        step = stepper.step
        stepper.step = lambda: (permits.acquire(timeout=60), step())[1]  # the running row keeps its slot
        with a_full_generation_queue(base, state, PROMPTS, 150) as (answers, waiting):
            pass
        permits.release(1000)
        waiting.join(timeout=120)  # the stream was cut: its slot went to the waiting request
        assert answers["waiting"].status_code == 200
        too_large = httpx.post(base + "/generate", json={"inputs": PROMPTS[2], "parameters": {"max_new_tokens": 199}})
        assert too_large.status_code == 413
