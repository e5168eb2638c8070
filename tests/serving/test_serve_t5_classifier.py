"""A fine-tuned T5 classifier (T5EncoderForSequenceClassification: the encoder and a head, no decoder
weights) serves its predictions (issue 42's journey re-run): `bertkit serve` stopped at start-up with
'30 backbone weights missing (decoder...)' while loading a generator its family has but its folder lacks."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture(scope="module")
def t5_classifier(tmp_path_factory):
    import torch
    from _t5_checkpoint import build_t5_checkpoint

    from bertkit.model.t5 import T5Config
    from bertkit.model.t5.modeling import T5EncoderForSequenceClassification

    directory = build_t5_checkpoint(tmp_path_factory.mktemp("t5-cls"))
    (directory / "model.safetensors").unlink()
    config = T5Config.from_pretrained(directory).with_labels(["negative", "positive"])
    torch.manual_seed(0)
    T5EncoderForSequenceClassification(config).save_pretrained(directory)
    return directory


def test_a_t5_encoder_classifier_serves_predict(t5_classifier):
    from _serving import running_server

    with running_server(t5_classifier) as (base, _):
        info = httpx.get(base + "/info").json()
        assert info["serves"] == "predict" and "POST /generate" not in info["routes"]
        answer = httpx.post(base + "/", json={"inputs": "A cat sat."}).json()
        assert {a["label"] for a in answer} == {"negative", "positive"}
        assert sum(a["score"] for a in answer) == pytest.approx(1.0, abs=1e-5)
        generate = httpx.post(base + "/generate", json={"inputs": "A cat sat."})
        assert generate.status_code == 424 and "missing" in generate.json()["error"]
