"""POST / of a generator that also embeds (a pre-trained GPT: /info lists /embed and /similarity):
huggingface_hub's feature_extraction of a list and sentence_similarity post there, and get TEI's
answers (the vectors /embed gives, the cosines /similarity gives), while a text still generates
(TGI's root). They answered 422 'inputs: expected a non-empty text' (issue 42's journey re-run)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")

TEXTS = ["The cute dog walks in the park.", "A cat sat."]


@pytest.fixture(scope="module")
def gpt_server(tmp_path_factory):
    from _gpt_checkpoint import build_gpt_checkpoint
    from _serving import running_server

    with running_server(build_gpt_checkpoint(tmp_path_factory.mktemp("gpt"))) as served:
        yield served


def test_feature_extraction_and_similarity_at_a_generators_root(gpt_server):
    base, _ = gpt_server
    info = httpx.get(base + "/info").json()
    assert info["serves"] == "generate" and "POST /embed" in info["routes"] and "POST /similarity" in info["routes"]
    client = huggingface_hub.InferenceClient(model=base)
    vectors = client.feature_extraction(TEXTS)
    expected = httpx.post(base + "/embed", json={"inputs": TEXTS}).json()
    assert vectors.shape == (2, len(expected[0]))
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    scores = client.sentence_similarity(TEXTS[0], other_sentences=[TEXTS[1], TEXTS[0]])
    assert scores == pytest.approx(httpx.post(base + "/similarity", json={
        "inputs": {"source_sentence": TEXTS[0], "sentences": [TEXTS[1], TEXTS[0]]}}).json(), abs=1e-6)
    assert scores[1] == pytest.approx(1.0, abs=1e-5)
    # one text is TGI's prompt: the root still generates
    generated = client.text_generation(TEXTS[0], max_new_tokens=4, details=True)
    assert generated.details.generated_tokens >= 1
    answer = httpx.post(base + "/", json={"inputs": TEXTS[0], "parameters": {"max_new_tokens": 4}}).json()
    assert answer["generated_text"] == generated.generated_text
