"""A decoder-only model (GPT-2's shape) served: TGI's /generate and OpenAI's completions answer
with the continuation `bertkit generate` writes for the same settings (decoders are generated
whole, one request at a time: `can_decode_steps` is false for them)."""

from __future__ import annotations

import pytest

from bertkit.inference.generation import generate, load_generator

huggingface_hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")

PROMPT = "The cute dog walks in the"


@pytest.fixture(scope="module")
def gpt_dir(tmp_path_factory):
    from _gpt_checkpoint import build_gpt_checkpoint

    return build_gpt_checkpoint(tmp_path_factory.mktemp("gpt"))


@pytest.fixture(scope="module")
def gpt_server(gpt_dir):
    from _serving import running_server

    with running_server(gpt_dir) as served:
        yield served


def test_decoder_generates_whole_not_in_steps(gpt_dir):
    loaded = load_generator(gpt_dir, device="cpu")
    assert loaded.model.can_decode_steps is False


def test_tgi_and_openai_clients_get_bertkit_generate_continuation(gpt_server, gpt_dir):
    base, _ = gpt_server
    expected = generate(gpt_dir, PROMPT, max_new_tokens=8, return_full_text=False)[0]
    assert expected
    client = huggingface_hub.InferenceClient(model=base)
    assert client.text_generation(PROMPT, max_new_tokens=8) == expected
    streamed = list(client.text_generation(PROMPT, max_new_tokens=8, stream=True))
    assert "".join(streamed) == expected
    completion = openai.OpenAI(base_url=f"{base}/v1", api_key="none").completions.create(
        model="m", prompt=PROMPT, max_tokens=8, temperature=0)  # 0: greedy
    assert completion.choices[0].text == expected
