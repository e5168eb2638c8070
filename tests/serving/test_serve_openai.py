"""OpenAI's protocol beyond embeddings and completions, through the real clients: errors in
OpenAI's shape (the client's exception carries the message and the field), /v1/models,
chat completions with the checkpoint's chat template (refused in one line without one), the
API key (openai's api_key=, huggingface_hub's token=), and a prompt longer than the context
said so (TGI: x-bertkit-truncated; OpenAI: usage counts the kept tokens, the same header) or
refused with truncation off."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest

from bertkit.inference.generation import generate, load_generator

huggingface_hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")

TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}[{{ m['content'] }}]\n"
            "{% else %}{{ m['role'] }}: {{ m['content'] | trim }}\n{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}assistant:{% endif %}")
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  The cute dog walks in the "}]
LONG = " ".join(["The cute dog walks in the green park."] * 20)  # far more than the 64 positions


@pytest.fixture(scope="module")
def gpt_dirs(tmp_path_factory):
    """A tiny random GPT-2 (64 positions, no chat template: a base model) and a copy whose
    tokenizer_config.json has a chat template."""
    from _gpt_checkpoint import build_gpt_checkpoint

    base = build_gpt_checkpoint(tmp_path_factory.mktemp("gpt-base"))
    chat = tmp_path_factory.mktemp("gpt-chat") / "gpt-chat"
    shutil.copytree(base, chat)
    config = json.loads((chat / "tokenizer_config.json").read_text())
    (chat / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": TEMPLATE}))
    return {"base": base, "chat": chat}


@pytest.fixture(scope="module")
def chat_server(gpt_dirs):
    from _serving import running_server

    with running_server(gpt_dirs["chat"]) as served:
        yield served


@pytest.fixture(scope="module")
def base_server(gpt_dirs):
    from _serving import running_server

    with running_server(gpt_dirs["base"]) as served:
        yield served


def client(base: str, api_key: str = "none"):
    return openai.OpenAI(base_url=base + "/v1", api_key=api_key, max_retries=0)


# ---------------------------------------------------------------------------- errors


def test_openai_errors_carry_their_message_and_field(base_server):
    base, _ = base_server
    with pytest.raises(openai.UnprocessableEntityError) as empty:
        client(base).completions.create(model="m", prompt="", max_tokens=4)
    assert empty.value.param == "prompt" and "prompt: expected a non-empty text" in empty.value.body["message"]
    with pytest.raises(openai.UnprocessableEntityError) as n:
        client(base).completions.create(model="m", prompt="A cat", max_tokens=4, n=2)
    assert n.value.param == "n" and n.value.body["message"].startswith("n: must be 1")
    assert n.value.type == "invalid_request_error" and n.value.code == "validation"
    unknown = httpx.post(base + "/v1/nowhere", json={})  # a 404 under /v1 is OpenAI's shape too
    assert unknown.status_code == 404 and "Not Found" in unknown.json()["error"]["message"]
    tgi = httpx.post(base + "/generate", json={"inputs": ""})  # TGI's routes keep TGI's shape
    assert tgi.status_code == 422 and tgi.json() == {"error": "inputs: expected a non-empty text",
                                                     "error_type": "validation"}


# ---------------------------------------------------------------------------- models, chat


def test_models_lists_the_served_model(base_server, gpt_dirs):
    base, _ = base_server
    models = client(base).models.list()
    assert [m.id for m in models.data] == [gpt_dirs["base"].name]
    assert models.data[0].object == "model" and models.data[0].owned_by == "bertkit" and models.data[0].created > 0
    assert client(base).models.retrieve(gpt_dirs["base"].name).id == gpt_dirs["base"].name
    with pytest.raises(openai.NotFoundError):
        client(base).models.retrieve("gpt-4")


def test_chat_template_renders_as_transformers_apply_chat_template(gpt_dirs):
    transformers = pytest.importorskip("transformers")
    from bertkit.serving.chat import render_chat
    from bertkit.tokenization import Tokenizer

    directory = gpt_dirs["chat"]
    reference = transformers.PreTrainedTokenizerFast.from_pretrained(directory)
    expected = reference.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert render_chat(directory, Tokenizer.from_pretrained(directory), MESSAGES) == expected
    assert expected.startswith("[Be brief.]\nuser: The cute dog")  # no bos_token: it renders empty


def test_chat_completions_generate_from_the_chat_template(chat_server, gpt_dirs):
    from bertkit.serving.chat import render_chat

    base, _ = chat_server
    loaded = load_generator(gpt_dirs["chat"], device="cpu")
    prompt = render_chat(gpt_dirs["chat"], loaded.tokenizer, MESSAGES)
    expected = generate(loaded, prompt, max_new_tokens=6, return_full_text=False)[0]
    answer = client(base).chat.completions.create(model="m", messages=MESSAGES, max_tokens=6, temperature=0)
    assert answer.object == "chat.completion" and answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == expected and answer.choices[0].finish_reason == "length"
    assert answer.usage.prompt_tokens == len(loaded.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    chunks = list(client(base).chat.completions.create(model="m", messages=MESSAGES, max_tokens=6, temperature=0,
                                                       stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == expected
    assert chunks[-1].choices[0].finish_reason == "length"


def test_chat_on_a_base_model_names_the_fix(base_server):
    base, _ = base_server
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client(base).chat.completions.create(model="m", messages=MESSAGES, max_tokens=4)
    message = refused.value.body["message"]
    assert "no chat template" in message and "chat_template in its tokenizer_config.json" in message
    assert "\n" not in message and refused.value.param == "messages"


# ---------------------------------------------------------------------------- API key


def test_an_api_key_guards_every_route_but_health(gpt_dirs):
    from _serving import running_server

    with running_server(gpt_dirs["chat"], api_key="s3cret") as (base, _):
        assert httpx.get(base + "/health").status_code == 200
        for method, path in (("GET", "/info"), ("GET", "/metrics"), ("POST", "/generate"), ("POST", "/nowhere")):
            response = httpx.request(method, base + path, json={"inputs": "a"})
            assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer", path
            assert response.json()["error_type"] == "unauthorized"
        with pytest.raises(openai.AuthenticationError) as wrong:
            client(base, api_key="guess").models.list()
        assert "wrong API key" in wrong.value.body["message"]
        assert client(base, api_key="s3cret").models.list().data
        text = client(base, api_key="s3cret").completions.create(model="m", prompt="A cat", max_tokens=3,
                                                                  temperature=0).choices[0].text
        hub = huggingface_hub.InferenceClient(model=base, token="s3cret")
        assert hub.text_generation("A cat", max_new_tokens=3) == text
        with pytest.raises(huggingface_hub.errors.TextGenerationError, match="authorization: missing"):
            huggingface_hub.InferenceClient(model=base).text_generation("A cat", max_new_tokens=3)


def test_serve_takes_the_api_key_from_its_flag_or_the_environment(monkeypatch):
    from bertkit.cli import build_parser

    monkeypatch.setenv("BERTKIT_API_KEY", "from-env")
    assert build_parser().parse_args(["serve", "--model", "m"]).api_key == "from-env"
    assert build_parser().parse_args(["serve", "--model", "m", "--api-key", "flag"]).api_key == "flag"
    monkeypatch.delenv("BERTKIT_API_KEY")
    assert build_parser().parse_args(["serve", "--model", "m"]).api_key is None


def test_an_empty_api_key_is_refused():
    from bertkit.errors import ConfigError
    from bertkit.serving import ServeConfig

    with pytest.raises(ConfigError, match="api_key"):
        ServeConfig(api_key="")
    assert "s3cret" not in repr(ServeConfig(api_key="s3cret"))  # never logged


# ---------------------------------------------------------------------------- truncation


def test_a_prompt_longer_than_the_context_is_said_to_be_cut(base_server, gpt_dirs):
    base, _ = base_server
    loaded = load_generator(gpt_dirs["base"], device="cpu")
    whole = len(loaded.tokenizer(LONG, add_special_tokens=False)["input_ids"])
    assert whole > 64
    tgi = httpx.post(base + "/generate", json={"inputs": LONG, "parameters": {"max_new_tokens": 4}}, timeout=60)
    assert tgi.status_code == 200 and tgi.headers["x-bertkit-truncated"] == "0"
    short = httpx.post(base + "/generate", json={"inputs": "A cat", "parameters": {"max_new_tokens": 4}}, timeout=60)
    assert short.headers["x-bertkit-truncated"] == ""
    raw = client(base).completions.with_raw_response.create(model="m", prompt=LONG, max_tokens=4, temperature=0)
    assert raw.headers["x-bertkit-truncated"] == "0"
    assert raw.parse().usage.prompt_tokens == 64 - 4  # what the model read: the context less max_tokens


def test_truncation_off_refuses_a_long_prompt(base_server, gpt_dirs):
    from _serving import running_server

    base, _ = base_server
    refused = httpx.post(base + "/generate", json={"inputs": LONG, "parameters": {"max_new_tokens": 4,
                                                                                  "truncate": False}})
    assert refused.status_code == 422 and "truncation is off" in refused.json()["error"]
    with pytest.raises(openai.UnprocessableEntityError) as cut:
        client(base).completions.create(model="m", prompt=LONG, max_tokens=4, extra_body={"truncate": False})
    assert cut.value.param == "prompt" and "prompt tokens, more than the 60 this model keeps" in cut.value.body["message"]
    with running_server(gpt_dirs["base"], truncate=False) as (strict, _):  # --no-truncate: the server's default
        assert httpx.post(strict + "/generate", json={"inputs": LONG}).status_code == 422
        kept = httpx.post(strict + "/generate", json={"inputs": LONG, "parameters": {"truncate": True,
                                                                                     "max_new_tokens": 2}})
        assert kept.status_code == 200 and kept.headers["x-bertkit-truncated"] == "0"
