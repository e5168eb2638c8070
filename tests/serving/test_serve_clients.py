"""The clients people already use against a live `bertkit serve` on loopback:
huggingface_hub's InferenceClient (TEI's and TGI's protocols) and openai's client
(embeddings, completions), streamed and not; a stream cut by its client frees its slot;
concurrent generations each equal their unbatched answer and `bertkit generate`'s."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest

import bertkit
from bertkit.inference.generation import generate, load_generator
from bertkit.inference.loading import load_encoder

huggingface_hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")

PROMPTS = ["The dog walks in the park.", "A cat sat.", "Rain fell on the quiet town all day long.",
           "They walked to the park and back home."]


@pytest.fixture(scope="module")
def t5_loaded(t5_dir):
    return load_generator(t5_dir, device="cpu")


# ---------------------------------------------------------------------------- TEI


def test_inference_client_feature_extraction_is_tei_embed(mlm_server, model_dirs):
    base, _ = mlm_server
    client = huggingface_hub.InferenceClient(model=base)
    vectors = client.feature_extraction(["The bank raised rates.", "Fine."])
    direct = bertkit.embed(["The bank raised rates.", "Fine."], model=load_encoder(model_dirs["mlm"]), normalize=True)
    np.testing.assert_allclose(vectors, direct, atol=1e-5)  # TEI normalizes by default
    raw = client.feature_extraction("Fine.", normalize=False)
    np.testing.assert_allclose(raw, bertkit.embed(["Fine."], model=load_encoder(model_dirs["mlm"])), atol=1e-5)


def test_inference_client_sentence_similarity_is_tei_similarity(mlm_server, model_dirs):
    base, _ = mlm_server
    client = huggingface_hub.InferenceClient(model=base)
    scores = client.sentence_similarity("The bank raised rates.", other_sentences=["Rates went up.", "Fine."])
    vectors = bertkit.embed(["The bank raised rates.", "Rates went up.", "Fine."], model=load_encoder(model_dirs["mlm"]),
                            normalize=True)
    np.testing.assert_allclose(scores, vectors[1:] @ vectors[0], atol=1e-5)


def test_inference_client_text_classification_is_tei_predict(pair_server):
    base, _ = pair_server
    client = huggingface_hub.InferenceClient(model=base)
    answer = httpx.post(base + "/predict", json={"inputs": ["The cat sat.", "A cat sat."]}).json()  # one pair
    assert [a["label"] for a in answer] and answer[0]["score"] >= answer[1]["score"]
    assert sum(a["score"] for a in answer) == pytest.approx(1.0, abs=1e-5)
    # the client sends TEI's root request and takes the first element of the answer (TEI's best label)
    top = client.text_classification(["The cat sat.", "A cat sat."])
    assert top.label == answer[0]["label"] and top.score == pytest.approx(answer[0]["score"], abs=1e-6)


def test_tei_rerank_tokenize_decode_and_errors(pair_server):
    base, _ = pair_server
    ranks = httpx.post(base + "/rerank", json={"query": "A cat sat.", "texts": ["The cat sat.", "Rain fell.", "Dogs bark."],
                                               "return_text": True}).json()
    assert sorted(r["index"] for r in ranks) == [0, 1, 2] and ranks[0]["score"] >= ranks[-1]["score"]
    assert ranks[0]["text"] == ["The cat sat.", "Rain fell.", "Dogs bark."][ranks[0]["index"]]
    tokens = httpx.post(base + "/tokenize", json={"inputs": "Hello, world"}).json()
    assert [t["text"] for t in tokens[0]] == ["[CLS]", "hello", ",", "world", "[SEP]"]
    ids = [t["id"] for t in tokens[0]]
    assert httpx.post(base + "/decode", json={"ids": ids}).json() == ["hello, world"]
    empty = httpx.post(base + "/rerank", json={"query": "a", "texts": []})
    assert empty.status_code == 400 and empty.json()["error_type"] == "empty"
    not_served = httpx.post(base + "/fill-mask", json={"inputs": ["a [MASK]"]})
    assert not_served.status_code == 424 and not_served.json()["error_type"] == "backend"
    many = httpx.post(base + "/embed", json={"inputs": ["a"] * 33})
    assert many.status_code == 413 and many.json()["error_type"] == "validation"


# ---------------------------------------------------------------------------- TGI


def test_inference_client_text_generation_equals_bertkit_generate(t5_server, t5_loaded):
    base, _ = t5_server
    client = huggingface_hub.InferenceClient(model=base)
    expected = generate(t5_loaded, PROMPTS[0], max_new_tokens=12)[0]
    assert client.text_generation(PROMPTS[0], max_new_tokens=12) == expected
    streamed = list(client.text_generation(PROMPTS[0], max_new_tokens=12, stream=True))
    assert len(streamed) == 12 and "".join(streamed).strip() == expected
    details = client.text_generation(PROMPTS[0], max_new_tokens=12, details=True)
    assert details.generated_text == expected and details.details.generated_tokens == 12
    assert details.details.finish_reason == "length" and len(details.details.tokens) == 12
    last = list(client.text_generation(PROMPTS[0], max_new_tokens=12, stream=True, details=True))[-1]
    assert last.generated_text == expected and last.details.finish_reason == "length"


def test_sampling_repetition_penalty_and_stop_map_to_generate(t5_server, t5_loaded):
    base, _ = t5_server
    client = huggingface_hub.InferenceClient(model=base)
    options = dict(max_new_tokens=10, do_sample=True, temperature=0.8, top_k=20, top_p=0.9, repetition_penalty=1.3)
    expected = generate(t5_loaded, PROMPTS[1], seed=3, **options)[0]
    assert client.text_generation(PROMPTS[1], seed=3, **options) == expected
    full = client.text_generation(PROMPTS[1], max_new_tokens=10, return_full_text=True)
    assert full == PROMPTS[1] + generate(t5_loaded, PROMPTS[1], max_new_tokens=10)[0]
    greedy = generate(t5_loaded, PROMPTS[0], max_new_tokens=12)[0]
    stop = greedy[len(greedy) // 2:len(greedy) // 2 + 2]
    stopped = client.text_generation(PROMPTS[0], max_new_tokens=12, stop=[stop], details=True)
    assert stopped.details.finish_reason == "stop_sequence" and stop in stopped.generated_text
    refused = httpx.post(base + "/generate", json={"inputs": "a", "parameters": {"best_of": 2}})
    assert refused.status_code == 422 and "best_of" in refused.json()["error"]


def test_root_route_streams_with_stream_true(t5_server, t5_loaded):
    base, _ = t5_server
    with httpx.stream("POST", base + "/", json={"inputs": PROMPTS[2], "parameters": {"max_new_tokens": 6},
                                                 "stream": True}) as response:
        events = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    assert [e["index"] for e in events] == list(range(1, 7))
    assert events[-1]["generated_text"] == generate(t5_loaded, PROMPTS[2], max_new_tokens=6)[0]
    assert all(e["generated_text"] is None for e in events[:-1])


# ---------------------------------------------------------------------------- OpenAI


def test_openai_client_embeddings_and_completions(mlm_server, t5_server, t5_loaded):
    base, _ = mlm_server
    embeddings = openai.OpenAI(base_url=base + "/v1", api_key="none").embeddings.create(model="m", input=["hello"])
    assert len(embeddings.data) == 1 and len(embeddings.data[0].embedding) == 32
    client = openai.OpenAI(base_url=t5_server[0] + "/v1", api_key="none")
    expected = generate(t5_loaded, PROMPTS[3], max_new_tokens=8)[0]
    completion = client.completions.create(model="m", prompt=PROMPTS[3], max_tokens=8, temperature=0)
    assert completion.choices[0].text == expected and completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 8
    chunks = list(client.completions.create(model="m", prompt=PROMPTS[3], max_tokens=8, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks).strip() == expected
    assert chunks[-1].choices[0].finish_reason == "length" and len(chunks) >= 8
    sampled = client.completions.create(model="m", prompt=PROMPTS[3], max_tokens=8, temperature=0.7, seed=5)
    assert sampled.choices[0].text == generate(t5_loaded, PROMPTS[3], max_new_tokens=8, do_sample=True,
                                               temperature=0.7, top_k=0, seed=5)[0]


# ---------------------------------------------------------------------------- batching


def test_concurrent_generations_each_equal_their_unbatched_answer(t5_server, t5_loaded):
    base, state = t5_server
    from _serving import generate_concurrently

    lengths = [5, 17, 9, 13, 3, 11, 7, 15]
    jobs = [(PROMPTS[i % len(PROMPTS)], n) for i, n in enumerate(lengths)]
    answers = generate_concurrently(base, jobs, spacing=0.01)
    assert answers == [generate(t5_loaded, prompt, max_new_tokens=n)[0] for prompt, n in jobs]
    metrics = httpx.get(base + "/metrics").text
    assert 'bertkit_batch_requests_count{task="generate"}' in metrics


def test_a_stream_cut_by_its_client_frees_its_slot(t5_dir):
    from _serving import running_server

    with running_server(t5_dir, max_batch_requests=1) as (base, state):
        state.served.generator.model.config.eos_token_id = None  # only the client's leaving can end it early
        with httpx.stream("POST", base + "/generate_stream",
                          json={"inputs": PROMPTS[0], "parameters": {"max_new_tokens": 5000}}) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    break  # one token, then the client goes away
        deadline = time.monotonic() + 10  # 5000 steps would take minutes
        while state.batcher.stepper.active:
            assert time.monotonic() < deadline, "the abandoned row still runs"
            time.sleep(0.05)
        answer = httpx.post(base + "/generate", json={"inputs": PROMPTS[1], "parameters": {"max_new_tokens": 4}},
                            timeout=60)
        assert answer.status_code == 200  # the one slot is free again


def test_generation_beyond_the_queue_is_429_and_a_waiting_request_joins_later(t5_dir):
    from _serving import a_full_generation_queue, running_server

    with running_server(t5_dir, max_batch_requests=1, max_queue=1) as (base, state):
        state.served.generator.model.config.eos_token_id = None  # this server's own model: no EOS ends the stream early
        with a_full_generation_queue(base, state, PROMPTS, 300) as (answers, waiting):
            pass
        waiting.join(timeout=120)  # the stream was cut: its slot went to the waiting request
        assert answers["waiting"].status_code == 200
