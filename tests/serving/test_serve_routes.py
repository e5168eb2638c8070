"""Every route of a real server answers what the inference layer answers directly, and every
malformed request gets a 4xx JSON error naming the problem while the server keeps serving."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
from _serving import LABELS, running_server

import bertkit
from bertkit.inference.loading import load_encoder, load_masked_lm

TEXTS = ["The bank raised rates.", "We sat on the river bank.", "Fine."]
LONG = " ".join(["word"] * 100)  # more than the 64 positions of the tiny models


def post(base: str, path: str, body) -> httpx.Response:
    return httpx.post(base + path, json=body, timeout=60)


# ---------------------------------------------------------------------------- model-less routes


def test_health_info_and_routes(pair_server, model_dirs):
    base, _ = pair_server
    assert httpx.get(base + "/health").json() == {"status": "ok"}
    info = httpx.get(base + "/info").json()
    assert info["model_dir"] == str(model_dirs["pair"]) and info["model_type"] == "bert"
    assert info["task"] == "classification" and info["labels"] == LABELS["classification"]
    assert info["precision"] == "fp32" and info["hidden_size"] == 32
    assert info["max_input_length"] == {"embed": 64, "predict": 64, "fill_mask": None, "generate": None}
    assert info["serves"] == "predict"  # POST / answers /predict, as TEI's root for a classifier
    assert info["limits"]["max_batch_tokens"] == 16384 and info["limits"]["truncate"] is True
    assert "POST /predict" in info["routes"] and "POST /embed" in info["routes"]
    assert "POST /fill-mask" not in info["routes"] and "POST /generate" not in info["routes"]


def test_tokenize_gives_ids_offsets_and_special_tokens(mlm_server):
    base, state = mlm_server
    tokens = post(base, "/tokenize", {"inputs": "Hello, world"}).json()  # TEI: a bare list per text
    assert [t["text"] for t in tokens[0]] == ["[CLS]", "hello", ",", "world", "[SEP]"]
    assert [(t["start"], t["stop"]) for t in tokens[0][1:4]] == [(0, 5), (5, 6), (7, 12)]
    assert [t["special"] for t in tokens[0]] == [True, False, False, False, True]
    assert [t["id"] for t in tokens[0]] == state.served.tokenizer("Hello, world")["input_ids"]
    bare = post(base, "/tokenize", {"inputs": ["a b"], "add_special_tokens": False}).json()
    assert [t["text"] for t in bare[0]] == ["a", "b"]


# ---------------------------------------------------------------------------- embeddings


def test_embed_equals_a_direct_embed_call(mlm_server, model_dirs):
    base, _ = mlm_server
    direct = bertkit.embed(TEXTS, model=load_encoder(model_dirs["mlm"]))
    answer = post(base, "/embed", {"inputs": TEXTS, "normalize": False})
    assert answer.headers["x-bertkit-truncated"] == "" and int(answer.headers["x-compute-tokens"]) > 0
    np.testing.assert_allclose(np.array(answer.json()), direct, atol=1e-5)  # TEI: a bare array
    single = post(base, "/embed", {"inputs": TEXTS[0]}).json()  # TEI normalizes by default
    np.testing.assert_allclose(single, direct[:1] / np.linalg.norm(direct[:1], axis=1, keepdims=True), atol=1e-5)
    assert post(base, "/", {"inputs": TEXTS[0]}).json() == single  # POST / embeds (an encoder)
    tokens = post(base, "/embed_all", {"inputs": TEXTS[:2]}).json()
    lengths = [len(ids) for ids in load_encoder(model_dirs["mlm"]).tokenizer(TEXTS[:2])["input_ids"]]
    assert [len(t) for t in tokens] == lengths and len(tokens[0][0]) == 32


def test_openai_embeddings_shape_and_base64(mlm_server, model_dirs):
    base, _ = mlm_server
    answer = post(base, "/v1/embeddings", {"input": TEXTS[:2], "model": "any"}).json()
    assert answer["object"] == "list" and answer["model"] == "mlm"
    assert [d["object"] for d in answer["data"]] == ["embedding"] * 2 and [d["index"] for d in answer["data"]] == [0, 1]
    lengths = [len(ids) for ids in load_encoder(model_dirs["mlm"]).tokenizer(TEXTS[:2])["input_ids"]]
    assert answer["usage"] == {"prompt_tokens": sum(lengths), "total_tokens": sum(lengths)}
    packed = post(base, "/v1/embeddings", {"input": TEXTS[0], "encoding_format": "base64"}).json()
    vector = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(vector, answer["data"][0]["embedding"], atol=1e-6)


# ---------------------------------------------------------------------------- task heads


def test_predict_pair_classification(pair_server, model_dirs):
    base, _ = pair_server
    pairs = [["The cat sat.", "A cat was sitting."], ["It rains.", "The sun shines."]]
    answer = post(base, "/predict", {"inputs": pairs}).json()  # a batch: per pair, every label best first
    direct = bertkit.predict(model_dirs["pair"], [tuple(p) for p in pairs], device="cpu")
    assert [p[0]["label"] for p in answer] == [p["label"] for p in direct]
    for served, expected in zip(answer, direct):
        assert {p["label"] for p in served} == set(LABELS["classification"])
        assert served[0]["score"] == pytest.approx(expected["score"], abs=1e-5)
        assert {p["label"]: p["score"] for p in served} == pytest.approx(expected["scores"], abs=1e-5)
    one = post(base, "/predict", {"inputs": pairs[0]}).json()  # one pair: TEI's single answer
    assert [p["label"] for p in one] == [p["label"] for p in answer[0]]
    top = post(base, "/", {"inputs": pairs[0], "parameters": {"top_k": 1}}).json()  # POST /: /predict
    assert len(top) == 1 and top[0]["score"] == pytest.approx(one[0]["score"], abs=1e-6)


@pytest.mark.parametrize("family, inputs", [
    ("tagging", ["John Smith lives in Paris.", ["Mary", "went", "to", "Rome"]]),
    ("qa", [["Where does John live?", "John Smith lives in Paris, a city in France."],
            {"question": "Who lives in Paris?", "context": "John Smith lives in Paris."}]),
    ("multiple_choice", [["The man opened the door.", ["He walked in.", "The moon sang.", "Fish fly."]],
                         {"context": "She was hungry.", "choices": ["She ate.", "She slept."]}]),
])
def test_predict_every_task_head(model_dirs, family, inputs):
    direct = bertkit.predict(model_dirs[family], [tuple(i) if isinstance(i, list) else i for i in inputs],
                             device="cpu")
    with running_server(model_dirs[family]) as (base, _):
        answer = post(base, "/predict", {"inputs": inputs}).json()  # other heads: bertkit's predictions
    for served, expected in zip(answer, direct):
        for key in ("label", "answer", "start", "end", "tags", "words"):
            assert served.get(key) == (list(expected[key]) if isinstance(expected.get(key), tuple)
                                       else expected.get(key))
        if "score" in expected:
            assert served["score"] == pytest.approx(expected["score"], abs=1e-5)
        if family == "tagging":
            assert [(e["type"], e["start"], e["end"]) for e in served["entities"]] == \
                   [(e["type"], e["start"], e["end"]) for e in expected["entities"]]


def test_fill_mask_equals_a_direct_call(mlm_server, model_dirs):
    base, _ = mlm_server
    texts = ["Paris is a beautiful [MASK].", "The [MASK] sat on the [MASK]."]
    direct = bertkit.fill_mask(texts, load_masked_lm(model_dirs["mlm"]), top_k=3)
    answer = post(base, "/fill-mask", {"inputs": texts, "top_k": 3}).json()
    assert [[[c["token"] for c in mask] for mask in text] for text in answer] == \
           [[[c["token"] for c in mask] for mask in text] for text in direct]
    assert answer[1][1][0]["score"] == pytest.approx(direct[1][1][0]["score"], abs=1e-5)
    one = post(base, "/fill-mask", {"inputs": texts[0]}).json()
    assert len(one) == 1 and len(one[0]) == 1 and len(one[0][0]) == 5  # one text, one mask, top 5


# ---------------------------------------------------------------------------- long inputs


def test_long_inputs_are_truncated_and_the_answer_says_which(mlm_server, pair_server):
    base, state = mlm_server
    answer = post(base, "/embed", {"inputs": ["short", LONG]})
    assert answer.headers["x-bertkit-truncated"] == "1" and len(answer.json()) == 2
    refused = post(base, "/embed", {"inputs": ["short", LONG], "truncate": False})
    assert refused.status_code == 413 and "inputs[1]: longer than the model's limit of 64 tokens" in refused.json()["error"]
    pair_base, _ = pair_server
    assert post(pair_base, "/predict", {"inputs": [["a", LONG], ["a", "b"]]}).headers["x-bertkit-truncated"] == "0"
    assert "bertkit_inputs_truncated_total{route=\"/embed\"} 1" in httpx.get(base + "/metrics").text


def test_no_truncate_server_refuses_long_inputs(model_dirs):
    with running_server(model_dirs["mlm"], truncate=False) as (base, _):
        refused = post(base, "/fill-mask", {"inputs": [LONG + " [MASK]"]})
        assert refused.status_code == 413 and "truncation is off" in refused.json()["error"]
        assert post(base, "/embed", {"inputs": [LONG], "truncate": True}).headers["x-bertkit-truncated"] == "0"


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("path, body, status, names", [
    ("/embed", b"{not json", 400, "not valid JSON"),
    ("/embed", b"", 400, "empty"),
    ("/embed", b'{"inputs": "\xff"}', 400, "not valid JSON"),
    ("/embed", b"[" * 3000 + b"]" * 3000, 400, "nested too deeply"),
    ("/embed", b"[1, 2]", 422, "expected a JSON object"),
    ("/embed", {}, 422, "inputs: required field missing"),
    ("/embed", {"inputs": 3}, 422, "inputs: expected a string or a list of strings, got a number"),
    ("/embed", {"inputs": ["a", 5]}, 422, "inputs[1]: expected a string"),
    ("/embed", {"inputs": []}, 400, "inputs: empty list"),
    ("/embed", {"inputs": ["a", "  "]}, 422, "inputs[1]: empty text"),
    ("/embed", {"inputs": ["a"] * 9}, 413, "9 inputs, more than max_client_batch_size=8"),
    ("/embed", {"inputs": ["x" * 9000]}, 413, "more than max_body_bytes=8192"),
    ("/embed", {"inputs": ["a"], "pooling": "cls"}, 422, "pooling: unknown field"),
    ("/embed", {"inputs": ["a"], "normalize": "yes"}, 422, "normalize: expected true or false"),
    ("/embed", {"inputs": [" ".join(["word"] * 60)] * 8}, 413, "more than max_batch_tokens=300"),
    ("/fill-mask", {"inputs": ["no mask here"]}, 422, "inputs[0]: no [MASK] token"),
    ("/fill-mask", {"inputs": ["a [MASK]"], "top_k": 0}, 422, "top_k: expected an integer in 1..100"),
    ("/fill-mask", {"inputs": ["a [MASK]", LONG + " [MASK]"]}, 422, "inputs[1] has no [MASK] token within the first 64"),
    ("/v1/embeddings", {"input": [[1, 2, 3]]}, 422, "token-id arrays are not supported"),
    ("/v1/embeddings", {"input": "a", "encoding_format": "hex"}, 422, "encoding_format: expected one of float, base64"),
    ("/v1/embeddings", {"input": "a", "dimensions": 8}, 422, "dimensions: this model's embeddings have 32"),
    ("/predict", {"inputs": ["a"]}, 424, "/predict: not served for this model"),
    ("/generate", {"inputs": "a"}, 424, "/generate: not served for this model"),
    ("/decode", {"ids": [[1, "x"]]}, 422, "ids[0]: expected a list of token ids"),
    ("/embed", {"inputs": "a", "truncation_direction": "Left"}, 422, "truncation_direction: only"),
    ("/nowhere", {}, 404, "Not Found; routes: /health"),
])
def test_malformed_requests_get_a_json_error_naming_the_problem(mlm_server, path, body, status, names):
    base, _ = mlm_server
    if isinstance(body, bytes):
        response = httpx.post(base + path, content=body, headers={"content-type": "application/json"})
    else:
        response = post(base, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    if path.startswith("/v1/"):  # OpenAI's shape, which its client reads
        assert names in error["message"] and error["type"] == "invalid_request_error" and error["code"]
    else:
        assert names in error and response.json()["error_type"]
    assert httpx.get(base + "/health").status_code == 200  # still serving


def test_oversized_body_without_content_length_is_cut_off(mlm_server):
    base, _ = mlm_server

    def chunks():
        yield b'{"inputs": ["'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"]}'

    response = httpx.post(base + "/embed", content=chunks())  # chunked: no content-length
    assert response.status_code == 413 and "max_body_bytes" in response.json()["error"]


def test_wrong_method_and_bad_predict_inputs(pair_server):
    base, _ = pair_server
    assert httpx.get(base + "/predict").status_code == 405
    response = post(base, "/predict", {"inputs": ["just one text"]})  # the model classifies pairs
    assert response.status_code == 422 and response.json()["error"].startswith("inputs[0]: this model classifies text pairs")
    response = post(base, "/predict", {"inputs": [["a", "b"], None]})
    assert response.status_code == 422 and "inputs[1]: expected a text or a pair [text, text], got null" in response.json()["error"]
